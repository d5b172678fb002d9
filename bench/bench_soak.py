"""Soak benchmark: hostile frames against a live 3-node cluster under a workload (issue 20).

    python bench/bench_soak.py [--frames 1000000] [--seconds 3600] [--senders 4]
                               [--connections 8] [--seed 1]

Starts three real `kraft node` processes on 127.0.0.1 (`testkit.cluster`, default config, fsync
on) and, while a producer appends ASCII-decimal values with acks=all (Produce acks=-1, following
leader changes, recording every acknowledged value and offset), `--senders` processes with
`--connections` connections each send `--frames` frames in all, spread over the three nodes,
until the frames are sent or `--seconds` have passed. The frames (`testkit/frames.py`):

- garbage: random bytes, truncated, oversized and negative length prefixes, plausible headers
  followed by random bytes, and now and then a large frame half sent (a 60 MiB prefix, 128 KiB
  behind it) that makes the node reserve request memory;
- well-formed requests with extreme field values for every API and version the node serves;
- forged Raft requests (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch) at high epochs.

Forged Raft frames never carry what the node must obey: the node authenticates no one (only TLS
keeps strangers out), so a Raft request with the right cluster id in the current or a newer epoch
up to MAX_EPOCH is obeyed by design: a Vote would push the epoch, a Fetch in a voter's name would
move the high watermark. So every Raft request sent here either carries a wrong cluster id (at
any epoch), or the right one at an epoch the node refuses (0, -1, -2**31: stale; 2**31 - 1: above
MAX_EPOCH), or at MAX_EPOCH in the receiving node's own name (refused: a node never sends to
itself); the extreme-value requests draw every `*epoch` field from the refused epochs.

A connection carries either one frame (short-lived) or a pipeline of 10 to 100 frames that the
node answers, ending now and then in one that makes it close. The sender reads the answers while
it writes, half-closes, and waits at most 2 s for the rest.

Every second each node's RSS (/proc/<pid>/status VmRSS) is sampled. At the end it prints frames
sent, frames/s, connections opened, answers read, per node RSS start/max/end in MiB and CPU
seconds used, whether every node is still up, leader changes (from the nodes' events.jsonl), appends acknowledged, and the
final check: a full read of the log from the leader, and each node's own files up to the high
watermark, hold every acknowledged value at its acknowledged offset. Exits 1 if a node died or an
acknowledged write is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import multiprocessing
import os
import random
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.raft.core import MAX_EPOCH
from reference_node.server import translate
from reference_node.storage.dump import partition_dir_of, record_value
from reference_node.storage.log import MetadataLog
from reference_node.wire import FETCH, PRODUCE, KafkaClient, WireError
from reference_node.wire.codec import encode_request
from reference_node.wire.records import build_append_batch, read_values
from reference_node.wire.requests import fetch_request, produce_request
from testkit.cluster import CLUSTER_ID, Cluster
from testkit.frames import Extremes, every_version, garbage_frame, may_be_closed

REFUSED_EPOCHS = (0, -1, -(2**31), 2**31 - 1)
"""Epochs a node refuses whatever else the request says: stale once a leader was elected (epoch
>= 1), or above MAX_EPOCH."""
WRONG_CLUSTER_ID = "WrongClusterIdAAAAAAAA"
EXTREMES_PER_VERSION = 5  # per sender: about 250 distinct extreme requests (45 ms each to draw)
HALF_SENT_SIZE = 60 << 20
ANSWER_WAIT_S = 2.0
FIRST_VALUE = 10**9  # above the values of the extreme Produce requests (7, 8, 9)
MIB = 1024 * 1024


# --- frames ---------------------------------------------------------------------------------------


def forged_raft(target: int, ids: Sequence[int]) -> list[m.Request]:
    """Raft requests at the edges of the epoch, none of which `target` may obey (module doc)."""
    top = 2**31 - 1
    out: list[m.Request] = []
    for sender in [*ids, -1, 7]:
        for cluster, epoch in [(WRONG_CLUSTER_ID, MAX_EPOCH), (WRONG_CLUSTER_ID, 10**6),
                               (WRONG_CLUSTER_ID, top), (CLUSTER_ID, top), (CLUSTER_ID, 0)]:
            out += _raft_requests(cluster, sender, epoch)
    return out + _raft_requests(CLUSTER_ID, target, MAX_EPOCH)


def _raft_requests(cluster: str, sender: int, epoch: int) -> list[m.Request]:
    top = 2**31 - 1
    return [
        m.VoteRequest(cluster, epoch, sender, epoch, 10**9),
        m.VoteRequest(cluster, epoch, sender, top, 2**63 - 1, True),
        m.BeginQuorumEpochRequest(cluster, sender, epoch),
        m.EndQuorumEpochRequest(cluster, sender, epoch, (1, 2, 3)),
        m.FetchRequest(cluster, sender, epoch, 2**63 - 1, epoch, 0),
        m.FetchRequest(cluster, sender, epoch, 0, 0, 0),
    ]


@dataclass
class Pools:
    """Encoded frames for one target node: `answered` may share a pipeline, `closing` end one."""

    answered: list[bytes] = field(default_factory=list)
    closing: list[bytes] = field(default_factory=list)

    def add(self, request: Any) -> None:
        data = encode_request(7, request, "soak")
        (self.closing if may_be_closed(request) else self.answered).append(data)


def build_pools(rng: random.Random, ids: Sequence[int]) -> dict[int, Pools]:
    extremes = Extremes(rng, CLUSTER_ID, nulls=True, epochs=REFUSED_EPOCHS)
    shared = Pools()
    for key, version in every_version():
        for _ in range(EXTREMES_PER_VERSION):
            shared.add(extremes.request(key, version))
    pools = {}
    for target in ids:
        pool = Pools(list(shared.answered), list(shared.closing))
        for msg in forged_raft(target, ids):
            pool.add(translate.request_to_kio(msg, Endpoint("127.0.0.1", 1)))
        pools[target] = pool
    return pools


def half_sent_frame(rng: random.Random) -> bytes:
    return struct.pack(">i", HALF_SENT_SIZE) + rng.randbytes(128 * 1024)


def connection_plan(rng: random.Random, pool: Pools) -> list[bytes]:
    """The frames of one connection."""
    if rng.random() < 0.5:  # short-lived: one frame of any kind
        roll = rng.random()
        if roll < 0.005:
            return [half_sent_frame(rng)]
        if roll < 0.5:
            return [garbage_frame(rng)]
        return [rng.choice(pool.closing if roll < 0.6 else pool.answered)]
    frames = [rng.choice(pool.answered) for _ in range(rng.randint(10, 100))]
    roll = rng.random()
    if roll < 0.2:
        frames.append(garbage_frame(rng))
    elif roll < 0.3:
        frames.append(rng.choice(pool.closing))
    return frames


# --- senders (one process each) -------------------------------------------------------------------


@dataclass
class SenderJob:
    index: int
    ports: dict[int, int]
    quota: int
    deadline: float  # time.time(): monotonic() has no reference point shared across processes
    seed: int
    connections: int


@dataclass
class Tally:
    """Per sender counts, in memory the main process reads while the senders run."""

    frames: Any  # multiprocessing.Array("q", senders): one slot per sender, no lock needed
    connections: Any
    answers: Any

    @classmethod
    def shared(cls, ctx: Any, senders: int) -> Tally:
        return cls(*(ctx.Array("q", senders, lock=False) for _ in range(3)))


def sender_main(job: SenderJob, stop: MpEvent, tally: Tally) -> None:
    rng = random.Random(job.seed)
    pools = build_pools(rng, sorted(job.ports))
    asyncio.run(_send_all(job, pools, rng, stop, tally))


async def _send_all(job: SenderJob, pools: dict[int, Pools], rng: random.Random, stop: MpEvent,
                    tally: Tally) -> None:
    left = [job.quota]

    async def connection_loop() -> None:
        while left[0] > 0 and time.time() < job.deadline and not stop.is_set():
            target = rng.choice(sorted(job.ports))
            plan = connection_plan(rng, pools[target])[: left[0]]
            left[0] -= len(plan)
            answered = await one_connection(job.ports[target], plan)
            tally.frames[job.index] += len(plan)
            tally.connections[job.index] += 1
            tally.answers[job.index] += answered

    await asyncio.gather(*(connection_loop() for _ in range(job.connections)))


async def one_connection(port: int, plan: list[bytes]) -> int:
    """Sends `plan` on a new connection; the number of whole answers read."""
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5.0)
    except (OSError, TimeoutError):
        return 0
    answered = [0]
    counting = asyncio.ensure_future(count_answers(reader, answered))
    try:
        for data in plan:
            writer.write(data)
            await asyncio.wait_for(writer.drain(), ANSWER_WAIT_S)
        if writer.can_write_eof():
            writer.write_eof()
        await asyncio.wait_for(asyncio.shield(counting), ANSWER_WAIT_S)
    except (OSError, TimeoutError):
        pass  # the node closed it (as it should on garbage) or is slow to answer: next one
    finally:
        counting.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()
    with contextlib.suppress(asyncio.CancelledError, OSError):
        await counting
    return answered[0]


async def count_answers(reader: asyncio.StreamReader, answered: list[int]) -> None:
    """Counts whole response frames until the node closes the connection."""
    buffered = b""
    while chunk := await reader.read(1 << 16):
        buffered += chunk
        while len(buffered) >= 4:
            size = struct.unpack(">i", buffered[:4])[0]
            if len(buffered) < 4 + size:
                break
            buffered = buffered[4 + size:]
            answered[0] += 1


# --- the main process: workload, RSS, final check -------------------------------------------------


def rss_kib(pid: int) -> int | None:
    """VmRSS of a live process, in KiB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a live process so far; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssMonitor(threading.Thread):
    """Samples every node's RSS once a second until `stop`."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(name="rss", daemon=True)
        self.pids = {i: proc.pid for i, proc in cluster.procs.items()}
        self.samples: dict[int, list[int]] = {i: [] for i in self.pids}
        self.cpu: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while True:
            for i, pid in self.pids.items():
                kib = rss_kib(pid)
                cpu = cpu_seconds(pid)
                if kib is not None and cpu is not None:
                    self.samples[i].append(kib)
                    self.cpu[i] = cpu
            if self.stop.wait(1.0):
                return

    def figures(self, i: int) -> tuple[float, float, float]:
        """(start, max, end) in MiB."""
        kib = self.samples[i] or [0]
        return kib[0] / 1024, max(kib) / 1024, kib[-1] / 1024


class Producer(threading.Thread):
    """Appends FIRST_VALUE, FIRST_VALUE + 1, ... one per Produce (acks=-1) to whichever node
    leads, until `stop`; keeps (value, offset) of every acknowledged append."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(name="producer", daemon=True)
        self.cluster = cluster
        self.acked: list[tuple[int, int]] = []
        self.refused = 0
        self.unanswered = 0
        self.stop = threading.Event()

    def run(self) -> None:
        value = FIRST_VALUE
        client: KafkaClient | None = None
        while not self.stop.is_set():
            try:
                if client is None:
                    leader = self.cluster.wait_leader(timeout=5.0)
                    client = KafkaClient("127.0.0.1", self.cluster.ports[leader], timeout=10.0)
                if self._append(client, value):
                    client.close()
                    client = None  # not the leader (any more): ask who leads
                    self.stop.wait(0.05)
            except (WireError, OSError, TimeoutError):
                self.unanswered += client is not None
                if client is not None:
                    client.close()
                client = None
            value += 1
        if client is not None:
            client.close()

    def _append(self, client: KafkaClient, value: int) -> bool:
        """Appends `value`; True when refused (and the leader should be looked up again)."""
        resp = client.call(PRODUCE, lambda v: produce_request(
            v, build_append_batch([value]), timeout_ms=5000), timeout=10.0)
        part = resp.responses[0].partition_responses[0]
        if int(part.error_code) == 0:
            self.acked.append((value, int(part.base_offset)))
            return False
        self.refused += 1
        return True


