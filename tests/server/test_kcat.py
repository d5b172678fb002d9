"""kcat, Debian's Kafka command-line client (librdkafka inside), against real node processes.

The slow tests drive a 3-voter `testkit.cluster.Cluster` the way an operator would: `kcat -L`
(Metadata), `kcat -P` (Produce, acks=all), `kcat -C -o beginning -e` (ListOffsets and Fetch) and
`kcat -Q` (ListOffsets), before and after the leader is killed. What kcat prints is checked
against the log as the node's own Fetch shows it, control records included. They skip when kcat is
not installed (`scripts/setup.sh` installs it, so CI runs them). Debian 12 ships kcat 1.7.1 on
librdkafka 2.0.2; that librdkafka never compresses against a broker whose Produce starts at v3 (as
Kafka 4.0's does, librdkafka issue 4956), so kcat's batches reach the node uncompressed.

The fast tests pin the answers kcat exposed that differed from Kafka's, on a fake node.
"""

from __future__ import annotations

import asyncio
import datetime
import io
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from kio.records.schema import NewRecordBatch, Record, RecordHeader
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from reference_node.config import Endpoint
from reference_node.raft.api import AppendReply, QuorumDescription
from reference_node.raft.messages import ErrorCode
from reference_node.server.client_api import ClientApi
from reference_node.wire import FETCH, LIST_OFFSETS, METADATA, PRODUCE, KafkaClient, apis
from reference_node.wire.codec import Request
from reference_node.wire.records import build_append_batch, build_batch, parse_batches
from reference_node.wire.requests import (
    fetch_request,
    list_offsets_request,
    metadata_request,
    produce_request,
)
from testkit.cluster import Cluster

from .fake_node import NodeApiFake

TOPIC = apis.METADATA_TOPIC
KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(
    KCAT is None, reason="kcat is not installed (Debian: apt-get install kcat; "
                         "scripts/setup.sh installs it)")


# --- kcat against a running cluster ---------------------------------------------------------


