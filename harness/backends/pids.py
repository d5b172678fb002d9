"""The registry of processes the local backend started, so that leftovers can always be found.

Each run owns a directory under `base_dir()` (`/tmp/kraft-jepsen-<uid>/local/<run_id>/`) holding
`owner.json` (the harness process) and `pids/<node>.json` (each node daemon), and the nodes' own
directories. A record carries the process's start time from /proc, so that a recycled pid is never
mistaken for ours. A run whose owner is gone is a leftover: `sweep()` kills its process groups and
removes its directory. Runs whose owner still lives (another test, another engineer) are left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from contracts.backend import ProcessState


def base_dir() -> Path:
    override = os.environ.get("KRAFT_LOCAL_DIR")
    root = Path(override) if override else Path(tempfile.gettempdir()) / f"kraft-jepsen-{os.getuid()}"
    return root / "local"


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name may hold spaces and parentheses: fields resume after the last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[19])


def state_in(stat: str) -> ProcessState:
    """The state a process's /proc/<pid>/stat text gives ("" when it could not be read): T or t
    (stopped by a signal, or traced) is `stopped`; Z and X (dead, not yet reaped) and nothing
    are `gone`; any other (R, S, D, ...) is `running`."""
    try:
        state = stat[stat.rindex(")") + 2:].split()[0]
    except (ValueError, IndexError):
        return "gone"
    if state in ("T", "t"):
        return "stopped"
    return "gone" if state in ("Z", "X", "x") else "running"


def alive(record: dict[str, int]) -> bool:
    ticks = start_ticks(record["pid"])
    return ticks is not None and ticks == record.get("start")


def record_for(pid: int) -> dict[str, int]:
    return {"pid": pid, "start": start_ticks(pid) or 0}


def write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, int] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def claim(run: Path, pid: int) -> None:
    """Make the run's directory with its owner already recorded in it (built aside under a hidden
    name, then renamed), so that a concurrent sweep never sees it without an owner."""
    if run.is_dir():
        write_json(run / "owner.json", record_for(pid))
        return
    run.parent.mkdir(parents=True, exist_ok=True)
    aside = Path(tempfile.mkdtemp(prefix=f".{run.name}.", dir=run.parent))
    write_json(aside / "owner.json", record_for(pid))
    try:
        os.rename(aside, run)
    except OSError:  # made meanwhile: claim it in place
        shutil.rmtree(aside, ignore_errors=True)
        write_json(run / "owner.json", record_for(pid))


def kill_group(record: dict[str, int]) -> bool:
    """SIGKILL the recorded process's group (nodes lead their own group); True if it was alive."""
    if not alive(record):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(record["pid"], signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(record["pid"], signal.SIGCONT)  # a stopped process dies only once continued
    return True


def sweep(everything: bool = False) -> list[str]:
    """Kill the processes of every run whose harness is gone and remove its directory; with
    `everything`, of live runs too."""
    removed: list[str] = []
    root = base_dir()
    if not root.is_dir():
        return removed
    for run in sorted(root.iterdir()):
        if not run.is_dir():
            continue
        owner = read_json(run / "owner.json")
        if run.name.startswith("."):
            # a directory being claimed; left by a harness that died before renaming it
            if (owner is None or not alive(owner)) and time.time() - run.stat().st_mtime > 60:
                shutil.rmtree(run, ignore_errors=True)
            continue
        if not everything and owner is not None and alive(owner):
            continue
        for pid_file in sorted((run / "pids").glob("*.json")):
            record = read_json(pid_file)
            if record is not None and kill_group(record):
                removed.append(f"local process {record['pid']} ({run.name}/{pid_file.stem})")
        removed += unmount_under(run)
        shutil.rmtree(run, ignore_errors=True)
        removed.append(f"local run directory {run}")
    return removed


def unmount_under(run: Path) -> list[str]:
    """Unmount the disk nemeses' filesystems (`kraft faultfs`) mounted under a run's directory,
    before it is removed: their processes outlive a harness killed by SIGKILL."""
    from nemesis.faultfs import mounts, unmount

    removed = []
    root = str(run.resolve())
    for _fsname, mountpoint in mounts():
        if mountpoint == root or mountpoint.startswith(root + "/"):
            try:
                unmount(mountpoint)
                removed.append(f"fault filesystem mounted at {mountpoint}")
            except Exception as exc:
                removed.append(f"fault filesystem at {mountpoint} NOT unmounted: {exc}")
    return removed
