"""Side by side on loopback: the reference KRaft node, etcd and NATS JetStream, 3 nodes each.

    python bench/bench_compare.py [--targets reference,etcd,nats] [--clients 1,8,64,256]
        [--payload 100] [--seconds 5] [--failovers 10] [--linger-ms MS] [--repeat N]
        [--event-loop auto|uvloop|asyncio]

Theory of operation. The targets run one after the other in one process: each is started,
warmed up, measured at every client level, failed over `--failovers` times and torn down before
the next starts, so that they never share the machine. Every target is driven alike: `clients`
closed-loop clients, each on its own connection to the leader (but for ref-producer's shared
producer and etcd-grpc's shared channel) with one write of `--payload` bytes in flight, timed
from send to the acknowledgement of its commit.

`--repeat N` goes round the targets N times (a fresh cluster each time, failovers in the first
round) and reports, for each target and level, the median of the rounds with the range of its
writes/s, and the reference's writes/s against each other target's. On a shared or virtual
machine, speed drifts by a third within minutes: rounds interleave the targets so that the drift
falls on all of them alike, and a ratio is read from medians, not from one round.

- reference: Produce acks=-1 of one record (testkit's `Cluster`, as `bench_node.py` drives it),
  its frame built once and each answer decoded by kio (`KafkaWriter`). Its nodes run on the event
  loop `--event-loop` names (`kraft node`'s default: uvloop when installed).
- ref-producer: the same cluster, written the way Kafka is used: the clients of a level share one
  librdkafka producer (confluent-kafka, the interop tests' client) with acks=all, linger.ms=0 and
  TCP_NODELAY (as Kafka's Java client), so that the writes in flight together travel in one
  Produce (one RecordBatch) while each client still has its one write in flight and times it to
  its own acknowledgement (`CallbackClients`). Its failover is the reference's row: the same
  nodes, and librdkafka's own metadata retries would be what it measured.
- etcd: a put per write (one key per client) through etcd's v3 JSON gateway over HTTP/1.1
  keep-alive, with the minimal asyncio client below (no aiohttp here; etcdctl would time a
  process start per write), its request built once.
- etcd-grpc: the same etcd nodes through their gRPC API (`etcdserverpb.KV/Put`, grpcio's asyncio
  client): no gateway hop inside etcd, but a heavier client, which takes its CPU from the same 2
  cores (Go's clientv3, which etcd's own `benchmark` tool uses, cannot be built here). The
  clients of a level share one channel (`SharedChannel`: one HTTP/2 connection), as an etcd
  application's goroutines share one clientv3 client; at 64 clients that gave etcd 9,525
  writes/s against 7,434 with a channel per client (medians of 3 rounds). Its failover is the
  etcd row's.
- nats: a JetStream publish to the stream's subject, awaiting the PubAck (nats-py).

etcd and NATS are deployed by the harness's own target code (`EtcdDB`, `NatsDB`: the same flags
and configuration as a test run) on the local backend, except that node-to-node links are dialed
straight: the backend's cuttable proxies run in this process, so every replication message would
take a Python hop and the bench's own CPU. A node's CPU is the utime+stime its process gained
during the level (/proc/<pid>/stat), summed over the three and divided by the level's wall time
(1.0 = one core busy); RSS is the largest of the three at the end of the level; `bench CPU` is
this process's, to show whether the clients were the bottleneck.

Failover: SIGKILL of the leader (the reference's Raft leader; etcd's, from the maintenance status
API; NATS's leader of the stream, whose Raft group takes the writes), then a write is retried
through every survivor at once until one commits. The killed node is restarted and the cluster
is whole again (it rejoined and caught up) before the next repeat.

Durability: the reference node and etcd fsync their log before acknowledging (both defaults).
nats-server 2.9 syncs its file store every 60 s and knows no `sync_interval: always` (2.10
brought it): its rows say so; on 2.10 or later the bench sets `sync_interval: always`.

Teardown is always done (try/finally, also on Ctrl-C or SIGTERM): etcd and NATS nodes live in
the local backend's pid registry, so even a bench killed outright leaves them to `kraft clean`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

try:  # the dev extras (pyproject.toml): the ref-producer and etcd-grpc clients
    import confluent_kafka
    import grpc
except ImportError as missing:
    raise SystemExit(f"bench_compare.py needs the Python module {missing.name!r}, one of the dev "
                     "extras: pip install -e '.[dev]'") from missing
from bench_failover import rejoined
from nats.errors import Error as NatsError
from nats.js.errors import APIError, NoStreamResponseError

from contracts.backend import Identify
from harness.backends.local import LocalBackend
from harness.targets.etcd import CLIENT, EtcdDB, EtcdTarget
from harness.targets.etcd_client import API_PATH
from harness.targets.nats import NatsDB, NatsTarget, get_json
from harness.targets.nats_client import STREAM, SUBJECT, NotSent
from harness.targets.nats_client import connect as nats_connect
from reference_node.raft.config import RaftConfig
from reference_node.wire import PRODUCE, SUPPORTED_APIS, WireError, apis
from reference_node.wire.apis import METADATA_TOPIC
from reference_node.wire.codec import decode_response, encode_request
from reference_node.wire.records import build_batch
from reference_node.wire.requests import produce_request
from testkit.cluster import Cluster, add_event_loop_option, event_loop_name
from testkit.targets import deployed

NODES = ["n1", "n2", "n3"]
WRITE_TIMEOUT = 5.0  # seconds one write may take before it counts as an error
PROBE_TIMEOUT = 2.0  # one write attempt during a failover
SETTLE_TIMEOUT = 60.0  # for a cluster to be whole again after a restart
GIVE_UP_S = 30.0  # a failover with no commit by then is a failure of the bench run
WARMUP_S = 1.0
LINGER_KEY = "controller.quorum.append.linger.ms"
PRODUCE_VERSION = SUPPORTED_APIS[PRODUCE].max
PRODUCE_RESPONSE = apis.response_class(PRODUCE, PRODUCE_VERSION)
_CORRELATION_AT = 8  # in a request frame: its size, then the API key and version (int16 each)
FSYNC_ON = "fsync: before ack"
FSYNC_NATS_29 = "fsync: periodic (2.9 has no sync_interval)"
# what a write may raise when its connection is lost or the node is gone (nats.errors.Error
# covers nats-py's own; a refusal is a False from `Writer.write`, not an exception)
LOST: tuple[type[BaseException], ...] = (OSError, EOFError, TimeoutError, ValueError,
                                         asyncio.LimitOverrunError, WireError, NatsError, NotSent)


# -- the interface every target has -----------------------------------------------------------

class Writer(Protocol):
    async def write(self) -> bool:
        """One write of the payload: True once acknowledged as committed, False when refused
        (the connection stays usable); raises when the connection is lost."""

    async def close(self) -> None: ...


class System(Protocol):
    name: str
    fsync: str
    measures_failover: bool

    def start(self) -> None: ...

    def nodes(self) -> list[str]: ...

    def leader(self) -> str:
        """The node that takes the writes, as the cluster reports it (waits for one)."""

    async def writer(self, node: str, client: int, payload: bytes) -> Writer: ...

    def kill(self, node: str) -> None:
        """SIGKILL, reaped when it returns."""

    def restart(self, node: str) -> None:
        """Start the killed `node` again; return once the cluster is whole."""

    def stop(self) -> None:
        """Kill every node and remove every file; safe after a partial start, and twice."""

    def pids(self) -> list[int]: ...


def wait_until(what: str, found: Callable[[], bool], timeout: float = SETTLE_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} not within {timeout:g} s")


def agreed(views: dict[str, str | None]) -> str | None:
    """The leader every node names, or None while they do not all name the same one."""
    named = set(views.values())
    return named.pop() if len(named) == 1 and None not in named else None


# -- reference: testkit's Cluster, Produce acks=-1 ------------------------------------------

class KafkaWriter:
    """Produce acks=-1, written the way the etcd writer writes its PUT: the frame is built once
    and each write only renumbers it; the answer is read straight off the connection and
    decoded by kio for its error code. Through AsyncKafkaConnection (a kio encode per write, its
    reader task, a timer), this client cost 38 µs of CPU a write against the etcd client's 27,
    on a machine the run fills; written this way, 30 (2026-11-27, 64 clients)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 frame: bytes) -> None:
        self.reader = reader
        self.writer = writer
        self.frame = bytearray(frame)
        self.correlation_id = 0

    @classmethod
    async def open(cls, port: int, payload: bytes) -> KafkaWriter:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port),
                                                PROBE_TIMEOUT)
        request = produce_request(PRODUCE_VERSION, build_batch(0, -1, [payload]))
        return cls(reader, writer, encode_request(0, request, "bench"))

    async def write(self) -> bool:
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        struct.pack_into(">i", self.frame, _CORRELATION_AT, self.correlation_id)
        self.writer.write(bytes(self.frame))
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        correlation_id, response = decode_response(await self.reader.readexactly(size),
                                                   PRODUCE_RESPONSE)
        if correlation_id != self.correlation_id:
            raise ValueError(f"answer {correlation_id} to request {self.correlation_id}")
        return int(response.responses[0].partition_responses[0].error_code) == 0

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


