"""The reference client's outcomes, against scripted Kafka answers (no node): kv writes, cas and
reads, and the append read of a log whose prefix a snapshot replaced."""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.targets.reference_client import KV_IMAGE, ReferenceClient, image_of
from reference_node.raft.image import decode_command
from reference_node.wire import FETCH, LIST_OFFSETS, METADATA_TOPIC, PRODUCE, RequestTimeout
from reference_node.wire.apis import CLIENT_APIS
from reference_node.wire.records import build_batch, encode_value, parse_batches

Op = dict[str, Any]


class Conn:
    """A KafkaClient that answers from a script and keeps what it was asked."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[int, Any]] = []

    def call(self, api_key: int, build: Callable[[int], Any], timeout: float) -> Any:
        self.sent.append((api_key, build(CLIENT_APIS[api_key].max)))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        pass


def _client(conn: Conn) -> ReferenceClient:
    client = ReferenceClient()
    client.names = {1: "n1"}
    client.addresses = {1: ("127.0.0.1", 1)}
    client.current = 1
    client.conn = conn  # type: ignore[assignment]
    return client


def _produced(code: ErrorCode = ErrorCode.none, message: str | None = None) -> Any:
    part = SimpleNamespace(error_code=code, error_message=message, base_offset=7)
    return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[part])])


def _fetched(topic: str = METADATA_TOPIC, code: ErrorCode = ErrorCode.none, hw: int = -1,
             records: bytes = b"", log_start: int = -1) -> Any:
    part = SimpleNamespace(error_code=code, high_watermark=hw, records=records,
                           log_start_offset=log_start,
                           current_leader=SimpleNamespace(leader_id=-1, leader_epoch=-1))
    return SimpleNamespace(responses=[SimpleNamespace(topic=topic, partitions=[part])])


def _listed(offset: int, code: ErrorCode = ErrorCode.none) -> Any:
    part = SimpleNamespace(error_code=code, offset=offset)
    return SimpleNamespace(topics=[SimpleNamespace(partitions=[part])])


def _log(base: int, values: list[int]) -> bytes:
    return build_batch(base, 1, [encode_value(v) for v in values])


def _image(kv: dict[Any, Any]) -> bytes:
    if not kv:
        return b""
    return build_batch(0, 1, [json.dumps(v).encode() for v in kv.values()],
                       keys=[json.dumps(k).encode() for k in kv])


def _op(f: str, **value: Any) -> Op:
    return {"process": 0, "type": "invoke", "f": f, "value": value}


def _sent_command(conn: Conn) -> Any:
    api, request = conn.sent[-1]
    assert api == PRODUCE and request.acks == -1
    records = request.topic_data[0].partition_data[0].records
    [batch] = parse_batches(records)
    [(_, _, value)] = batch.records
    assert value is not None
    return decode_command(value)


def test_a_write_is_one_produced_command_and_ok() -> None:
    conn = Conn(_produced())
    done = _client(conn).invoke(_op("write", key=2, value=9), 1.0)
    assert done["type"] == "ok" and done["value"] == {"key": 2, "value": 9}
    assert done["node"] == "n1"
    command = _sent_command(conn)
    assert (command.op, command.key, command.value) == ("write", 2, 9)


@pytest.mark.parametrize(("message", "swapped"), [("swapped", True), ("not-swapped", False)])
def test_a_cas_is_ok_with_the_outcome_the_node_applied(message: str, swapped: bool) -> None:
    conn = Conn(_produced(message=message))
    done = _client(conn).invoke(_op("cas", key=1, **{"from": None, "to": 5}), 1.0)
    assert done["type"] == "ok"
    assert done["value"] == {"key": 1, "from": None, "to": 5, "swapped": swapped}
    command = _sent_command(conn)
    assert (command.op, command.key, command.expected, command.value) == ("cas", 1, None, 5)


def test_a_committed_cas_whose_outcome_is_not_said_is_info_never_a_guess() -> None:
    done = _client(Conn(_produced(message=None))).invoke(
        _op("cas", key=1, **{"from": 1, "to": 2}), 1.0)
    assert done["type"] == "info" and done["error"] == "cas-outcome-unknown"


@pytest.mark.parametrize(("code", "outcome"), [
    (ErrorCode.request_timed_out, "info"),  # appended, maybe committed
    (ErrorCode.invalid_record, "fail"),  # refused before appending
])
def test_produce_errors_keep_their_certainty(code: ErrorCode, outcome: str) -> None:
    for op in (_op("write", key=0, value=1), _op("cas", key=0, **{"from": 1, "to": 2})):
        assert _client(Conn(_produced(code))).invoke(op, 1.0)["type"] == outcome


def test_a_write_that_times_out_after_sending_is_info_a_read_fail() -> None:
    timeout = RequestTimeout("no answer")
    assert _client(Conn(timeout)).invoke(_op("write", key=0, value=1), 1.0)["type"] == "info"
    assert _client(Conn(timeout)).invoke(_op("read", key=0), 1.0)["type"] == "fail"


def test_a_kv_read_fetches_the_image_and_keeps_its_key() -> None:
    conn = Conn(_fetched(KV_IMAGE, hw=12, records=_image({0: 4, 3: None, 2: [1, 2]})))
    done = _client(conn).invoke(_op("read", key=2), 1.0)
    assert done["type"] == "ok" and done["value"] == {"key": 2, "value": [1, 2]}
    api, request = conn.sent[0]
    assert api == FETCH and request.topics[0].topic == KV_IMAGE
    assert int(request.topics[0].partitions[0].fetch_offset) == 0
    missing = _client(Conn(_fetched(KV_IMAGE, hw=12, records=_image({0: 4})))).invoke(
        _op("read", key=1), 1.0)
    assert missing["type"] == "ok" and missing["value"] == {"key": 1, "value": None}


def test_a_kv_read_that_is_refused_or_garbled_fails() -> None:
    refused = _client(Conn(_fetched(KV_IMAGE, code=ErrorCode.unknown_topic_or_partition)))
    assert refused.invoke(_op("read", key=0), 1.0)["type"] == "fail"
    garbled = build_batch(0, 1, [b"{not json"], keys=[b"0"])
    done = _client(Conn(_fetched(KV_IMAGE, hw=3, records=garbled))).invoke(_op("read", key=0), 1.0)
    assert done["type"] == "fail" and done["error"] == "bad-image"
    with pytest.raises(ValueError, match="image record 0 has no key"):
        image_of(build_batch(0, 1, [b"1"]))


def test_a_read_below_the_log_start_goes_on_from_it() -> None:
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range, log_start=40),
                _fetched(hw=42, records=_log(40, [100, 101])))
    done = _client(conn).invoke(_op("read", **{"from": 0}), 1.0)
    assert done["type"] == "ok"
    assert done["value"] == {"from": 40, "hw": 42, "records": [[40, 100], [41, 101]]}
    assert [int(r.topics[0].partitions[0].fetch_offset) for _, r in conn.sent] == [0, 40]


def test_without_the_log_start_in_the_answer_list_offsets_earliest_says_it() -> None:
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range), _listed(40),
                _fetched(hw=41, records=_log(40, [100])))
    done = _client(conn).invoke(_op("read", **{"from": 3}), 1.0)
    assert done["type"] == "ok" and done["value"]["from"] == 40
    api, request = conn.sent[1]
    assert api == LIST_OFFSETS and int(request.topics[0].partitions[0].timestamp) == -2


def test_out_of_range_above_the_log_start_fails() -> None:
    # past the end of the log: the log start is below the asked offset, nothing to go on from
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range, log_start=0))
    done = _client(conn).invoke(_op("read", **{"from": 99}), 1.0)
    assert done["type"] == "fail" and done["error"] == "offset-out-of-range"
    assert len(conn.sent) == 1


def test_the_log_start_moving_again_is_retried_only_once() -> None:
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range, log_start=40),
                _fetched(code=ErrorCode.offset_out_of_range, log_start=80))
    done = _client(conn).invoke(_op("read", **{"from": 0}), 1.0)
    assert done["type"] == "fail" and done["error"] == "offset-out-of-range"
    assert len(conn.sent) == 2
