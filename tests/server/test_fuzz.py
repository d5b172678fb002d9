"""A node survives any bytes: each bad request gets its error or a closed connection, the node
stays up, and the acknowledged data is intact afterwards."""

from __future__ import annotations

import random
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.wire import FETCH, LIST_OFFSETS, PRODUCE, KafkaClient
from reference_node.wire.apis import response_class
from reference_node.wire.codec import decode_response, encode_request, frame
from reference_node.wire.records import build_append_batch, read_values
from reference_node.wire.requests import fetch_request, list_offsets_request, produce_request
from testkit.cluster import Cluster

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
        kind = rng.choice(["random", "truncated", "oversized", "negative", "body"])
        if kind == "random":
            data = rng.randbytes(rng.randrange(1, 300))
        elif kind == "truncated":
            data = struct.pack(">i", 1000) + rng.randbytes(rng.randrange(0, 999))
        elif kind == "oversized":
            data = struct.pack(">i", 2**31 - 1) + rng.randbytes(100)
        elif kind == "negative":
            data = struct.pack(">i", -rng.randrange(1, 2**31))
        else:  # a plausible header for a supported API, then random bytes
            api = rng.choice([0, 1, 2, 3, 18, 52, 53, 54, 55])
            data = frame(struct.pack(">hhi", api, rng.randrange(0, 13), rng.randrange(2**31))
                         + rng.randbytes(rng.randrange(0, 200)))
        exchange(port, data, timeout=1.0)
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