class Reference:
    name = "reference"
    fsync = FSYNC_ON
    measures_failover = True

    def __init__(self, linger_ms: int | None, event_loop: str = "auto") -> None:
        self.extra = {} if linger_ms is None else {LINGER_KEY: str(linger_ms)}
        self.event_loop = event_loop
        self.root: tempfile.TemporaryDirectory[str] | None = None
        self.cluster: Cluster | None = None

    def _cluster(self) -> Cluster:
        if self.cluster is None:
            raise RuntimeError("reference cluster not started")
        return self.cluster

    def start(self) -> None:
        self.root = tempfile.TemporaryDirectory(prefix="kraft-compare-")
        self.cluster = Cluster(Path(self.root.name), extra=self.extra,
                               event_loop=self.event_loop)
        self.cluster.start()
        self.leader()

    def nodes(self) -> list[str]:
        return [str(i) for i in self._cluster().ids]

    def leader(self) -> str:
        return str(self._cluster().wait_leader(timeout=SETTLE_TIMEOUT))

    async def writer(self, node: str, client: int, payload: bytes) -> Writer:
        return await KafkaWriter.open(self._cluster().ports[int(node)], payload)

    def kill(self, node: str) -> None:
        self._cluster().kill(int(node))

    def restart(self, node: str) -> None:
        self._cluster().start(int(node))
        # caught up before the next kill: a kill while it still boots would leave the survivors
        # without a majority (a figure of the bench, not of the failover)
        rejoined(self._cluster(), int(node))

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop_all()
        if self.root is not None:
            self.root.cleanup()
        self.cluster = self.root = None

    def pids(self) -> list[int]:
        return [proc.pid for proc in self._cluster().procs.values()]