def read_from_leader(cluster: Cluster) -> tuple[int, dict[int, int | None]]:
    """(high watermark, offset -> value) of the whole log, read by Fetch from the leader."""
    leader = cluster.wait_leader(timeout=30.0)
    log: dict[int, int | None] = {}
    offset = hw = 0
    with KafkaClient("127.0.0.1", cluster.ports[leader], timeout=30.0) as client:
        for _ in range(100_000):  # pages of up to 8 MiB
            page_request = functools.partial(fetch_request, fetch_offset=offset, max_bytes=8 << 20)
            resp = client.call(FETCH, page_request, timeout=30.0)
            part = resp.responses[0].partitions[0]
            if int(part.error_code) != 0:
                raise RuntimeError(f"Fetch from leader {leader} at {offset}: error "
                                   f"{int(part.error_code)}")
            hw = int(part.high_watermark)
            page = [(o, v) for o, v in read_values(part.records) if offset <= o < hw]
            if offset >= hw or not page:
                break
            log.update(page)
            offset = page[-1][0] + 1
    return hw, log


def wait_caught_up(cluster: Cluster, hw: int, timeout: float = 60.0) -> bool:
    """Until the leader reports every voter's log end at or past `hw`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i in cluster.procs:
            part = cluster.describe(i, timeout=5.0)
            if part is not None and int(part.error_code) == 0 and all(
                    int(v.log_end_offset) >= hw for v in part.current_voters):
                return True
        time.sleep(0.2)
    return False


def read_files(cluster: Cluster, i: int, hw: int) -> dict[int, int | None]:
    """Offset -> value below `hw` in node `i`'s own log files (read-only, while it runs)."""
    with MetadataLog.open(partition_dir_of(cluster.data_dir(i)), read_only=True) as log:
        return {r.offset: record_value(r) for r in log.records() if r.offset < hw}


