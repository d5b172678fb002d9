"""Throughput of the metadata log with an fsync per append, as the reference node runs it.

Each step appends one batch of N records (values like the append workload's) and calls
flush(), which fdatasyncs the segment: the rate a leader acknowledges at when every client
request is its own batch. Usage:

    python bench/bench_storage.py [--dir DIR] [--seconds 2] [--sizes 1,10,100]

Use --dir on the disk the nodes will use: tmpfs makes fsync free and the figures meaningless.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from reference_node.storage import MetadataLog, StoredRecord


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument("--seconds", type=float, default=2.0, help="duration per batch size")
    parser.add_argument("--sizes", default="1,10,100", help="records per append, comma-separated")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-storage-", dir=args.dir))
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