class ProducerReference(Reference):
    """The reference's nodes, written through one librdkafka producer that every client of a
    level shares, as the threads of a Kafka application share theirs: librdkafka puts what is in
    flight together into one Produce."""

    name = "ref-producer"
    measures_failover = False  # the reference's row has it: the same nodes

    def run_level(self, clients: int, payload: bytes, seconds: float) -> Level:
        level = Level(self.name, clients, self.fsync)
        producer = confluent_kafka.Producer({
            "bootstrap.servers": self._cluster().bootstrap,
            "acks": "all",
            "enable.idempotence": False,  # the node grants no producer ids (no InitProducerId)
            "linger.ms": 0,  # no write waits for company: what is in flight together is batched
            # TCP_NODELAY, as Kafka's Java client sets it; librdkafka leaves Nagle's algorithm
            # on, which held back a pipelined Produce (13% fewer writes/s at 64 clients here)
            "socket.nagle.disable": True,
            "message.timeout.ms": int(WRITE_TIMEOUT * 1000),
        })
        try:
            # connected, and told where the partition's leader is, before any write is timed
            producer.list_topics(METADATA_TOPIC, SETTLE_TIMEOUT)
            with measured(self, level) as started:
                writers = CallbackClients(producer, payload, level, started + seconds)
                for _ in range(clients):
                    writers.send()
                while writers.in_flight:
                    producer.poll(0.05)  # runs the callbacks of the reports it serves
        finally:
            producer.flush(PROBE_TIMEOUT)
        return level  # the producer goes with this frame: its connections are closed now


