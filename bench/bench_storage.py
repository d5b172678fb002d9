"""Throughput of the metadata log with an fsync per append, as the reference node runs it.

Each step appends one batch of N records (values like the append workload's) and calls
flush(), which fdatasyncs the segment: the rate a leader acknowledges at when every client
request is its own batch. Usage:

    python bench/bench_storage.py [--dir DIR] [--seconds 2] [--sizes 1,10,100]

Use --dir on the disk the nodes will use: tmpfs makes fsync free and the figures meaningless.

With `--restart-records N` it measures a restart instead: it writes N records (ASCII decimal
values, 100 to a batch) into a formatted node directory, closes it cleanly, then times, each in
a fresh interpreter so that the peak RSS is its own, (a) opening the directory's log as the
node does (`NodeStorage.open`, read-only so that a crashed directory stays so) and (b) what `NodeHost.__init__` does with the disk: `Disk(cfg)`, `initial_state()` and the
`RaftCore` built from it. `--crash` leaves the directory as a crash would (no clean-shutdown
marker), so (a) and (b) show an unclean restart.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from reference_node.storage import (
    MetadataLog,
    NodeStorage,
    QuorumState,
    StoredRecord,
    format_storage,
)
from reference_node.storage.meta import METADATA_PARTITION_DIR

RESTART_BATCH = 100
RESTART_CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


def bench(directory: Path, size: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    with MetadataLog.open(directory) as log:
        offset = 0
        deadline = time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            now_ms = int(time.time() * 1000)
            records = [
                StoredRecord(o, 1, str(o).encode(), None, now_ms)
                for o in range(offset, offset + size)
            ]
            start = time.perf_counter()
            log.append(records)
            log.flush()
            latencies.append(time.perf_counter() - start)
            offset += size
    total = sum(latencies)
    latencies.sort()
    return {
        "appends_per_s": len(latencies) / total,
        "records_per_s": len(latencies) * size / total,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


def filesystem_of(path: Path) -> str:
    try:
        out = subprocess.run(
            ["df", "--output=fstype", str(path)], capture_output=True, text=True, check=True
        ).stdout.split()
        return out[-1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


# --- restart ------------------------------------------------------------------------------


def write_restart_dir(log_dir: Path, count: int, crash: bool) -> None:
    format_storage(log_dir, RESTART_CLUSTER_ID, 1)
    now_ms = int(time.time() * 1000)
    with NodeStorage.open(log_dir, node_id=1, cluster_id=RESTART_CLUSTER_ID) as storage:
        # As a node does: the epoch is in quorum-state before the log has records of it.
        storage.quorum_state.write(QuorumState(leader_epoch=1))
        for start in range(0, count, RESTART_BATCH):
            end = min(start + RESTART_BATCH, count)
            storage.log.append([StoredRecord(o, 1, str(o).encode(), None, now_ms)
                                for o in range(start, end)])
            if start % (100 * RESTART_BATCH) == 0:
                storage.log.flush()
    if crash:
        # What a kill -9 leaves: everything flushed, but no clean-shutdown marker.
        (log_dir / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)


def node_config(log_dir: Path) -> object:
    from reference_node.config import from_properties

    return from_properties({
        "node.id": "1",
        "controller.quorum.voters": "1@localhost:9093",
        "listeners": "CONTROLLER://localhost:9093",
        "metadata.log.dir": str(log_dir),
        "cluster.id": RESTART_CLUSTER_ID,
    })


def start_like_the_node(log_dir: Path) -> int:
    """What NodeHost.__init__ does with the disk; returns the core's log end offset."""
    from reference_node.raft.core import RaftCore
    from reference_node.server.node import raft_config
    from reference_node.server.pump import now_ms
    from reference_node.server.storage_adapter import Disk

    cfg: Any = node_config(log_dir)
    disk = Disk(cfg)
    try:
        state, entries = disk.initial_state()
        core = RaftCore(
            cfg.node_id, sorted(cfg.voters), disk.cluster_id, raft_config(cfg),
            random.Random(), now_ms(), quorum_state=state, log=entries,
            log_start_offset=disk.log_start_offset,
        )
        return int(core.log.end_offset)
    finally:
        disk.close()


def peak_rss_kb() -> int:
    """This process image's peak RSS. ru_maxrss would do, but Linux carries it over fork+exec
    from the parent (the writer, here), so /proc's VmHWM (reset by exec) is read when present."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(what: str, log_dir: Path) -> None:
    """Run one restart step in this (fresh) interpreter and print its figures as JSON."""
    if what == "node":
        # Import first so that the baseline counts the interpreter and the code, not the log.
        import reference_node.raft.core
        import reference_node.server.node  # noqa: F401
    baseline = peak_rss_kb()
    start = time.perf_counter()
    if what == "open":
        # Read-only, so that a crashed directory stays crashed for the next step.
        with NodeStorage.open(log_dir, read_only=True) as storage:
            end = storage.log.end_offset
    else:
        end = start_like_the_node(log_dir)
    seconds = time.perf_counter() - start
    peak = peak_rss_kb()
    print(json.dumps({"seconds": seconds, "peak_kb": peak, "baseline_kb": baseline, "end": end}))


def run_measure(what: str, log_dir: Path) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--measure", what, str(log_dir)],
        capture_output=True, text=True, check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def bench_restart(base: Path, count: int, crash: bool) -> None:
    log_dir = base / "node"
    began = time.perf_counter()
    write_restart_dir(log_dir, count, crash)
    size = sum(f.stat().st_size for f in (log_dir / METADATA_PARTITION_DIR).iterdir())
    print(f"# wrote {count} records ({size / 2**20:.1f} MiB) in "
          f"{time.perf_counter() - began:.1f}s; restart {'after a crash' if crash else 'clean'}")
    print(f"{'step':>28} {'seconds':>8} {'peak RSS MB':>12} {'above imports MB':>17}")
    for what, label in (("open", "NodeStorage.open (read-only)"), ("node", "Disk + initial_state + core")):
        r = run_measure(what, log_dir)
        if r["end"] != count:
            raise SystemExit(f"{label}: log ends at {r['end']}, expected {count}")
        print(f"{label:>28} {r['seconds']:>8.2f} {r['peak_kb'] / 1024:>12.1f} "
              f"{(r['peak_kb'] - r['baseline_kb']) / 1024:>17.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="duration per batch size")
    parser.add_argument("--sizes", default="1,10,100", help="records per append, comma-separated")
    parser.add_argument("--restart-records", type=int, default=None,
                        help="measure a restart with this many records on disk instead")
    parser.add_argument("--crash", action="store_true",
                        help="with --restart-records: restart as after a crash")
    parser.add_argument("--measure", nargs=2, metavar=("STEP", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure(args.measure[0], Path(args.measure[1]))
        return
    base = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=args.dir))
    if args.restart_records is not None:
        try:
            bench_restart(base, args.restart_records, args.crash)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return
    print(f"# {base} on {filesystem_of(base)}, {os.cpu_count()} CPUs, {args.seconds}s per size")
    print(f"{'records/append':>14} {'appends/s':>10} {'records/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
    for size in (int(s) for s in args.sizes.split(",")):
        r = bench(base / f"size{size}", size, args.seconds)
        print(
            f"{size:>14} {r['appends_per_s']:>10.0f} {r['records_per_s']:>10.0f} "
            f"{r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}"
        )
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
