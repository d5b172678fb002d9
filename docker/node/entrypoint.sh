#!/bin/sh
# Container start: a host key of this container's own, the run's public key, then sshd in front.
# The harness reads the host key back (docker exec) to pin it, so it never trusts on first use.
set -eu
if [ ! -f /etc/ssh/ssh_host_ed25519_key ]; then
    ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key
fi
if [ -n "${KRAFT_AUTHORIZED_KEY:-}" ]; then
    printf '%s\n' "$KRAFT_AUTHORIZED_KEY" > /root/.ssh/authorized_keys
    chmod 600 /root/.ssh/authorized_keys
fi
mkdir -p /run/sshd /run/kraft-jepsen
exec /usr/sbin/sshd -D -e "$@"