class CallbackClients:
    """Closed-loop clients as librdkafka's idiom has them, with no event loop between: the
    delivery callback of a client's write sends its next one, until `stop_at`."""

    def __init__(self, producer: Any, payload: bytes, level: Level, stop_at: float) -> None:
        self.producer = producer
        self.payload = payload
        self.level = level
        self.stop_at = stop_at
        self.in_flight = 0

    def send(self) -> None:
        sent = time.perf_counter()
        self.in_flight += 1
        self.producer.produce(METADATA_TOPIC, self.payload, partition=0,
                              on_delivery=lambda err, _msg: self._delivered(err, sent))

    def _delivered(self, err: Any, sent: float) -> None:
        self.in_flight -= 1
        if err is None:
            self.level.latencies.append(time.perf_counter() - sent)
        else:  # librdkafka retried it for message.timeout.ms
            self.level.errors += 1
        if time.monotonic() < self.stop_at:
            self.send()


# -- etcd and NATS: the harness's target code on the local backend ---------------------------

class DirectBackend(LocalBackend):
    """The local backend with node-to-node links dialed straight to the peer's port instead of
    through the link proxies, which run in this process (nothing here partitions)."""

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return self.bind_address(dst, port)

    def shared_peer_address(self, dst: str, port: str, identify: Identify) -> tuple[str, int]:
        return self.bind_address(dst, port)

    def pid(self, node: str) -> int | None:
        proc = self._procs.get(node)
        return proc.pid if proc is not None and proc.poll() is None else None


class Deployed:
    """A target's DB deployed by `testkit.targets.deployed` on a DirectBackend of its own."""

    measures_failover = True

    def __init__(self, target: EtcdTarget | NatsTarget, db_type: type[EtcdDB] | type[NatsDB],
                 node_config: dict[str, str]) -> None:
        self.target = target
        self.db_type = db_type
        self.node_config = node_config
        self.backend: DirectBackend | None = None
        self._stack = contextlib.ExitStack()

    def _backend(self) -> DirectBackend:
        if self.backend is None:
            raise RuntimeError("cluster not started")
        return self.backend

    def start(self) -> None:
        run_dir = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="kraft-compare-"))
        backend = DirectBackend()
        _, self.db = self._stack.enter_context(deployed(
            self.target, self.db_type, NODES, f"bench-compare-{uuid.uuid4().hex[:8]}",
            Path(run_dir), self.node_config, backend=backend))
        self.backend = backend
        self.leader()

    def nodes(self) -> list[str]:
        return list(NODES)

    def leader(self) -> str:
        found: list[str] = []

        def agree() -> bool:
            leader = agreed(self.db.leaders(self._backend(), NODES))
            found[:] = [leader] if leader else []
            return leader is not None
        wait_until("a leader every node names", agree)
        return found[0]

    def kill(self, node: str) -> None:
        self.db.kill(self._backend(), node)

    def restart(self, node: str) -> None:
        self.db.start(self._backend(), node)
        wait_until(f"{node} back in the cluster", self.whole)

    def whole(self) -> bool:
        return agreed(self.db.leaders(self._backend(), NODES)) is not None

    def stop(self) -> None:
        """The DB torn down, then the backend, then the run directory removed."""
        self._stack.close()
        self.backend = None

    def pids(self) -> list[int]:
        backend = self._backend()
        return [pid for node in NODES if (pid := backend.pid(node)) is not None]