def lost(acked: list[tuple[int, int]], log: dict[int, int | None]) -> list[tuple[int, int]]:
    return [(value, offset) for value, offset in acked if log.get(offset) != value]


def leader_epochs(cluster: Cluster) -> list[int]:
    """Every epoch in which some node became leader, from the nodes' events.jsonl."""
    return sorted({int(e["epoch"]) for i in cluster.ids for e in cluster.events(i)
                   if e.get("type") == "state" and e.get("state") == "leader"})


def start_senders(args: argparse.Namespace, ports: dict[int, int], stop: MpEvent,
                  tally: Tally, ctx: Any) -> list[Any]:
    deadline = time.time() + args.seconds
    procs = []
    for k in range(args.senders):
        quota = args.frames // args.senders + (k < args.frames % args.senders)
        job = SenderJob(k, ports, quota, deadline, args.seed * 1000 + k, args.connections)
        proc = ctx.Process(target=sender_main, args=(job, stop, tally), name=f"sender{k}")
        proc.start()
        procs.append(proc)
    return procs


def wait_senders(procs: list[Any], tally: Tally, cluster: Cluster, rss: RssMonitor,
                 seconds: float, started: float) -> None:
    """Until every sender is done; a progress line every 30 s; stops early if a node died."""
    give_up = time.monotonic() + seconds + 120.0  # building the pools, then the last answers
    next_line = time.monotonic() + 30.0
    while any(p.is_alive() for p in procs) and time.monotonic() < give_up:
        time.sleep(0.5)
        if any(proc.poll() is not None for proc in cluster.procs.values()):
            print("a node died: stopping the senders", flush=True)
            return
        if time.monotonic() >= next_line:
            next_line += 30.0
            sent = sum(tally.frames)
            rss_now = "  ".join(f"node{i} {rss.figures(i)[2]:.0f} MiB" for i in cluster.ids)
            print(f"  {time.monotonic() - started:6.0f} s  {sent:>9} frames  "
                  f"{sent / (time.monotonic() - started):6.0f}/s  {rss_now}", flush=True)


