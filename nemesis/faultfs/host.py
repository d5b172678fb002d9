"""What the host offers the filesystem: can it mount, what is mounted, and unmounting.

None of this imports mfusepy, so that the harness can ask on a machine without FUSE.

- `check_usable`: the FUSE device opens read-write, libfuse3 loads, mfusepy imports, and the
  process may mount (root with CAP_SYS_ADMIN, or fusermount3 on the PATH). The device path can
  be changed by `KRAFT_FAULTFS_DEVICE` (the tests point it at a missing file).
- `mounts`: (fsname, mountpoint) of the mounts whose fsname starts with a prefix, read from
  /proc/self/mountinfo (whose octal escapes of spaces and the like are undone).
- `unmount`: fusermount3 -u (umount where there is none); when the mount is busy, a stall is
  healed first (a process blocked in a stalled fsync holds its file open, and would keep the
  filesystem process alive after a lazy unmount until the stall ends: the control socket is
  found in the serving process's command line), then the lazy variant, and the FUSE connection
  is aborted where fusectl is mounted (/sys/fs/fuse/connections/N/abort), so that the process
  serving it ends even while a caller still holds a file open.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib.util
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass

FSNAME_PREFIX = "kraft-faultfs"
DEVICE_ENV = "KRAFT_FAULTFS_DEVICE"
DEFAULT_DEVICE = "/dev/fuse"
CAP_SYS_ADMIN = 21
DOCKER_HINT = "docker run --device /dev/fuse --cap-add SYS_ADMIN"
UNMOUNT_WAIT = 5.0


def use_libfuse3() -> None:
    """Make mfusepy load libfuse3 (it tries libfuse 2 first), unless told otherwise."""
    if not os.environ.get("FUSE_LIBRARY_PATH") and not os.environ.get("FUSE_LIBRARY_NAME"):
        os.environ["FUSE_LIBRARY_NAME"] = "fuse3"


def _libfuse3_path() -> str | None:
    return os.environ.get("FUSE_LIBRARY_PATH") or ctypes.util.find_library(
        os.environ.get("FUSE_LIBRARY_NAME") or "fuse3")


def _has_cap_sys_admin() -> bool:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapBnd:"):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return True  # no way to tell: let the mount itself say


def check_usable(device: str | None = None) -> str | None:
    """None when this host can mount the filesystem, else one line: what is missing and how
    to get it."""
    device = device or os.environ.get(DEVICE_ENV) or DEFAULT_DEVICE
    if not os.path.exists(device):
        return (f"no FUSE device {device}: modprobe fuse (or apt-get install fuse3); in a "
                f"container: {DOCKER_HINT}")
    try:
        os.close(os.open(device, os.O_RDWR | os.O_CLOEXEC))
    except OSError as exc:
        return f"cannot open {device} read-write ({exc.strerror}); in a container: {DOCKER_HINT}"
    path = _libfuse3_path()
    if path is None:
        return "libfuse3 is not installed: apt-get install fuse3 (it brings libfuse3-3)"
    try:
        ctypes.CDLL(path)
    except OSError as exc:
        return f"libfuse3 ({path}) does not load: {exc}; apt-get install --reinstall libfuse3-3"
    if importlib.util.find_spec("mfusepy") is None:
        return "mfusepy is not installed: pip install mfusepy"
    use_libfuse3()
    try:
        import mfusepy
    except (OSError, AttributeError, ImportError) as exc:
        return f"mfusepy does not load libfuse3: {exc}; pip install -U mfusepy"
    if mfusepy.fuse_version_major != 3:
        return (f"mfusepy loaded libfuse {mfusepy.fuse_version_major}, not 3: set "
                "FUSE_LIBRARY_NAME=fuse3 (apt-get install fuse3)")
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        return "not root and no fusermount3 on the PATH: apt-get install fuse3"
    if not _has_cap_sys_admin():
        return f"this process may not mount (no CAP_SYS_ADMIN); in a container: {DOCKER_HINT}"
    return None


# --- the mount table ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Mount:
    fsname: str
    mountpoint: str
    device: str
    """major:minor; the minor names the FUSE connection in /sys/fs/fuse/connections."""


_ESCAPE = re.compile(r"\\([0-7]{3})")


def _unescape(field: str) -> str:
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def _table() -> list[Mount]:
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            try:
                sep = fields.index("-", 6)
            except ValueError:
                continue
            found.append(Mount(_unescape(fields[sep + 2]), _unescape(fields[4]), fields[2]))
    return found


def mounts(prefix: str = FSNAME_PREFIX) -> list[tuple[str, str]]:
    """(fsname, mountpoint) of every mount whose fsname starts with `prefix`."""
    return [(m.fsname, m.mountpoint) for m in _table() if m.fsname.startswith(prefix)]


def mounted_at(mountpoint: str) -> Mount | None:
    """The mount on `mountpoint` (the topmost, if stacked), if any."""
    target = os.path.realpath(mountpoint)
    found = [m for m in _table() if m.mountpoint == target]
    return found[-1] if found else None


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return done.returncode, (done.stderr or done.stdout).strip()


def _abort_connection(device: str) -> None:
    """Abort the FUSE connection of a lazily unmounted filesystem: its pending requests fail
    and the process serving it sees the end of its device."""
    minor = device.rpartition(":")[2]
    try:
        with open(f"/sys/fs/fuse/connections/{minor}/abort", "w", encoding="ascii") as f:
            f.write("1")
    except OSError:
        pass


def _control_of(mountpoint: str) -> str | None:
    """The control socket of the `kraft faultfs mount` process serving `mountpoint`, read from
    its command line (None: no such process here)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = [a.decode(errors="surrogateescape") for a in f.read().split(b"\0")]
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if "nemesis.faultfs.cli" not in argv or "--control" not in argv:
            continue
        sock = argv[argv.index("--control") + 1]
        if any(os.path.realpath(os.path.join(cwd, a)) == mountpoint for a in argv[-8:]):
            return os.path.join(cwd, sock)
    return None


def _heal(mountpoint: str) -> None:
    """End any fsync stall of the filesystem at `mountpoint` (best effort)."""
    from .control import request

    sock = _control_of(mountpoint)
    if sock is not None:
        with contextlib.suppress(OSError, ValueError):
            request(sock, {"op": "heal"}, timeout=2.0)


def unmount(mountpoint: str) -> None:
    """Unmount the filesystem at `mountpoint` (nothing when nothing is mounted there). OSError
    if it stays mounted."""
    target = os.path.realpath(mountpoint)
    mount = mounted_at(target)
    if mount is None:
        return
    fusermount = shutil.which("fusermount3")
    tool = [fusermount, "-u"] if fusermount else ["umount"]
    lazy = [*tool, "-z"] if fusermount else ["umount", "-l"]
    code, why = _run([*tool, target])
    if code != 0 and mounted_at(target) == mount:
        _heal(target)
        code, why = _run([*tool, target])
    if code != 0 and mounted_at(target) == mount:
        code, why = _run([*lazy, target])
        _abort_connection(mount.device)
    deadline = time.monotonic() + UNMOUNT_WAIT
    while mounted_at(target) == mount:
        if time.monotonic() > deadline:
            raise OSError(f"{target} is still mounted: {why or 'unmount failed'}")
        time.sleep(0.05)


def sweep(prefix: str = FSNAME_PREFIX) -> list[str]:
    """Unmount every mount whose fsname starts with `prefix` (deepest first); the mountpoints
    unmounted."""
    done = []
    for _fsname, mountpoint in sorted(mounts(prefix), key=lambda m: -len(m[1])):
        unmount(mountpoint)
        done.append(mountpoint)
    return done