class GatewayWriter:
    """A put per write on one HTTP/1.1 keep-alive connection to etcd's v3 JSON gateway. The
    request bytes are built once: every write puts the same payload under the client's key."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 request: bytes) -> None:
        self.reader = reader
        self.writer = writer
        self.request = request

    @classmethod
    async def open(cls, address: tuple[str, int], key: bytes, payload: bytes) -> GatewayWriter:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(*address),
                                                PROBE_TIMEOUT)
        body = json.dumps({"key": base64.b64encode(key).decode(),
                           "value": base64.b64encode(payload).decode()}).encode()
        head = (f"POST {API_PATH}kv/put HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        return cls(reader, writer, head.encode() + body)

    async def write(self) -> bool:
        self.writer.write(self.request)
        status, _ = await read_response(self.reader)
        return status == 200  # else the gateway's {"error", "code"}: refused, e.g. no leader

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response: (status, body), by Content-Length or chunked. Raises
    ConnectionError when the server closes the connection (or says it will)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip()
               for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = await read_chunked(reader)
    else:
        raise ConnectionError(f"HTTP {status} without a length")
    if headers.get("connection", "").lower() == "close":
        raise ConnectionError(f"HTTP {status}: the server closes the connection")
    return status, body


async def read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
    await reader.readuntil(b"\r\n")  # no trailers from the gateway: the final empty line
    return b"".join(parts)


class Etcd(Deployed):
    name = "etcd"
    fsync = FSYNC_ON

    def __init__(self) -> None:
        super().__init__(EtcdTarget(), EtcdDB, {})

    async def writer(self, node: str, client: int, payload: bytes) -> Writer:
        address = self._backend().client_address(node, CLIENT)
        return await GatewayWriter.open(address, f"/bench/{client}".encode(), payload)


class SharedChannel:
    """One gRPC channel to a node for every client of a level, as the goroutines of an etcd
    application share one clientv3 client: each Put is a stream of one HTTP/2 connection. It
    closes when its last writer does (a level's end, or a lost write's retry that finds none)."""

    def __init__(self, address: tuple[str, int], forget: Callable[[], object]) -> None:
        self.channel = grpc.aio.insecure_channel(f"{address[0]}:{address[1]}")
        self.put = self.channel.unary_unary("/etcdserverpb.KV/Put")  # bytes in, bytes out
        self.users = 0
        self._forget = forget

    async def join(self) -> None:
        self.users += 1
        try:
            await asyncio.wait_for(self.channel.channel_ready(), PROBE_TIMEOUT)
        except BaseException:
            await self.leave()
            raise

    async def leave(self) -> None:
        self.users -= 1
        if self.users == 0:
            self._forget()
            await self.channel.close()


class GrpcWriter:
    """A Put per write through etcd's gRPC API, on its node's shared channel. The PutRequest is
    encoded once, by hand (key: field 1, value: field 2), so that no generated stubs are
    needed; the answer only has to arrive (a refusal is an error status)."""

    def __init__(self, shared: SharedChannel, request: bytes) -> None:
        self.shared = shared
        self.request = request

    async def write(self) -> bool:
        try:
            await self.shared.put(self.request, timeout=WRITE_TIMEOUT)
        except grpc.aio.AioRpcError:  # no leader, leader changed, node gone: the channel redials
            return False
        return True

    async def close(self) -> None:
        await self.shared.leave()


def _field(number: int, value: bytes) -> bytes:
    """A length-delimited protobuf field."""
    head, size = bytearray([number << 3 | 2]), len(value)
    while size >= 0x80:
        head.append(size & 0x7F | 0x80)
        size >>= 7
    head.append(size)
    return bytes(head) + value


class EtcdGrpc(Etcd):
    name = "etcd-grpc"
    measures_failover = False  # the etcd row has it: the same nodes

    def __init__(self) -> None:
        super().__init__()
        self._channels: dict[str, SharedChannel] = {}

    async def writer(self, node: str, client: int, payload: bytes) -> Writer:
        shared = self._channels.get(node)
        if shared is None:
            shared = self._channels[node] = SharedChannel(
                self._backend().client_address(node, CLIENT),
                lambda: self._channels.pop(node, None))
        await shared.join()
        return GrpcWriter(shared, _field(1, f"/bench/{client}".encode()) + _field(2, payload))


class JetStreamWriter:
    def __init__(self, nc: Any, payload: bytes) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.payload = payload

    async def write(self) -> bool:
        try:
            await self.js.publish(SUBJECT, self.payload, timeout=WRITE_TIMEOUT)
        except (APIError, NoStreamResponseError):  # no stream leader (yet), not leader...
            return False
        return True

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.nc.close()


def nats_version() -> tuple[int, int]:
    done = subprocess.run(["nats-server", "--version"], capture_output=True, text=True,
                          timeout=10, check=False)
    found = re.search(r"v(\d+)\.(\d+)", done.stdout + done.stderr)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


class Nats(Deployed):
    name = "nats"

    def __init__(self) -> None:
        syncs = nats_version() >= (2, 10)
        self.fsync = "fsync: always (sync_interval)" if syncs else FSYNC_NATS_29
        super().__init__(NatsTarget(), NatsDB, {"sync_interval": "always"} if syncs else {})

    async def writer(self, node: str, client: int, payload: bytes) -> Writer:
        nc = await nats_connect(self._backend().client_address(node, "client"), PROBE_TIMEOUT)
        return JetStreamWriter(nc, payload)

    def whole(self) -> bool:
        """Every node names the same stream leader, which lists both followers as current."""
        leader = agreed(self.db.leaders(self._backend(), NODES))
        if leader is None:
            return False
        jsz = get_json(self._backend().client_address(leader, "monitor"),
                       "/jsz?accounts=true&streams=true", 1.0)
        replicas = stream_replicas(jsz or {})
        return len(replicas) == len(NODES) - 1 and all(
            r.get("current") and not r.get("offline") for r in replicas)


def stream_replicas(jsz: dict[str, Any]) -> list[dict[str, Any]]:
    """The followers of stream STREAM as a `/jsz?accounts=true&streams=true` answer lists them."""
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream.get("name") == STREAM:
                return list((stream.get("cluster") or {}).get("replicas") or [])
    return []


# -- measuring ---------------------------------------------------------------------------------

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2:].split()  # the name may hold spaces and parentheses
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] * 1000.0 if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000.0


@dataclass
class Level:
    target: str
    clients: int
    fsync: str
    wall: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    node_cpu: float = 0.0
    bench_cpu: float = 0.0
    rss: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0

    def row(self) -> str:
        return format_row(self.target, self.clients, self.rate, pct(self.latencies, 50),
                          pct(self.latencies, 99), self.node_cpu, self.rss, self.bench_cpu,
                          self.errors, self.fsync)


def format_row(target: str, clients: int, rate: float, p50: float, p99: float, node_cpu: float,
               rss: float, bench_cpu: float, errors: int, fsync: str) -> str:
    return (f"{target:<12} {clients:>7} {rate:>9.0f} {p50:>8.2f} {p99:>8.2f} {node_cpu:>8.2f}"
            f" {rss:>7.0f} {bench_cpu:>9.2f} {errors:>6}  {fsync}")


def median_row(rounds: list[Level]) -> str:
    """One target and level over the rounds: each column's median (errors summed, RSS the
    largest), and the range of writes/s."""
    first, med = rounds[0], statistics.median
    rates = [r.rate for r in rounds]
    return (format_row(first.target, first.clients, med(rates),
                       med(pct(r.latencies, 50) for r in rounds),
                       med(pct(r.latencies, 99) for r in rounds),
                       med(r.node_cpu for r in rounds), max(r.rss for r in rounds),
                       med(r.bench_cpu for r in rounds), sum(r.errors for r in rounds),
                       first.fsync)
            + f"  [{min(rates):.0f}-{max(rates):.0f}]")


HEADER = (f"{'target':<12} {'clients':>7} {'writes/s':>9} {'p50 ms':>8} {'p99 ms':>8}"
          f" {'node CPU':>8} {'RSS MB':>7} {'bench CPU':>9} {'errors':>6}  durability")


async def drive(system: System, node: str, client: int, payload: bytes, first: Writer,
                stop_at: float, level: Level) -> None:
    """One closed-loop client: a write, its answer, the next write, until `stop_at`."""
    writer: Writer | None = first
    try:
        while time.monotonic() < stop_at:
            sent = time.perf_counter()
            try:
                if writer is None:
                    writer = await system.writer(node, client, payload)
                    sent = time.perf_counter()
                async with asyncio.timeout(WRITE_TIMEOUT):
                    ok = await writer.write()
            except LOST:
                level.errors += 1
                if writer is not None:
                    await writer.close()
                writer = None  # its state is unknown: the next write goes on a new connection
                await asyncio.sleep(0.01)
                continue
            if ok:
                level.latencies.append(time.perf_counter() - sent)
            else:
                level.errors += 1
    finally:
        if writer is not None:
            await writer.close()


async def run_level(system: System, clients: int, payload: bytes, seconds: float) -> Level:
    node = system.leader()
    level = Level(system.name, clients, system.fsync)
    writers = await asyncio.gather(*(system.writer(node, i, payload) for i in range(clients)))
    with measured(system, level) as started:
        await asyncio.gather(*(drive(system, node, i, payload, w, started + seconds, level)
                               for i, w in enumerate(writers)))
    return level


@contextlib.contextmanager
def measured(system: System, level: Level) -> Iterator[float]:
    """The level's wall time, node CPU, bench CPU and RSS, over the block; yields its start."""
    pids = system.pids()
    cpu_before = sum(cpu_seconds(pid) for pid in pids)
    bench_before = time.process_time()
    started = time.monotonic()
    yield started
    level.wall = time.monotonic() - started
    level.node_cpu = (sum(cpu_seconds(pid) for pid in pids) - cpu_before) / level.wall
    level.bench_cpu = (time.process_time() - bench_before) / level.wall
    level.rss = max(rss_mb(pid) for pid in pids)


