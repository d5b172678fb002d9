"""A node survives any bytes: each bad request gets its error or a closed connection, the node
stays up, and the acknowledged data is intact afterwards. That holds for garbage frames and for
well-formed requests with extreme field values, for every API the node serves."""

from __future__ import annotations

import dataclasses
import random
import socket
import struct
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.raft.core import MAX_EPOCH
from reference_node.server import translate
from reference_node.server.kiobuild import build
from reference_node.wire import FETCH, LIST_OFFSETS, PRODUCE, KafkaClient, apis
from reference_node.wire.apis import response_class
from reference_node.wire.codec import decode_response, encode_request, frame
from reference_node.wire.records import build_append_batch, read_values
from reference_node.wire.requests import (
    describe_quorum_request,
    fetch_request,
    list_offsets_request,
    produce_request,
)
from testkit.cluster import CLUSTER_ID, Cluster
from testkit.frames import Extremes, every_version, garbage_frame, may_be_closed

ErrorCode = m.ErrorCode


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cluster = Cluster(tmp_path_factory.mktemp("fuzz"), size=1)
    cluster.start()
    cluster.wait_leader()
    yield cluster
    cluster.stop_all()


def exchange(port: int, data: bytes, timeout: float = 3.0) -> bytes:
    """Everything the node writes back until it closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            return b""
        out = b""
        try:
            while chunk := sock.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def call(port: int, request: Any) -> Any:
    answer = exchange(port, encode_request(7, request, "fuzz"))
    _, body = decode_response(answer[4:], response_class(request.__api_key__,
                                                         request.__version__))
    return body


def client(node: Cluster) -> KafkaClient:
    return KafkaClient("127.0.0.1", node.ports[1], timeout=5.0)


def produce(node: Cluster, values: list[int]) -> int:
    with client(node) as c:
        resp = c.call(PRODUCE, lambda v: produce_request(v, build_append_batch(values)))
    part = resp.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none
    return int(part.base_offset)


def read_all(node: Cluster) -> list[tuple[int, int | None]]:
    with client(node) as c:
        resp = c.call(FETCH, lambda v: fetch_request(v, 0, max_bytes=8 << 20))
    return read_values(resp.responses[0].partitions[0].records)


def test_garbage_of_every_kind_leaves_node_up_and_data_intact(node: Cluster) -> None:
    port = node.ports[1]
    base = produce(node, list(range(100)))
    before = read_all(node)
    assert [v for _, v in before if v is not None] == list(range(100))
    rng = random.Random(1234)
    for _ in range(150):
        exchange(port, garbage_frame(rng), timeout=1.0)
    # still serving, and the data is the same
    assert read_all(node)[: len(before)] == before
    assert produce(node, [100]) >= base + 100


def test_unsupported_versions(node: Cluster) -> None:
    port = node.ports[1]
    # ApiVersions of an unknown version: a v0 answer with UNSUPPORTED_VERSION and our list
    answer = exchange(port, frame(struct.pack(">hhi", 18, 99, 5) + b"\x00\x00"))
    _, body = decode_response(answer[4:], response_class(18, 0))
    assert body.error_code == ErrorCode.unsupported_version and body.api_keys
    # any other API at an unknown version, or an unknown API: the connection is closed
    assert exchange(port, frame(struct.pack(">hhi", 0, 99, 6) + b"\x00\x00")) == b""
    assert exchange(port, frame(struct.pack(">hhi", 999, 0, 7) + b"\x00\x00")) == b""


def test_wrong_cluster_id_is_refused(node: Cluster) -> None:
    port = node.ports[1]
    me = Endpoint("127.0.0.1", 1)
    vote = m.VoteRequest("WrongClusterIdAAAAAAAA", 99, 2, 99, 10**6)
    body = call(port, translate.request_to_kio(vote, me))
    part = body.topics[0].partitions[0]
    assert part.error_code == ErrorCode.inconsistent_cluster_id and not part.vote_granted
    fetch = m.FetchRequest("WrongClusterIdAAAAAAAA", 2, 1, 0, 0, 0)
    body = call(port, translate.request_to_kio(fetch, me))
    assert body.responses[0].partitions[0].error_code == ErrorCode.inconsistent_cluster_id
    # the vote did not move the node: it still leads
    assert node.describe(1).leader_id == 1


def test_bad_produce_requests_get_errors(node: Cluster) -> None:
    port = node.ports[1]
    cases = [
        (produce_request(9, b"\x00" * 70), ErrorCode.corrupt_message),
        (produce_request(9, build_append_batch([1]), topic="other"),
         ErrorCode.unknown_topic_or_partition),
        (produce_request(9, build_append_batch([1]), acks=1), ErrorCode.invalid_required_acks),
    ]
    for request, code in cases:
        body = call(port, request)
        assert body.responses[0].partition_responses[0].error_code == code


def test_a_partition_named_twice_is_refused_and_nothing_appended(node: Cluster) -> None:
    """Two batches for __cluster_metadata-0 in one Produce used to append both and answer one
    (the other's wait was never awaited): now the request is refused whole."""
    import dataclasses

    before = node.describe(1).high_watermark
    request = produce_request(9, build_append_batch([424242]))
    topic = request.topic_data[0]
    twice = dataclasses.replace(topic, partition_data=topic.partition_data * 2)
    body = call(node.ports[1], dataclasses.replace(request, topic_data=(twice,)))
    codes = [p.error_code for p in body.responses[0].partition_responses]
    assert codes and set(codes) == {ErrorCode.invalid_request}
    produce(node, [424243])  # the partition still works, and nothing of the refused request
    assert 424242 not in [v for _, v in read_all(node)]
    assert node.describe(1).high_watermark >= before + 1


def test_list_offsets(node: Cluster) -> None:
    with client(node) as c:
        latest = c.call(LIST_OFFSETS, lambda v: list_offsets_request(v, -1))
        earliest = c.call(LIST_OFFSETS, lambda v: list_offsets_request(v, -2))
    assert latest.topics[0].partitions[0].offset == node.describe(1).high_watermark
    assert earliest.topics[0].partitions[0].offset == 0


def test_many_pipelined_requests_answered_in_order(node: Cluster) -> None:
    port = node.ports[1]
    data = b"".join(encode_request(i, fetch_request(12, 0), "pipe") for i in range(50))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(data)
        got = b""
        ids: list[int] = []
        while len(ids) < 50:
            got += sock.recv(65536)
            while len(got) >= 4 and len(got) >= 4 + struct.unpack(">i", got[:4])[0]:
                size = struct.unpack(">i", got[:4])[0]
                ids.append(struct.unpack(">i", got[4:8])[0])
                got = got[4 + size:]
    assert ids == list(range(50))


def raw(api_key: int, version: int | None = None, **fields: Any) -> Any:
    """A request of `version` (default the highest), nested dicts built into kio's classes."""
    version = apis.SUPPORTED_APIS[api_key].max if version is None else version
    return build(apis.request_class(api_key, version), fields)


def test_decodable_but_malformed_requests_get_invalid_request(node: Cluster) -> None:
    """Kafka's answers: a Raft request that names no partition, or another, is a top-level
    INVALID_REQUEST; so is DescribeQuorum's; a null list Kafka cannot even parse closes the
    connection; Produce without records is refused. No handler fails, the node stays up."""
    port = node.ports[1]
    log_file = node.root / "node1.log"
    failures_before = log_file.read_text().count("Traceback")
    ours_empty = [{"topic_name": apis.METADATA_TOPIC, "partitions": []}]
    raft_fetch = {"cluster_id": CLUSTER_ID, "replica_id": 2, "max_wait": 0, "min_bytes": 0,
                  "max_bytes": 1, "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                  "forgotten_topics_data": [], "rack_id": ""}
    refused = [
        raw(apis.VOTE, cluster_id=CLUSTER_ID, voter_id=-1, topics=[]),
        raw(apis.VOTE, cluster_id=None, voter_id=1, topics=ours_empty),
        raw(apis.BEGIN_QUORUM_EPOCH, cluster_id=CLUSTER_ID, voter_id=1, topics=[],
            leader_endpoints=[]),
        raw(apis.END_QUORUM_EPOCH, cluster_id=CLUSTER_ID, leader_endpoints=[],
            topics=[{"topic_name": "other", "partitions": []}]),
        raw(apis.FETCH, 12, **raft_fetch, topics=[]),
        raw(apis.FETCH, 12, **raft_fetch,
            topics=[{"topic": apis.METADATA_TOPIC, "partitions": []}]),
        raw(apis.DESCRIBE_QUORUM, topics=[]),
        raw(apis.FETCH_SNAPSHOT, cluster_id=CLUSTER_ID, replica_id=2, max_bytes=1, topics=[]),
        raw(apis.FETCH_SNAPSHOT, cluster_id=CLUSTER_ID, replica_id=2, max_bytes=1,
            topics=[{"name": "other", "partitions": []}]),
    ]
    for request in refused:
        assert call(port, request).error_code == ErrorCode.invalid_request, request
    unparsable = [
        raw(apis.VOTE, cluster_id=CLUSTER_ID, voter_id=-1, topics=None),
        raw(apis.DESCRIBE_QUORUM, topics=None),
        raw(apis.FETCH, 12, **{**raft_fetch, "replica_id": -1}, topics=None),
        raw(apis.LIST_OFFSETS, replica_id=-1, isolation_level=0, topics=None),
    ]
    for request in unparsable:
        assert outcome(port, request) == "closed", request
    body = call(port, produce_request(9, None))  # type: ignore[arg-type]
    assert body.responses[0].partition_responses[0].error_code == ErrorCode.invalid_record
    assert node.procs[1].poll() is None
    assert log_file.read_text().count("Traceback") == failures_before, "a handler failed"


def test_a_raft_fetch_parks_no_longer_than_the_request_timeout(node: Cluster) -> None:
    """MaxWaitMs 2**31 - 1 (24 days) is parked for controller.quorum.request.timeout.ms, not
    24 days: the fetcher would have given up long before."""
    port = node.ports[1]
    described = node.describe(1)
    end, epoch = described.current_voters[0].log_end_offset, described.leader_epoch
    me = Endpoint("127.0.0.1", 1)
    at_end = m.FetchRequest(CLUSTER_ID, 2, epoch, end, epoch, 0)
    part = call(port, translate.request_to_kio(at_end, me)).responses[0].partitions[0]
    assert part.error_code == 0 and not part.records and part.diverging_epoch.epoch < 0
    parked = translate.request_to_kio(dataclasses.replace(at_end, max_wait_ms=2**31 - 1), me)
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=30.0) as sock:
        sock.sendall(encode_request(7, parked, "parked"))
        assert sock.recv(65536), "closed instead of answered"
    assert time.monotonic() - started < 20.0  # the request timeout is 2 s; 24 days unclamped


def forged_raft_requests() -> list[Any]:
    """Raft requests of the right cluster and partition in this node's own name (node 1, the only
    voter) or a stranger's, with epochs and offsets at the edges of their types."""
    me = Endpoint("127.0.0.1", 1)
    top = 2**31 - 1
    out: list[Any] = []
    for sender in (1, 2, -1):
        out += [
            m.VoteRequest(CLUSTER_ID, top, sender, top, 10**9, False, -1),
            m.VoteRequest(CLUSTER_ID, top, sender, top - 1, 2**63 - 1, False, 1),
            m.VoteRequest(CLUSTER_ID, top, sender, 0, 0, True, -1),
            m.BeginQuorumEpochRequest(CLUSTER_ID, sender, top, -1),
            m.BeginQuorumEpochRequest(CLUSTER_ID, sender, MAX_EPOCH, 1),
            m.EndQuorumEpochRequest(CLUSTER_ID, sender, top, (1, -1, top)),
            m.FetchRequest(CLUSTER_ID, sender, top, 2**63 - 1, top, top),
            m.FetchRequest(CLUSTER_ID, sender, 1, 0, 0, top),
            m.FetchSnapshotRequest(CLUSTER_ID, sender, top, m.SnapshotId(2**63 - 1, top),
                                   2**63 - 1, top),
            m.FetchSnapshotRequest(CLUSTER_ID, sender, 1, m.SnapshotId(-1, -1), -1, -(2**31)),
            m.FetchSnapshotRequest(CLUSTER_ID, sender, 0, m.SnapshotId(0, 0), 0, 0),
        ]
    return [translate.request_to_kio(msg, me) for msg in out]


def outcome(port: int, request: Any) -> str:
    """"answer" (one response of the request's type), "closed" (nothing, then a closed
    connection) or "pending" (nothing yet: a long poll); anything else fails."""
    data = encode_request(7, request, "extreme")
    with socket.create_connection(("127.0.0.1", port), timeout=3.0) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        got = b""
        try:
            while chunk := sock.recv(1 << 20):
                got += chunk
        except TimeoutError:
            if not got:
                return "pending"
        except ConnectionResetError:
            pass
    if not got:
        return "closed"
    (size,) = struct.unpack(">i", got[:4])
    assert len(got) == 4 + size, f"{len(got)} bytes answer {type(request).__name__}"
    correlation_id, _ = decode_response(got[4:], response_class(request.__api_key__,
                                                                request.__version__))
    assert correlation_id == 7
    return "answer"


def may_stay_unanswered(request: Any) -> bool:
    """Produce with acks=0 is never answered; a Fetch may be parked up to its MaxWaitMs."""
    if request.__api_key__ == PRODUCE:
        return int(request.acks) == 0
    return request.__api_key__ == FETCH and request.max_wait.total_seconds() >= 1.0


def test_extreme_values_for_every_api_leave_node_up_epoch_sane_data_intact(
        node: Cluster) -> None:
    port = node.ports[1]
    produce(node, list(range(1000, 1010)))
    before = read_all(node)
    epoch = node.describe(1).leader_epoch
    log_file = node.root / "node1.log"
    failures_before = log_file.read_text().count("Traceback")
    extremes = Extremes(random.Random(2024), CLUSTER_ID, nulls=True)
    requests = [extremes.request(key, v) for key, v in every_version() for _ in range(6)]
    requests += forged_raft_requests()
    assert {r.__api_key__ for r in requests} == set(apis.SUPPORTED_APIS)
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda r: outcome(port, r), requests))
    for request, got in zip(requests, outcomes, strict=True):
        if got == "pending":
            assert may_stay_unanswered(request), request
        if got == "closed":
            assert may_be_closed(request), request
    assert node.procs[1].poll() is None, "the node died"
    described = node.describe(1)
    assert described is not None
    assert (described.leader_id, described.leader_epoch) == (1, epoch)
    assert read_all(node)[: len(before)] == before
    assert log_file.read_text().count("Traceback") == failures_before, "a handler failed"
    with client(node) as c:  # and it still serves
        c.call(apis.DESCRIBE_QUORUM, describe_quorum_request)


def test_data_dir_unchanged_by_fuzz(node: Cluster, tmp_path: Path) -> None:
    # after everything above, the node restarts from its files with the same log
    before = read_all(node)
    node.terminate(1)
    node.start(1)
    node.wait_leader()
    deadline = time.monotonic() + 10
    while len(after := read_all(node)) < len(before) and time.monotonic() < deadline:
        time.sleep(0.1)  # a restarted leader commits an entry of its epoch before reads see data
    assert after[: len(before)] == before
