"""Benchmark of the reference node: a 3-node loopback cluster of real processes, fsync on.

    python bench/bench_node.py [--seconds 5] [--concurrency 1,8,64]

Measures committed appends per second and p50/p99 commit latency (Produce acks=-1 of one record,
from send to answer) with 1, 8 and 64 concurrent producers, each with one request in flight,
then the time from SIGKILL of the leader to the first newly committed append.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from reference_node.wire import PRODUCE, SUPPORTED_APIS, AsyncKafkaConnection, WireError
from reference_node.wire.records import build_append_batch
from reference_node.wire.requests import produce_request
from testkit.cluster import Cluster

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


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] * 1000.0


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="kraft-bench-") as root, Cluster(Path(root)) as cluster:
        cluster.start()
        leader = cluster.wait_leader(timeout=15.0)
        await load(cluster.ports[leader], 4, 1.0)  # warm-up: connections, first epoch entry
        print(f"3 nodes on loopback, fsync on, leader {leader}; {args.seconds:.0f} s per level")
        print(f"{'producers':>9} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8}")
        for c in args.concurrency:
            rate, lat = await load(cluster.ports[leader], c, args.seconds)
            print(f"{c:>9} {rate:>10} {pct(lat, 50):>8.2f} {pct(lat, 99):>8.2f}", flush=True)
        took = await failover(cluster, leader)
        print(f"SIGKILL of leader {leader} -> first new committed append: {took * 1000:.0f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,8,64",
                        type=lambda s: [int(x) for x in s.split(",")])
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