async def committed_through(system: System, node: str, payload: bytes,
                            give_up: float) -> float:
    """The monotonic time at which a write through `node` first commits."""
    writer: Writer | None = None
    try:
        while time.monotonic() < give_up:
            try:
                if writer is None:
                    writer = await system.writer(node, -1, payload)
                async with asyncio.timeout(PROBE_TIMEOUT):
                    if await writer.write():
                        return time.monotonic()
            except LOST:  # a new connection next time
                if writer is not None:
                    await writer.close()
                writer = None
            await asyncio.sleep(0.005)
    finally:
        if writer is not None:
            await writer.close()
    raise TimeoutError(f"no write committed through {node}")


async def first_commit(system: System, survivors: list[str], payload: bytes,
                       since: float) -> float:
    """Seconds from `since` to the first write committed through any of `survivors`."""
    tasks = [asyncio.ensure_future(committed_through(system, n, payload, since + GIVE_UP_S))
             for n in survivors]
    try:
        for done in asyncio.as_completed(tasks):
            with contextlib.suppress(TimeoutError):
                return await done - since
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    raise TimeoutError(f"{system.name}: no write committed within {GIVE_UP_S:g} s of the kill")


def failover(system: System, payload: bytes) -> float:
    """Seconds from SIGKILL of the leader to the first write committed after it; the killed
    node is back and the cluster whole when it returns."""
    leader = system.leader()
    killed = time.monotonic()
    system.kill(leader)
    took = asyncio.run(first_commit(system, [n for n in system.nodes() if n != leader], payload,
                                    killed))
    system.restart(leader)
    return took


