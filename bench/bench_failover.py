"""Benchmark: what a graceful stop of the leader buys over a crash, on a 3-node loopback cluster.

    python bench/bench_failover.py [--repeats 5]

Each repetition stops the current leader, by SIGTERM (graceful: it resigns with EndQuorumEpoch,
KIP-595, and the first successor campaigns at once) or by SIGKILL (the survivors wait out their
fetch timeout, `controller.quorum.fetch.timeout.ms`, 2 s by default), and measures the time from
the signal to the first append committed on a survivor. The stopped node is started again and the
cluster settles before the next repetition; the methods alternate so that both see the same
machine. Prints the median and the maximum of each, and how long the graceful leader took to exit.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import tempfile
import time
from pathlib import Path

from reference_node.wire import PRODUCE, SUPPORTED_APIS, AsyncKafkaConnection, WireError
from reference_node.wire.records import build_append_batch
from reference_node.wire.requests import produce_request
from testkit.cluster import Cluster

VERSION = SUPPORTED_APIS[PRODUCE].max
GIVE_UP_S = 30.0


async def committed_on(port: int, give_up: float) -> float:
    """The monotonic time at which an append to the node at `port` first commits."""
    conn: AsyncKafkaConnection | None = None
    try:
        while time.monotonic() < give_up:
            try:
                if conn is None:
                    conn = await AsyncKafkaConnection.open("127.0.0.1", port, "bench",
                                                           timeout=1.0)
                resp = await conn.request(produce_request(VERSION, build_append_batch([1])), 5.0)
                part = resp.responses[0].partition_responses[0]
                if int(part.error_code) == 0:
                    return time.monotonic()
            except WireError:
                if conn is not None:
                    await conn.close()
                conn = None
            await asyncio.sleep(0.005)
    finally:
        if conn is not None:
            await conn.close()
    raise TimeoutError("no append committed")


async def first_commit(cluster: Cluster, survivors: list[int], since: float) -> float:
    """Seconds from `since` to the first append committed on any of `survivors`."""
    give_up = since + GIVE_UP_S
    tasks = [asyncio.ensure_future(committed_on(cluster.ports[i], give_up)) for i in survivors]
    try:
        for done in asyncio.as_completed(tasks):
            try:
                return await done - since
            except TimeoutError:
                continue
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    raise TimeoutError(f"no append committed within {GIVE_UP_S:g} s")


async def one_failover(cluster: Cluster, graceful: bool) -> tuple[float, float | None]:
    """Stop the leader; (seconds to the next commit, seconds the stopped leader took to exit)."""
    leader = cluster.wait_leader(timeout=30.0)
    survivors = [i for i in cluster.ids if i != leader]
    proc = cluster.procs.pop(leader)
    since = time.monotonic()
    proc.send_signal(signal.SIGTERM if graceful else signal.SIGKILL)
    failover = await first_commit(cluster, survivors, since)
    exited = await asyncio.to_thread(proc.wait, 30)
    exit_s = time.monotonic() - since if graceful else None
    if graceful and exited != 0:
        raise RuntimeError(f"node {leader} exited {exited} on SIGTERM")
    cluster.start(leader)
    await asyncio.to_thread(rejoined, cluster, leader)
    return failover, exit_s


def rejoined(cluster: Cluster, node: int) -> None:
    """Until the leader sees the restarted `node` caught up to its high watermark: a stop while it
    still boots would leave the survivors without a majority (a figure of the bench, not of the
    failover)."""
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline:
        for i in cluster.procs:
            part = cluster.describe(i)
            if part is None or int(part.error_code) != 0:
                continue
            ends = {int(v.replica_id): int(v.log_end_offset) for v in part.current_voters}
            if ends.get(node, -1) >= int(part.high_watermark) > 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"node {node} did not rejoin within 60 s")


def summary(name: str, values: list[float]) -> str:
    ms = [v * 1000.0 for v in values]
    return (f"{name:<28} median {statistics.median(ms):8.1f} ms   max {max(ms):8.1f} ms   "
            f"({', '.join(f'{v:.0f}' for v in ms)})")


async def main(repeats: int) -> None:
    graceful: list[float] = []
    crashed: list[float] = []
    exits: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, Cluster(Path(tmp)) as cluster:
        cluster.start()
        cluster.wait_leader(timeout=30.0)
        await asyncio.sleep(1.0)
        for _ in range(repeats):
            took, exit_s = await one_failover(cluster, graceful=True)
            graceful.append(took)
            if exit_s is not None:
                exits.append(exit_s)
            took, _ = await one_failover(cluster, graceful=False)
            crashed.append(took)
    print(f"leader stop -> next committed append, 3 voters, {repeats} repetitions each")
    print(summary("SIGTERM (EndQuorumEpoch)", graceful))
    print(summary("SIGKILL (fetch timeout)", crashed))
    print(summary("SIGTERM -> leader exited", exits))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.repeats))
