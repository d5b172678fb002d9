"""The client API's KIP-630 and `kv` answers, on a fake node: a cas's outcome in Produce's
error_message, the image as `__kv_image` records, OFFSET_OUT_OF_RANGE naming the log start below
it, and ListOffsets EARLIEST at the log start."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from reference_node.config import Endpoint
from reference_node.raft.api import AppendReply, QuorumDescription, ReadReply
from reference_node.raft.image import encode_cas, encode_write
from reference_node.raft.messages import Entry, EntryKind, ErrorCode
from reference_node.server.client_api import IMAGE_TOPIC, ClientApi
from reference_node.wire import FETCH, LIST_OFFSETS, METADATA, PRODUCE
from reference_node.wire.codec import Request
from reference_node.wire.records import build_batch, parse_batches, read_values
from reference_node.wire.requests import (
    EARLIEST_TIMESTAMP,
    fetch_request,
    list_offsets_request,
    metadata_request,
    produce_request,
)

from .fake_node import NodeApiFake

KV = ((1, "x"), ("a", 3), ("b", {"n": [1, 2]}))


@dataclass
class FakeNode(NodeApiFake):
    """The leader of epoch 3 whose log starts at 40 (a snapshot holds what is below)."""

    outcomes: tuple[str | None, ...] = ()
    read_error: ErrorCode = ErrorCode.none
    reads: list[int] = field(default_factory=list)
    node_id: int = 1
    cluster_id: str = "MkU3OEVBNTcwNTJENDM2Qk"

    def leader_id(self) -> int | None:
        return 1

    def epoch(self) -> int:
        return 3

    def high_watermark(self) -> int:
        return 50

    def log_start_offset(self) -> int:
        return 40

    def log_end_offset(self) -> int:
        return 52

    def voter_ids(self) -> list[int]:
        return [1, 2, 3]

    def client_address(self, node_id: int) -> Endpoint | None:
        return Endpoint("127.0.0.1", 9000 + node_id)

    def describe_quorum(self) -> QuorumDescription:
        return QuorumDescription(1, 3, 50, (), ())

    def _done(self, value: Any) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(value)
        return fut

    def append(self, payloads: tuple[bytes, ...]) -> asyncio.Future[AppendReply]:
        offsets = tuple(range(50, 50 + len(payloads)))
        return self._done(AppendReply(0, ErrorCode.none, offsets, outcomes=self.outcomes))

    def read(self, from_offset: int) -> asyncio.Future[ReadReply]:
        self.reads.append(from_offset)
        if from_offset < 40:  # the core's answer below its log start
            return self._done(ReadReply(0, ErrorCode.offset_out_of_range, -1, (), 1, 3))
        records = tuple(Entry(o, 3, EntryKind.DATA, str(o).encode())
                        for o in range(from_offset, 50))
        return self._done(ReadReply(0, ErrorCode.none, 50, records, 1, 3))

    def read_image(self) -> asyncio.Future[ReadReply]:
        if self.read_error != ErrorCode.none:
            return self._done(ReadReply(0, self.read_error, -1, (), 2, 4))
        return self._done(ReadReply(0, ErrorCode.none, 50, (), 1, 3, kv=KV))

    def hw_changed(self) -> asyncio.Future[None]:
        return asyncio.get_running_loop().create_future()


def answer(node: FakeNode, api_key: int, version: int, body: Any) -> Any:
    async def handle() -> Any:
        return await ClientApi(node).handlers[api_key](Request(api_key, version, 1, "t", body))

    return asyncio.run(handle())


@pytest.mark.parametrize(("outcomes", "message"), [
    (("swapped",), "swapped"), (("not-swapped",), "not-swapped"), (("ok",), None), ((None,), None),
    (("ok", "not-swapped"), "-,not-swapped"),
])
def test_produce_says_how_a_cas_came_out_in_error_message(
        outcomes: tuple[str | None, ...], message: str | None) -> None:
    node = FakeNode(outcomes=outcomes)
    values = [encode_cas("k", 1, 2)] * len(outcomes)
    part = answer(node, PRODUCE, 9, produce_request(9, build_batch(0, -1, values))) \
        .responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset, part.error_message) == (ErrorCode.none, 50, message)
    assert part.log_start_offset == 40


def fetch_part(node: FakeNode, offset: int, topic: str = "__cluster_metadata",
               version: int = 12) -> Any:
    resp = answer(node, FETCH, version, fetch_request(version, offset, topic=topic))
    (topic_answer,) = resp.responses
    assert topic_answer.topic == topic
    return topic_answer.partitions[0]


@pytest.mark.parametrize("version", [4, 12])
def test_the_image_is_served_as_json_records_at_the_high_watermark(version: int) -> None:
    part = fetch_part(FakeNode(), 0, IMAGE_TOPIC, version)
    assert (part.error_code, part.high_watermark) == (ErrorCode.none, 50)
    (batch,) = parse_batches(part.records)
    assert [(o, json.loads(k or b""), json.loads(v or b"")) for o, k, v in batch.records] == [
        (0, 1, "x"), (1, "a", 3), (2, "b", {"n": [1, 2]})]


def test_an_image_read_from_an_offset_gets_the_pairs_from_there_and_past_them_an_error() -> None:
    (batch,) = parse_batches(fetch_part(FakeNode(), 2, IMAGE_TOPIC).records)
    assert [json.loads(k or b"") for _, k, _ in batch.records] == ["b"]
    assert fetch_part(FakeNode(), 3, IMAGE_TOPIC).records in (b"", None)
    assert fetch_part(FakeNode(), 4, IMAGE_TOPIC).error_code == ErrorCode.offset_out_of_range


def test_an_image_read_refused_by_the_core_names_the_leader() -> None:
    part = fetch_part(FakeNode(read_error=ErrorCode.not_leader_or_follower), 0, IMAGE_TOPIC)
    assert part.error_code == ErrorCode.not_leader_or_follower
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (2, 4)


def test_other_partitions_of_the_image_topic_do_not_exist() -> None:
    resp = answer(FakeNode(), FETCH, 12, fetch_request(12, 0, topic=IMAGE_TOPIC, partition=1))
    assert resp.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_a_fetch_below_the_log_start_is_out_of_range_and_names_the_log_start() -> None:
    part = fetch_part(FakeNode(), 7)
    assert (part.error_code, part.log_start_offset) == (ErrorCode.offset_out_of_range, 40)
    ok = fetch_part(FakeNode(), 40)
    assert (ok.error_code, ok.log_start_offset, ok.high_watermark) == (ErrorCode.none, 40, 50)
    assert [o for o, _ in read_values(ok.records)] == list(range(40, 50))


def test_list_offsets_earliest_is_the_log_start() -> None:
    resp = answer(FakeNode(), LIST_OFFSETS, 7, list_offsets_request(7, EARLIEST_TIMESTAMP))
    part = resp.topics[0].partitions[0]
    assert (part.error_code, part.offset) == (ErrorCode.none, 40)


def test_metadata_lists_the_image_topic_only_when_asked_by_name() -> None:
    every = answer(FakeNode(), METADATA, 12, metadata_request(12, None))
    assert [t.name for t in every.topics] == ["__cluster_metadata"]
    named = answer(FakeNode(), METADATA, 12, metadata_request(12, [IMAGE_TOPIC]))
    (topic,) = named.topics
    assert (topic.name, topic.error_code, topic.partitions[0].leader_id) == (
        IMAGE_TOPIC, ErrorCode.none, 1)


def test_a_write_command_is_a_plain_record_value() -> None:
    """What the kv client produces is one keyless record: the node keeps it as any value."""
    node = FakeNode(outcomes=("ok",))
    part = answer(node, PRODUCE, 9, produce_request(9, build_batch(0, -1, [encode_write("k", 1)])))
    assert part.responses[0].partition_responses[0].error_code == ErrorCode.none