def one_level(system: System, clients: int, payload: bytes, seconds: float) -> Level:
    if isinstance(system, ProducerReference):  # its clients are callbacks, not coroutines
        return system.run_level(clients, payload, seconds)
    return asyncio.run(run_level(system, clients, payload, seconds))


def measure(system: System, args: argparse.Namespace, failovers_wanted: int
            ) -> tuple[list[Level], list[float]]:
    """Start `system`, run every level and `failovers_wanted` failovers (the caller stops
    it)."""
    payload = b"x" * args.payload
    progress(f"{system.name}: starting 3 nodes")
    system.start()
    progress(f"{system.name}: warm-up {WARMUP_S:g} s")
    one_level(system, 8, payload, WARMUP_S)
    levels = []
    for clients in args.clients:
        progress(f"{system.name}: {clients} clients, {args.seconds:g} s")
        levels.append(one_level(system, clients, payload, args.seconds))
        progress("  " + levels[-1].row())
    failovers = []
    for i in range(failovers_wanted if system.measures_failover else 0):
        failovers.append(failover(system, payload))
        progress(f"{system.name}: failover {i + 1}/{failovers_wanted}: "
                 f"{failovers[-1] * 1000:.0f} ms")
    return levels, failovers


# -- the run ------------------------------------------------------------------------------------

