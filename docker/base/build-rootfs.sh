#!/bin/sh
# Makes the Debian root of the base image and packs it as a tar for `docker import`.
#   build-rootfs.sh RELEASE MIRROR PACKAGES OUT_TAR [CACHE_DIR]
# Run as root (debootstrap needs it). PACKAGES is comma separated.
set -eu
release=$1 mirror=$2 packages=$3 out=$4 cache=${5:-}

root=$(mktemp -d /tmp/kraft-jepsen-rootfs.XXXXXX)
# The root holds device nodes and root-owned files: always remove it, even when a step fails.
trap 'rm -rf "$root"' EXIT INT TERM

set -- --variant=minbase --include="$packages"
if [ -n "$cache" ]; then
    mkdir -p "$cache"
    set -- "$@" --cache-dir="$cache"
fi
echo "debootstrap $release from $mirror"
debootstrap "$@" "$release" "$root" "$mirror"

# The release must give Python 3.11+ (the project's floor).
chroot "$root" python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
    echo "error: $release ships $(chroot "$root" python3 --version); the project needs 3.11+" >&2
    exit 1
}

# Host keys made by the postinst would be shared by every container: they are made at start.
rm -f "$root"/etc/ssh/ssh_host_*
printf 'deb %s %s main\n' "$mirror" "$release" > "$root/etc/apt/sources.list"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log \
       "$root"/tmp/* "$root"/root/.cache

tar --numeric-owner --xattrs -C "$root" -cf "$out" .
echo "packed $(du -h "$out" | cut -f1) into $out"
