"""`kraft faultfs`: mount the fault-injecting filesystem, pull its levers, unmount it.

    kraft faultfs mount BACKING MOUNTPOINT --control SOCK [--fsname NAME] [--daemon] [--log FILE]
    kraft faultfs check
    kraft faultfs ctl SOCK ping|stall SECONDS|slow MS|heal|status|repair
    kraft faultfs ctl SOCK lose-unsynced [--torn] [--seed N]
    kraft faultfs ctl SOCK corrupt --glob G [--glob G ...] [--mode bitflip|truncate] [--seed N]
    kraft faultfs unmount MOUNTPOINT
    kraft faultfs sweep [--prefix kraft-faultfs]

`mount --daemon` starts the filesystem in a process of its own session (its output to --log or
/dev/null) and returns only once the mount is in the mount table under NAME and the control
socket answers a ping. Exit codes: 0 done, 1 the filesystem refused a `ctl` command (its JSON
answer carries "error"), 3 failed (nothing answers on SOCK, the mount did not come up, an
unmount left it mounted), 64 bad usage, 69 this host cannot mount (`check` says why, on one
line).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .control import CORRUPT_MODES, request
from .host import FSNAME_PREFIX, check_usable, mounted_at, sweep, unmount

EXIT_REFUSED = 1
EXIT_FAILED = 3
EXIT_USAGE = 64
EXIT_UNAVAILABLE = 69
MOUNT_TIMEOUT = 20.0
MAX_SOCKET_PATH = 108  # sun_path, with its terminating NUL
PROG = "kraft faultfs"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="The fault-injecting FUSE filesystem under a node's data "
                               "(fsync stalls, power cuts that lose unsynced data, corruption).")
    sub = parser.add_subparsers(dest="command", required=True)

    mount = sub.add_parser("mount", help="serve BACKING at MOUNTPOINT")
    mount.add_argument("backing")
    mount.add_argument("mountpoint")
    mount.add_argument("--control", required=True, metavar="SOCK",
                       help="unix socket of the control channel (path under 108 bytes)")
    mount.add_argument("--fsname", default=FSNAME_PREFIX,
                       help=f"name in the mount table (default {FSNAME_PREFIX})")
    mount.add_argument("--daemon", action="store_true",
                       help="run detached; return once mounted and answering")
    mount.add_argument("--log", help="the filesystem's log (default: stderr, /dev/null with "
                                     "--daemon)")

    sub.add_parser("check", help="can this host mount? (exit 69 with the reason if not)")

    ctl = sub.add_parser("ctl", help="one control command; prints the JSON answer")
    ctl.add_argument("sock")
    ops = ctl.add_subparsers(dest="op", required=True)
    ops.add_parser("ping")
    ops.add_parser("heal")
    ops.add_parser("status")
    ops.add_parser("repair", help="undo every corruption since the last repair")
    ops.add_parser("stall").add_argument("seconds", type=float)
    ops.add_parser("slow").add_argument("ms", type=float)
    lose = ops.add_parser("lose-unsynced")
    lose.add_argument("--torn", action="store_true")
    lose.add_argument("--seed", type=int, default=0)
    corrupt = ops.add_parser("corrupt")
    corrupt.add_argument("--glob", action="append", required=True, dest="globs")
    corrupt.add_argument("--mode", choices=CORRUPT_MODES, default="bitflip")
    corrupt.add_argument("--seed", type=int, default=0)

    sub.add_parser("unmount", help="unmount (lazily if busy)").add_argument("mountpoint")
    sweep_p = sub.add_parser("sweep", help="unmount every mount whose fsname has the prefix")
    sweep_p.add_argument("--prefix", default=FSNAME_PREFIX)
    return parser


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else EXIT_USAGE
    handler = {"mount": _mount, "check": _check, "ctl": _ctl, "unmount": _unmount,
               "sweep": _sweep}[args.command]
    return handler(args)


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr)


def _check(args: argparse.Namespace) -> int:
    reason = check_usable()
    if reason is not None:
        _say(reason)
        return EXIT_UNAVAILABLE
    print(f"{PROG}: this host can mount")
    return 0


def _ctl(args: argparse.Namespace) -> int:
    command: dict[str, Any] = {"op": args.op}
    if args.op == "stall":
        command["seconds"] = args.seconds
    elif args.op == "slow":
        command["ms"] = args.ms
    elif args.op == "lose-unsynced":
        command.update(torn=args.torn, seed=args.seed)
    elif args.op == "corrupt":
        command.update(globs=args.globs, mode=args.mode, seed=args.seed)
    try:
        reply = request(args.sock, command)
    except (OSError, ValueError) as exc:
        _say(f"nothing answers on {args.sock}: {exc}")
        return EXIT_FAILED
    print(json.dumps(reply))
    return EXIT_REFUSED if "error" in reply else 0


def _unmount(args: argparse.Namespace) -> int:
    try:
        unmount(args.mountpoint)
    except OSError as exc:
        _say(str(exc))
        return EXIT_FAILED
    return 0


def _sweep(args: argparse.Namespace) -> int:
    try:
        for mountpoint in sweep(args.prefix):
            print(mountpoint)
    except OSError as exc:
        _say(str(exc))
        return EXIT_FAILED
    return 0


# --- mount ------------------------------------------------------------------------------------


def _mount(args: argparse.Namespace) -> int:
    reason = check_usable()
    if reason is not None:
        _say(reason)
        return EXIT_UNAVAILABLE
    backing = os.path.realpath(args.backing)
    mountpoint = os.path.realpath(args.mountpoint)
    control = os.path.abspath(args.control)
    if any(c in args.fsname for c in ", \t\n\\"):
        _say(f"--fsname {args.fsname!r}: no commas, blanks or backslashes")
        return EXIT_USAGE
    if len(os.fsencode(control)) >= MAX_SOCKET_PATH:
        _say(f"--control {control}: a unix socket path has fewer than {MAX_SOCKET_PATH} bytes")
        return EXIT_USAGE
    if backing == mountpoint or backing.startswith(mountpoint + "/"):
        _say(f"the backing directory {backing} must not be under the mountpoint")
        return EXIT_USAGE
    os.makedirs(backing, exist_ok=True)
    os.makedirs(mountpoint, exist_ok=True)
    if mounted_at(mountpoint) is not None:
        _say(f"{mountpoint} is already a mount point (`{PROG} unmount` it first)")
        return EXIT_FAILED
    if args.daemon:
        return _start_daemon(backing, mountpoint, control, args.fsname, args.log)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
        filename=args.log)
    from .fs import serve

    try:
        serve(backing, mountpoint, control, args.fsname)
    except RuntimeError as exc:
        _say(f"mounting {backing} at {mountpoint} failed (libfuse: {exc}; see above)")
        return EXIT_FAILED
    return 0


def _start_daemon(backing: str, mountpoint: str, control: str, fsname: str,
                  log_path: str | None) -> int:
    argv = [sys.executable, "-m", "nemesis.faultfs.cli", "mount", backing, mountpoint,
            "--control", control, "--fsname", fsname]
    # The child finds this package wherever this one was found.
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH")) if p), "PYTHONUNBUFFERED": "1"}
    if log_path:
        os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    out = open(log_path or os.devnull, "ab")  # noqa: SIM115 - handed to the child
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                env=env, start_new_session=True, close_fds=True)
    finally:
        out.close()
    deadline = time.monotonic() + MOUNT_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            _say(f"the filesystem exited ({proc.returncode}) before it was mounted"
                 + (f": {_last_line(log_path)}" if log_path else ""))
            return EXIT_FAILED
        mount = mounted_at(mountpoint)
        if mount is not None and mount.fsname == fsname:
            try:
                if request(control, {"op": "ping"}, timeout=2.0).get("ok"):
                    print(f"mounted {backing} at {mountpoint} (pid {proc.pid}, control "
                          f"{control})")
                    return 0
            except (OSError, ValueError):
                pass
        time.sleep(0.05)
    _say(f"the filesystem was not mounted and answering within {MOUNT_TIMEOUT:.0f} s")
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
    with contextlib.suppress(OSError):
        unmount(mountpoint)
    return EXIT_FAILED


def _last_line(path: str) -> str:
    try:
        lines = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "empty log"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