def final_check(cluster: Cluster, acked: list[tuple[int, int]]) -> bool:
    """Prints and returns whether every acknowledged append is where it was acknowledged."""
    ok = True
    hw, log = read_from_leader(cluster)
    missing = lost(acked, log)
    ok &= not missing
    print(f"leader read           {len(log)} records below high watermark {hw}: "
          f"{'every acknowledged append present' if not missing else f'{len(missing)} LOST'}")
    if missing:
        print(f"  first lost (value, offset): {missing[:5]}")
    if not wait_caught_up(cluster, hw):
        print("  the followers did not catch up within 60 s; their files are read as they are")
    for i in cluster.ids:
        files = read_files(cluster, i, hw)
        missing = lost(acked, files)
        ok &= not missing
        print(f"node{i} files below hw  {len(files)} records: "
              f"{'every acknowledged append present' if not missing else f'{len(missing)} LOST'}")
    return ok


def report(args: argparse.Namespace, tally: Tally, elapsed: float, cluster: Cluster,
           rss: RssMonitor, producer: Producer, up: dict[int, bool]) -> None:
    sent = sum(tally.frames)
    print(f"frames sent           {sent} in {elapsed:.1f} s ({sent / elapsed:.0f} frames/s, "
          f"{args.senders} senders x {args.connections} connections)")
    print(f"connections opened    {sum(tally.connections)}")
    print(f"answers read          {sum(tally.answers)}")
    for i in cluster.ids:
        start, peak, end = rss.figures(i)
        print(f"node{i} RSS MiB         start {start:6.1f}  max {peak:6.1f}  end {end:6.1f}  "
              f"CPU {rss.cpu.get(i, 0.0):6.0f} s  ({'up' if up[i] else 'DEAD'})")
    epochs = leader_epochs(cluster)
    print(f"leader changes        {max(len(epochs) - 1, 0)} (leader epochs {epochs})")
    print(f"appends acknowledged  {len(producer.acked)} (refused {producer.refused}, "
          f"unanswered {producer.unanswered})")