TARGETS: dict[str, Callable[[argparse.Namespace], System]] = {
    "reference": lambda args: Reference(args.linger_ms, args.event_loop),
    "ref-producer": lambda args: ProducerReference(args.linger_ms, args.event_loop),
    "etcd": lambda _args: Etcd(),
    "etcd-grpc": lambda _args: EtcdGrpc(),
    "nats": lambda _args: Nats(),
}
OURS = ("reference", "ref-producer")  # the targets whose writes/s are set against the others'


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def terminate(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: the nodes are stopped


def leftovers(pids: set[int]) -> list[int]:
    """Of the node processes this run started, those still alive (not zombies)."""
    alive = []
    for pid in sorted(pids):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat[stat.rindex(")") + 2] != "Z":
                alive.append(pid)
    return alive


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", default=",".join(TARGETS),
                        type=lambda s: [t.strip() for t in s.split(",") if t.strip()])
    parser.add_argument("--clients", default="1,8,64,256",
                        type=lambda s: [int(x) for x in s.split(",")])
    parser.add_argument("--payload", type=int, default=100, help="bytes per write")
    parser.add_argument("--seconds", type=float, default=5.0, help="per client level")
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--linger-ms", type=int, default=None,
                        help=f"the reference node's {LINGER_KEY} (default: the node's)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="rounds over the targets; N > 1 reports each level's median")
    add_event_loop_option(parser)
    args = parser.parse_args()
    args.loop_name = event_loop_name(parser, args)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if unknown := [name for name in args.targets if name not in TARGETS]:
        parser.error(f"unknown target(s) {', '.join(unknown)}: choose from {', '.join(TARGETS)}")
    signal.signal(signal.SIGTERM, terminate)
    # per target: its levels of every round, and its failovers (of the first round)
    rounds: dict[str, list[list[Level]]] = {name: [] for name in args.targets}
    failovers: dict[str, list[float]] = {name: [] for name in args.targets}
    started: set[int] = set()
    for turn in range(args.repeat):
        for name in args.targets:
            system = TARGETS[name](args)
            if args.repeat > 1:
                progress(f"round {turn + 1}/{args.repeat}")
            try:
                levels, took = measure(system, args, args.failovers if turn == 0 else 0)
                rounds[name].append(levels)
                failovers[name] += took
            finally:
                with contextlib.suppress(RuntimeError):
                    started.update(system.pids())
                progress(f"{system.name}: stopping")
                system.stop()
    if left := leftovers(started):
        progress(f"node processes left running: {left} (run `kraft clean`)")
    report(args, rounds, failovers)


def report(args: argparse.Namespace, rounds: dict[str, list[list[Level]]],
           failovers: dict[str, list[float]]) -> None:
    print(f"3 nodes per target on loopback, {os.cpu_count()} cores; payload {args.payload} B; "
          f"{args.seconds:g} s per level; closed-loop clients, one write in flight each; node "
          f"CPU in cores (sum of the 3 processes), RSS the largest of the 3")
    if any(name in OURS for name in args.targets):
        linger = args.linger_ms if args.linger_ms is not None else RaftConfig().append_linger_ms
        default = "" if args.linger_ms is not None else " (the node's default)"
        print(f"reference {LINGER_KEY} = {linger} ms{default}, event loop {args.loop_name}")
    if "ref-producer" in args.targets:
        print("ref-producer: the reference nodes, the clients of a level sharing one librdkafka "
              "producer (acks=all, linger.ms=0, TCP_NODELAY): writes in flight together go in one "
              "Produce")
    print(HEADER)
    for per_round in rounds.values():
        for levels in per_round:
            for level in levels:
                print(level.row())
    if args.repeat > 1:
        print(f"\nmedian of {args.repeat} rounds (writes/s range in brackets):")
        print(HEADER)
        for per_round in rounds.values():
            for at_level in zip(*per_round, strict=True):
                print(median_row(list(at_level)))
        _ratios(args, rounds)
    if not any(failovers.values()):
        return
    print(f"\nSIGKILL of the leader -> first new committed write, {args.failovers} times each")
    for name, took in failovers.items():
        if took:
            ms = [v * 1000.0 for v in took]
            print(f"{name:<10} median {statistics.median(ms):7.0f} ms   worst "
                  f"{max(ms):7.0f} ms   ({', '.join(f'{v:.0f}' for v in ms)})")


def _ratios(args: argparse.Namespace, rounds: dict[str, list[list[Level]]]) -> None:
    """Each of our targets' median writes/s over each other target's, level by level."""

    def medians(name: str) -> list[float]:
        return [statistics.median(r.rate for r in at_level) for at_level in zip(*rounds[name],
                                                                              strict=True)]
    for ours in (name for name in rounds if name in OURS):
        mine = medians(ours)
        for other in (name for name in rounds if name not in OURS):
            ratios = ", ".join(f"{c} clients {m / t:.2f}x" if t else f"{c} clients -"
                               for c, m, t in zip(args.clients, mine, medians(other),
                                                  strict=True))
            print(f"{ours} / {other} writes/s (medians): {ratios}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        progress("interrupted: the nodes started were stopped")
        sys.exit(130)
