"""What the fault filesystem (nemesis/faultfs) costs the reference node: appends/s on it and
straight on the disk under it, in one run.

    python bench/bench_faultfs.py [--seconds 2] [--rounds 3] [--sizes 1,10]
                                  [--concurrency 1,8] [--no-cluster] [--dir DIR]

1. The storage layer, as bench_storage.py measures it (its `bench`): a MetadataLog appending
   one batch of N records and flushing it (an fdatasync per batch, as Kafka's KRaft log does),
   on a directory of the disk and on a faultfs mount of a directory beside it. The rounds
   alternate disk and faultfs, so that a disk that slows down for a while (a shared machine)
   weighs on both; the figures are the means over the rounds.
2. A 3-node cluster of `kraft node` processes (bench_node.py's load: Produce acks=-1 of one
   record, each producer one request in flight), its data directories on the disk, then each
   on a faultfs mount of its own (three filesystem processes, as a test run has).

Prints the figures and the ratio faultfs/disk (1.0: free; the goal is above 0.5). Use --dir on
the disk the nodes will use: on tmpfs fsync is free and the ratio says nothing about real runs.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

from bench_node import load, pct
from bench_storage import bench, filesystem_of

from nemesis.faultfs import check_usable, request, unmount
from nemesis.faultfs.cli import main as faultfs
from testkit.cluster import Cluster


@contextmanager
def mounted(base: Path, name: str) -> Iterator[Path]:
    """A faultfs mount at base/name over base/name.backing, for the block."""
    mountpoint, sock = base / name, str(base / f"{name}.sock")
    with redirect_stdout(io.StringIO()):
        code = faultfs(["mount", str(base / f"{name}.backing"), str(mountpoint), "--control",
                        sock, "--fsname", "kraft-faultfs:bench", "--daemon",
                        "--log", str(base / f"{name}.faultfs.log")])
    if code != 0:
        raise SystemExit(f"faultfs did not mount at {mountpoint} (exit {code})")
    try:
        yield mountpoint
    finally:
        fsyncs = request(sock, {"op": "status"}).get("fsyncs")
        unmount(str(mountpoint))
        print(f"#   ({mountpoint.name}: {fsyncs} fsyncs went through faultfs)")


def storage(base: Path, sizes: list[int], seconds: float, rounds: int) -> None:
    print(f"# storage: MetadataLog append + flush, {rounds} rounds of {seconds:g} s per size "
          "and place, alternating")
    print(f"{'records/append':>14} {'disk app/s':>11} {'faultfs app/s':>14} {'ratio':>6} "
          f"{'disk p50 ms':>12} {'faultfs p50 ms':>15}")
    with mounted(base, "storage") as mount:
        for size in sizes:
            results: dict[str, list[dict[str, float]]] = {"disk": [], "faultfs": []}
            for r in range(rounds):
                for place, root in (("disk", base / "disk"), ("faultfs", mount)):
                    results[place].append(bench(root / f"size{size}-{r}", size, seconds))
            rate = {k: statistics.mean(x["appends_per_s"] for x in v) for k, v in results.items()}
            p50 = {k: statistics.median(x["p50_ms"] for x in v) for k, v in results.items()}
            print(f"{size:>14} {rate['disk']:>11.0f} {rate['faultfs']:>14.0f} "
                  f"{rate['faultfs'] / rate['disk']:>6.2f} {p50['disk']:>12.2f} "
                  f"{p50['faultfs']:>15.2f}", flush=True)


async def cluster_rates(root: Path, concurrency: list[int],
                        seconds: float) -> dict[int, tuple[int, list[float]]]:
    with Cluster(root) as cluster:
        cluster.start()
        leader = cluster.wait_leader(timeout=30.0)
        await load(cluster.ports[leader], 4, 1.0)  # warm-up
        return {c: await load(cluster.ports[leader], c, seconds) for c in concurrency}


def cluster(base: Path, concurrency: list[int], seconds: float) -> None:
    print(f"# 3-node cluster on loopback, fsync on, Produce acks=-1, {seconds:g} s per level")
    disk_root = base / "cluster-disk"
    disk_root.mkdir()
    on_disk = asyncio.run(cluster_rates(disk_root, concurrency, seconds))
    fuse_root = base / "cluster-faultfs"
    fuse_root.mkdir()
    with mounted(fuse_root, "data1"), mounted(fuse_root, "data2"), mounted(fuse_root, "data3"):
        # Cluster keeps node i's data in root/data<i>: the mounts.
        on_fuse = asyncio.run(cluster_rates(fuse_root, concurrency, seconds))
    print(f"{'producers':>9} {'disk app/s':>11} {'faultfs app/s':>14} {'ratio':>6} "
          f"{'disk p50/p99 ms':>16} {'faultfs p50/p99 ms':>19}")
    for c in concurrency:
        (d, dl), (f, fl) = on_disk[c], on_fuse[c]
        print(f"{c:>9} {d:>11} {f:>14} {f / max(d, 1):>6.2f} "
              f"{pct(dl, 50):>7.2f}/{pct(dl, 99):<8.2f} {pct(fl, 50):>9.2f}/{pct(fl, 99):<8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where to work (default: a temp "
                        "dir)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sizes", default="1,10", type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--concurrency", default="1,8",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--no-cluster", action="store_true", help="the storage layer only")
    args = parser.parse_args()
    reason = check_usable()
    if reason is not None:
        raise SystemExit(f"faultfs cannot mount here: {reason}")
    base = Path(tempfile.mkdtemp(prefix="bench-faultfs-", dir=args.dir))
    began = time.monotonic()
    try:
        print(f"# {base} on {filesystem_of(base)}")
        storage(base, args.sizes, args.seconds, args.rounds)
        if not args.no_cluster:
            cluster(base, args.concurrency, args.seconds)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"# {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