@contextlib.contextmanager
def run_dir(kept: str | None) -> Iterator[Path]:
    """`kept` (created, left behind for the node logs), else a temporary directory."""
    if kept is not None:
        Path(kept).mkdir(parents=True, exist_ok=False)
        yield Path(kept)
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)


def main(args: argparse.Namespace) -> int:
    ctx = multiprocessing.get_context("spawn")  # the main process runs threads: no fork
    stop = ctx.Event()
    tally = Tally.shared(ctx, args.senders)
    with run_dir(args.dir) as root, Cluster(root) as cluster:
        cluster.start()
        cluster.wait_leader(timeout=30.0)
        rss = RssMonitor(cluster)
        producer = Producer(cluster)
        rss.start()
        producer.start()
        started = time.monotonic()
        senders = start_senders(args, dict(cluster.ports), stop, tally, ctx)
        try:
            wait_senders(senders, tally, cluster, rss, args.seconds, started)
        finally:
            stop.set()
            for proc in senders:
                proc.join(30)
                if proc.is_alive():
                    proc.kill()
        elapsed = time.monotonic() - started
        producer.stop.set()
        producer.join(30)
        rss.stop.set()
        rss.join(5)
        up = {i: proc.poll() is None for i, proc in cluster.procs.items()}
        report(args, tally, elapsed, cluster, rss, producer, up)
        if not all(up.values()):
            where = args.dir or "a temporary directory (pass --dir to keep it)"
            print(f"FAILED: a node died (node<i>.log in {where})")
            return 1
        intact = final_check(cluster, producer.acked)
        print("result                " + ("PASS" if intact else "FAILED: acknowledged writes lost"))
        return 0 if intact else 1


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000,
                        help="frames to send in all (default 1000000)")
    parser.add_argument("--seconds", type=float, default=3600.0,
                        help="stop sending after this long (default 3600)")
    parser.add_argument("--senders", type=int, default=4, help="sender processes (default 4)")
    parser.add_argument("--connections", type=int, default=8,
                        help="concurrent connections per sender (default 8)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", help="run the cluster in this new directory and keep it "
                        "(default: a temporary one, removed)")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.senders < 1 or args.connections < 1 or not args.seconds > 0:
        parser.error("--frames, --senders, --connections and --seconds must be positive")
    return args


if __name__ == "__main__":
    sys.exit(main(parse_args()))
