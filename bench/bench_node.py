"""Benchmark of the reference node: a 3-node loopback cluster of real processes, fsync on.

    python bench/bench_node.py [--seconds 5] [--concurrency 1,8,64,256] [--linger-ms 25]

Measures committed appends per second and p50/p99 commit latency (Produce acks=-1 of one record,
from send to answer) with 1, 8, 64 and 256 concurrent producers, each with one request in flight,
with the nodes' CPU (the three processes' CPU seconds per wall second) and their largest RSS;
then the time from SIGKILL of the leader to the first newly committed append. Before the load:
the cost of one small write + fsync on this disk, and what the idle cluster spends in CPU.
`--linger-ms` is `controller.quorum.append.linger.ms` (Kafka's default 25 ms holds every append
that long; 0 writes at once and leaves batching to group commit).

`--repeat N` runs the levels N times in turn on the same cluster and ends with the median of each
column over the N passes, with the range of p50: on a shared or virtual machine one pass can be
off by a third, so a figure compared against a goal should be such a median. `--event-loop` is
the nodes' (`kraft node --event-loop`: auto, uvloop or asyncio).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from reference_node.wire import PRODUCE, SUPPORTED_APIS, AsyncKafkaConnection, WireError
from reference_node.wire.records import build_append_batch
from reference_node.wire.requests import produce_request
from testkit.cluster import Cluster, add_event_loop_option, event_loop_name

VERSION = SUPPORTED_APIS[PRODUCE].max


async def append(conn: AsyncKafkaConnection, value: int) -> int | None:
    """The committed offset, or None when refused (not leader, timeout)."""
    resp = await conn.request(produce_request(VERSION, build_append_batch([value])), 5.0)
    part = resp.responses[0].partition_responses[0]
    return int(part.base_offset) if int(part.error_code) == 0 else None


async def load(port: int, concurrency: int, seconds: float) -> tuple[int, list[float]]:
    latencies: list[float] = []
    counter = iter(range(10**12))
    stop = time.monotonic() + seconds

    async def producer() -> None:
        conn = await AsyncKafkaConnection.open("127.0.0.1", port, "bench")
        try:
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                if await append(conn, next(counter)) is not None:
                    latencies.append(time.perf_counter() - t0)
        finally:
            await conn.close()

    started = time.monotonic()
    await asyncio.gather(*(producer() for _ in range(concurrency)))
    return int(len(latencies) / (time.monotonic() - started)), latencies


async def fill(port: int, records: int, per_batch: int = 100, in_flight: int = 16) -> float:
    """Append `records` values as batches of `per_batch` (one Produce each), `in_flight` at a
    time; the seconds it took. For the memory a long log costs, not for latency."""
    batches = iter(range(0, records, per_batch))
    t0 = time.monotonic()

    async def producer() -> None:
        conn = await AsyncKafkaConnection.open("127.0.0.1", port, "bench-fill")
        try:
            for start in batches:
                values = list(range(start, min(start + per_batch, records)))
                resp = await conn.request(produce_request(VERSION, build_append_batch(values)), 30.0)
                part = resp.responses[0].partition_responses[0]
                if int(part.error_code) != 0:
                    raise RuntimeError(f"fill: append refused with error {int(part.error_code)}")
        finally:
            await conn.close()

    await asyncio.gather(*(producer() for _ in range(in_flight)))
    return time.monotonic() - t0


async def failover(cluster: Cluster, leader: int) -> float:
    """Seconds from SIGKILL of the leader to the first append committed after it."""
    cluster.kill(leader)
    killed = time.monotonic()
    others = [i for i in cluster.ids if i != leader]
    while time.monotonic() - killed < 30:
        for i in others:
            try:
                conn = await AsyncKafkaConnection.open("127.0.0.1", cluster.ports[i], "bench",
                                                       timeout=1.0)
            except WireError:
                continue
            try:
                if await append(conn, -1) is not None:
                    return time.monotonic() - killed
            except WireError:
                pass
            finally:
                await conn.close()
        await asyncio.sleep(0.01)
    raise TimeoutError("no append committed within 30 s of the kill")


def fsync_cost_ms(directory: Path, count: int = 200) -> float:
    """One 100-byte append + fsync on the disk the nodes use: the floor under every commit."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        t0 = time.perf_counter()
        for _ in range(count):
            os.write(fd, b"x" * 100)
            os.fsync(fd)
        return (time.perf_counter() - t0) / count * 1000.0
    finally:
        os.close(fd)
        path.unlink()


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of the processes so far (/proc/<pid>/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def rss_mb(pids: list[int]) -> float:
    """The largest resident set of the processes, in MB."""
    largest = 0
    for pid in pids:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                largest = max(largest, int(line.split()[1]))
    return largest / 1024.0


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000.0


HEADER = (f"{'producers':>9} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'node CPU':>9}"
          f" {'CPU ms/append':>13} {'RSS MB':>7}")


@dataclass(frozen=True)
class Level:
    """One pass at one concurrency: what a row of the table shows."""

    producers: int
    rate: int
    p50: float
    p99: float
    cpu: float
    rss: float

    def row(self) -> str:
        per_append = self.cpu * 1000.0 / self.rate if self.rate else float("nan")
        return (f"{self.producers:>9} {self.rate:>10} {self.p50:>8.2f} {self.p99:>8.2f}"
                f" {self.cpu:>9.2f} {per_append:>13.3f} {self.rss:>7.1f}")


def median_level(runs: list[Level]) -> Level:
    """Each column's median over the passes (CPU per append follows from the medians)."""
    return Level(runs[0].producers, int(statistics.median(r.rate for r in runs)),
                 statistics.median(r.p50 for r in runs), statistics.median(r.p99 for r in runs),
                 statistics.median(r.cpu for r in runs), max(r.rss for r in runs))


async def main_async(args: argparse.Namespace) -> None:
    settings = {"controller.quorum.append.linger.ms": str(args.linger_ms)}
    with tempfile.TemporaryDirectory(prefix="kraft-bench-") as root, \
            Cluster(Path(root), extra=settings, event_loop=args.event_loop) as cluster:
        fsync_ms = fsync_cost_ms(Path(root))
        cluster.start()
        leader = cluster.wait_leader(timeout=15.0)
        pids = [proc.pid for proc in cluster.procs.values()]
        await load(cluster.ports[leader], 4, 1.0)  # warm-up: connections, first epoch entry
        cpu0, t0 = cpu_seconds(pids), time.monotonic()
        await asyncio.sleep(args.idle_seconds)
        idle = (cpu_seconds(pids) - cpu0) / (time.monotonic() - t0)
        print(f"3 nodes on loopback, fsync on (one 100-byte write + fsync here: {fsync_ms:.2f} ms),"
              f" append linger {args.linger_ms} ms, event loop {args.loop_name}, leader {leader};"
              f" {args.seconds:.0f} s per level")
        print(f"idle: the three nodes use {idle * 100:.1f}% of one CPU")
        print(HEADER)
        passes: dict[int, list[Level]] = {c: [] for c in args.concurrency}
        for _ in range(args.repeat):
            for c in args.concurrency:
                # A level driven at a node that lost the leadership would measure refusals: say
                # so and follow the leader (seen twice on a loaded machine: 0 appends/s).
                now = cluster.wait_leader(timeout=15.0)
                if now != leader:
                    print(f"(the leadership moved from node {leader} to node {now} before this "
                          f"level)", flush=True)
                    leader = now
                cpu0, t0 = cpu_seconds(pids), time.monotonic()
                rate, lat = await load(cluster.ports[leader], c, args.seconds)
                cpu = (cpu_seconds(pids) - cpu0) / (time.monotonic() - t0)
                level = Level(c, rate, pct(lat, 50), pct(lat, 99), cpu, rss_mb(pids))
                passes[c].append(level)
                print(level.row(), flush=True)
        if args.repeat > 1:
            print(f"median of {args.repeat} passes (p50 range in brackets):")
            print(HEADER)
            for runs in passes.values():
                print(median_level(runs).row(), f" [{min(r.p50 for r in runs):.2f}-"
                      f"{max(r.p50 for r in runs):.2f}]", flush=True)
        if args.rss_after:
            took = await fill(cluster.ports[leader], args.rss_after)
            print(f"after {args.rss_after} more appends ({took:.0f} s, batches of 100): node RSS"
                  f" {rss_mb(pids):.1f} MB (largest of the three)", flush=True)
        took = await failover(cluster, leader)
        print(f"SIGKILL of leader {leader} -> first new committed append: {took * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,8,64,256",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--linger-ms", type=int, default=25,
                        help="controller.quorum.append.linger.ms (Kafka's default: 25)")
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run the levels N times in turn; end with each column's median")
    parser.add_argument("--rss-after", type=int, default=0, metavar="N",
                        help="append N more records (batches of 100), then print node RSS")
    add_event_loop_option(parser)
    args = parser.parse_args()
    args.loop_name = event_loop_name(parser, args)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