def kcat(cluster: Cluster, *args: str, stdin: str | None = None,
         timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    assert KCAT is not None
    return subprocess.run([KCAT, "-b", cluster.bootstrap, *args], input=stdin, text=True,
                          capture_output=True, timeout=timeout, check=False)


def kcat_metadata(cluster: Cluster) -> dict[str, Any]:
    done = kcat(cluster, "-L", "-J")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def kcat_produce(cluster: Cluster, values: range) -> None:
    """One record per value, ASCII decimal; kcat exits 0 only when every one was acknowledged."""
    done = kcat(cluster, "-P", "-t", TOPIC, "-p", "0", "-X", "acks=all",
                stdin="".join(f"{v}\n" for v in values))
    assert done.returncode == 0, done.stderr
    assert "Delivery failed" not in done.stderr, done.stderr


def kcat_consume(cluster: Cluster) -> list[tuple[int, int]]:
    """(offset, value) of every record kcat shows, from the beginning to the end it finds."""
    done = kcat(cluster, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e",
                "-f", "%o %s\\n")
    assert done.returncode == 0, done.stderr
    return [(int(o), int(v)) for o, v in (line.split() for line in done.stdout.splitlines())]


def kcat_offset(cluster: Cluster, timestamp: int) -> int:
    done = kcat(cluster, "-Q", "-t", f"{TOPIC}:0:{timestamp}")
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def node_log(cluster: Cluster, leader: int) -> tuple[dict[int, int], set[int], int]:
    """The leader's committed log read with our own client: data (offset -> value), the offsets
    of control records, and the high watermark."""
    data: dict[int, int] = {}
    control: set[int] = set()
    offset, hw = 0, 1
    with KafkaClient("127.0.0.1", cluster.ports[leader], timeout=5.0) as client:
        while offset < hw:
            resp = client.call(FETCH, lambda v: fetch_request(v, offset))  # noqa: B023
            part = resp.responses[0].partitions[0]
            assert part.error_code == ErrorCode.none, part.error_code
            hw = int(part.high_watermark)
            for batch in parse_batches(part.records):
                for at, _, value in batch.records:
                    if batch.is_control:
                        control.add(at)
                    else:
                        data[at] = int(value or b"")
                offset = batch.last_offset + 1
    return data, control, hw


def wait_kcat_leader(cluster: Cluster, leader: int, timeout: float = 15.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        md = kcat_metadata(cluster)
        if md["topics"][0]["partitions"][0]["leader"] == leader or time.monotonic() > deadline:
            return md
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("kcat")) as running:
        running.start()
        running.wait_leader(timeout=15.0)
        yield running


def check_consumed(cluster: Cluster, leader: int, expected: list[int]) -> list[tuple[int, int]]:
    """kcat shows exactly the data records of the log, in order, at their offsets."""
    got = kcat_consume(cluster)
    data, control, hw = node_log(cluster, leader)
    assert [v for _, v in got] == expected
    assert got == sorted(data.items())
    assert control, "a leader's epoch starts with its LeaderChange record"
    assert not control & {o for o, _ in got}
    assert kcat_offset(cluster, -1) == hw
    assert kcat_offset(cluster, -2) == 0
    return got


@pytest.mark.slow
@needs_kcat
def test_kcat_lists_voters_and_the_partition_leader(cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    md = wait_kcat_leader(cluster, leader)
    assert {b["id"]: b["name"] for b in md["brokers"]} == {
        i: f"127.0.0.1:{port}" for i, port in cluster.ports.items()}
    assert md["controllerid"] == leader
    assert md["topics"] == [{"topic": TOPIC, "partitions": [{
        "partition": 0, "leader": leader,
        "replicas": [{"id": i} for i in cluster.ids], "isrs": [{"id": i} for i in cluster.ids]}]}]
    text = kcat(cluster, "-L", "-t", TOPIC).stdout
    assert f"partition 0, leader {leader}, replicas: 1,2,3" in text


@pytest.mark.slow
@needs_kcat
def test_kcat_produces_and_consumes_in_order_at_the_logs_offsets(cluster: Cluster) -> None:
    leader = cluster.wait_leader()
    before = [v for _, v in kcat_consume(cluster)]
    kcat_produce(cluster, range(1000, 1050))
    got = check_consumed(cluster, leader, [*before, *range(1000, 1050)])
    described = cluster.describe(leader)
    assert described is not None and described.high_watermark > got[-1][0]


@pytest.mark.slow
@needs_kcat
def test_kcat_is_refused_what_the_log_cannot_keep(cluster: Cluster) -> None:
    """Before: the key and header were dropped, and a lookup by time named the end of the log."""
    leader = cluster.wait_leader()
    end = kcat_offset(cluster, -1)
    for args, line in ((["-K", ":"], "k:7\n"), (["-H", "h=v"], "7\n")):
        done = kcat(cluster, "-P", "-t", TOPIC, "-p", "0", *args, stdin=line)
        assert done.returncode != 0 and "Broker failed to validate record" in done.stderr
    assert node_log(cluster, leader)[2] == end
    done = kcat(cluster, "-Q", "-t", f"{TOPIC}:0:1000")
    assert done.returncode != 0
    assert "Message format on broker does not support request" in done.stderr


@pytest.mark.slow
@needs_kcat
def test_kcat_follows_a_leader_change(cluster: Cluster) -> None:
    old = cluster.wait_leader()
    before = [v for _, v in kcat_consume(cluster)]
    kcat_produce(cluster, range(2000, 2020))
    cluster.kill(old)
    new = cluster.wait_leader(timeout=15.0, exclude=old)
    md = wait_kcat_leader(cluster, new)
    assert md["topics"][0]["partitions"][0]["leader"] == new
    kcat_produce(cluster, range(2020, 2040))
    got = check_consumed(cluster, new, [*before, *range(2000, 2040)])
    # the new epoch's LeaderChange lies between the two runs of records, unseen by kcat
    offsets = dict((v, o) for o, v in got)
    assert offsets[2020] > offsets[2019] + 1
    done = kcat(cluster, "-C", "-t", TOPIC, "-p", "0", "-o", str(offsets[2020]), "-c", "1",
                "-J")
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["offset"], record["payload"], record["broker"]) == (offsets[2020], "2020", new)


# --- the answers kcat exposed, on a fake node -------------------------------------------------


@dataclass
class FakeNode(NodeApiFake):
    """The leader (or not) of a 3-voter quorum in epoch 3, with a high watermark of 5."""

    leader: int | None = 1
    hw_known: bool = True
    appended: list[tuple[bytes, ...]] = field(default_factory=list)
    node_id: int = 1
    cluster_id: str = "MkU3OEVBNTcwNTJENDM2Qk"

    def leader_id(self) -> int | None:
        return self.leader

    def epoch(self) -> int:
        return 3

    def high_watermark(self) -> int:
        return 5

    def log_start_offset(self) -> int:
        return 0

    def log_end_offset(self) -> int:
        return 7

    def voter_ids(self) -> list[int]:
        return [1, 2, 3]

    def client_address(self, node_id: int) -> Endpoint | None:
        return Endpoint("127.0.0.1", 9000 + node_id)

    def describe_quorum(self) -> QuorumDescription:
        return QuorumDescription(-1 if self.leader is None else self.leader, 3,
                                 5 if self.hw_known else -1, (), ())

    def append(self, payloads: tuple[bytes, ...]) -> asyncio.Future[AppendReply]:
        self.appended.append(payloads)
        done: asyncio.Future[AppendReply] = asyncio.get_running_loop().create_future()
        done.set_result(AppendReply(0, ErrorCode.none, (5, 6)))
        return done

    def read(self, from_offset: int) -> Any:
        raise AssertionError("no reads here")

    def read_image(self) -> Any:
        raise AssertionError("no reads here")

    def hw_changed(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()


def answer(node: FakeNode, api_key: int, version: int, body: Any) -> Any:
    async def handle() -> Any:
        return await ClientApi(node).handlers[api_key](Request(api_key, version, 1, "kcat", body))

    return asyncio.run(handle())


def list_offset(node: FakeNode, timestamp: int) -> Any:
    resp = answer(node, LIST_OFFSETS, 7, list_offsets_request(7, timestamp))
    return resp.topics[0].partitions[0]


def test_metadata_without_a_leader_is_a_partition_error_not_a_topic_error() -> None:
    topic = answer(FakeNode(leader=None), METADATA, 4, metadata_request(4, None)).topics[0]
    assert topic.error_code == ErrorCode.none
    part = topic.partitions[0]
    assert (part.error_code, part.leader_id) == (ErrorCode.leader_not_available, -1)


def test_list_offsets_latest_is_not_available_until_the_new_leader_knows_its_high_watermark(
) -> None:
    assert list_offset(FakeNode(hw_known=False), -1).error_code == ErrorCode.offset_not_available
    latest = list_offset(FakeNode(), -1)
    assert (latest.error_code, latest.offset, latest.leader_epoch) == (ErrorCode.none, 5, 3)


def test_list_offsets_earliest_names_no_epoch_and_a_time_lookup_is_refused() -> None:
    earliest = list_offset(FakeNode(), -2)
    assert (earliest.error_code, earliest.offset, earliest.leader_epoch) == (ErrorCode.none, 0, -1)
    for timestamp in (0, 1000, -3):
        refused = list_offset(FakeNode(), timestamp)
        assert (refused.error_code, refused.offset) == (
            ErrorCode.unsupported_for_message_format, -1)


_EPOCH = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)


def batch_with_header(value: bytes) -> bytes:
    record = Record(attributes=i8(0), timestamp=TZAwareMicros.parse(_EPOCH),
                    offset=i64(0), key=None, value=value,
                    headers=(RecordHeader(key=b"h", value=b"v"),))
    buffer = io.BytesIO()
    write_new_batch(buffer, NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(-1),
        base_sequence=i32(-1), records=(record,), attributes=i16(0)))
    return buffer.getvalue()


@pytest.mark.parametrize(("records", "index"), [
    (build_batch(0, -1, [b"1", b"2"], keys=[None, b"k"]), 1),
    (build_batch(0, -1, [None]), 0),
    (build_append_batch([1]) + batch_with_header(b"2"), 1),
], ids=["key", "null-value", "header"])
def test_produce_refuses_records_it_cannot_keep_and_appends_nothing(records: bytes,
                                                                   index: int) -> None:
    node = FakeNode()
    resp = answer(node, PRODUCE, 9, produce_request(9, records))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in part.record_errors] == [index]
    assert node.appended == []


def test_produce_of_plain_values_appends_them() -> None:
    node = FakeNode()
    resp = answer(node, PRODUCE, 9, produce_request(9, build_append_batch([1, 2])))
    part = resp.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 5)
    assert node.appended == [(b"1", b"2")]
