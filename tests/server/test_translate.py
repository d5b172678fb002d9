"""The core's messages survive the trip through kio and the wire, at every version we send."""

from __future__ import annotations

import uuid

import pytest

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.storage.batch import ControlType, StoredRecord
from reference_node.wire import apis
from reference_node.wire.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

ME = Endpoint("127.0.0.1", 9093)
ENTRIES = (
    m.Entry(5, 2, m.EntryKind.LEADER_CHANGE, m.LeaderChange(3, (1, 2, 3), (2, 3)).encode()),
    m.Entry(6, 2, m.EntryKind.DATA, b"42"),
    m.Entry(7, 2, m.EntryKind.DATA, b"43"),
    m.Entry(8, 3, m.EntryKind.DATA, b""),
)


@pytest.mark.parametrize("msg", [
    m.VoteRequest("cid", 4, 1, 3, 17, pre_vote=True, voter_id=2),
    m.BeginQuorumEpochRequest("cid", 1, 4, voter_id=2),
    m.EndQuorumEpochRequest("cid", 1, 4, (3, 2)),
    m.FetchRequest("cid", 2, 4, 17, 3, 500),
])
def test_requests_round_trip_through_bytes(msg: m.Request) -> None:
    data = encode_request(1, translate.request_to_kio(msg, ME), "t")
    req = decode_request(data[4:])
    assert translate.request_from_kio(req.api_key, req.body) == msg
    assert translate.leader_endpoint(req.body) in (None, ME)


def test_end_quorum_epoch_carries_the_successors_directory_ids_from_v1() -> None:
    """KIP-853: EndQuorumEpoch v1's PreferredCandidates name each successor's directory id (an
    unknown one is ZERO_UUID on the wire); v0's PreferredSuccessors only the ids."""
    directory = uuid.UUID("0f1e2d3c-4b5a-4968-8776-655443322110")
    msg = m.EndQuorumEpochRequest("cid", 1, 4, (3, 2), (directory, None))
    for version, expected in ((1, msg), (0, m.EndQuorumEpochRequest("cid", 1, 4, (3, 2)))):
        data = encode_request(1, translate.request_to_kio(msg, ME, version), "t")
        req = decode_request(data[4:])
        assert req.api_version == version
        assert translate.request_from_kio(req.api_key, req.body) == expected


@pytest.mark.parametrize("msg", [
    m.VoteResponse(m.ErrorCode.none, 1, 4, True),
    m.BeginQuorumEpochResponse(m.ErrorCode.fenced_leader_epoch, 3, 5),
    m.EndQuorumEpochResponse(m.ErrorCode.none, -1, 5),
    m.FetchResponse(m.ErrorCode.none, 1, 4, 6, 0, ENTRIES),
    m.FetchResponse(m.ErrorCode.none, 1, 4, 6, 0, (), m.DivergingEpoch(2, 9)),
])
def test_responses_round_trip_through_bytes(msg: m.Response) -> None:
    api_key = translate.response_api_key(msg)
    version = apis.SUPPORTED_APIS[api_key].max
    kio_msg = translate.response_to_kio(api_key, version, msg, 1, ME)
    _, body = decode_response(encode_response(9, kio_msg)[4:],
                              apis.response_class(api_key, version))
    assert translate.response_from_kio(api_key, body) == msg
    if not isinstance(msg, m.FetchResponse):  # Fetch carries endpoints from v17 only
        assert translate.learned_endpoints(body) == {1: ME}


def test_entries_become_kafka_batches_and_back() -> None:
    assert tuple(translate.records_to_entries(translate.entries_to_records(ENTRIES))) == ENTRIES


def test_leader_change_is_kafkas_message_with_voters() -> None:
    """The record on disk and on the wire is Kafka's LeaderChangeMessage v0 with the epoch's voters
    and the granting voters filled in, as Kafka's leader writes it."""
    from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
    from kio.serial import entity_reader

    stored = translate.entry_to_stored(ENTRIES[0])
    assert stored.control_type == ControlType.LEADER_CHANGE and stored.value is not None
    msg, _ = entity_reader(LeaderChangeMessage)(stored.value, 0)
    assert int(msg.leader_id) == 3
    assert [int(v.voter_id) for v in msg.voters] == [1, 2, 3]
    assert [int(v.voter_id) for v in msg.granting_voters] == [2, 3]


@pytest.mark.parametrize("control_type", [
    ControlType.SNAPSHOT_HEADER, 99,
])
def test_other_control_records_stay_opaque(control_type: int) -> None:
    """A control record that is not a LeaderChange is never read as one: it keeps its type and
    bytes through the log and the wire, and readers see a control record (no data)."""
    raw = b"\x00\x00opaque-bytes"
    record = StoredRecord(11, 4, raw, int(control_type), 0)
    entry = translate.stored_to_entry(record)
    assert entry.kind is m.EntryKind.CONTROL and entry.is_control
    assert (entry.control_type, entry.payload) == (int(control_type), raw)
    back = translate.entry_to_stored(entry)
    assert (back.control_type, back.value) == (int(control_type), raw)
    wire = translate.records_to_entries(translate.entries_to_records([entry]))
    assert wire == [entry]


def test_unreadable_leader_change_is_kept_not_rewritten() -> None:
    record = StoredRecord(3, 1, b"\xff", int(ControlType.LEADER_CHANGE), 0)
    entry = translate.stored_to_entry(record)
    assert entry.kind is m.EntryKind.CONTROL
    assert translate.entry_to_stored(entry).value == b"\xff"


def test_other_partition_is_refused() -> None:
    kio_msg = translate.request_to_kio(m.BeginQuorumEpochRequest("c", 1, 1), ME)
    other = type(kio_msg.topics[0])(topic_name="other", partitions=kio_msg.topics[0].partitions)
    bad = type(kio_msg)(cluster_id="c", voter_id=-1, topics=(other,), leader_endpoints=())
    with pytest.raises(translate.NotOurPartition):
        translate.request_from_kio(apis.BEGIN_QUORUM_EPOCH, bad)
