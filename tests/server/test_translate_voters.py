"""KIP-853 on the wire: VotersRecord / KRaftVersionRecord entries in Fetch records, and the
fetcher's directory id in Fetch v17 (with v13+'s topic id and v15+'s ReplicaState)."""

from __future__ import annotations

import dataclasses
import struct
import uuid
from pathlib import Path

import pytest
from kio.records.readers import read_batch

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.server import translate
from reference_node.storage.batch import ControlType, StoredRecord
from reference_node.storage.kraft_records import decode_voters
from reference_node.wire import apis
from reference_node.wire.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)

ME = Endpoint("127.0.0.1", 9093)
DIR = uuid.UUID("5be7a655-4dab-41ed-9491-50539a29e707")
VOTERS = VoterSet([Voter(1, DIR, (VoterEndpoint("CONTROLLER", "127.0.0.1", 9093),)),
                   Voter(2, None, (VoterEndpoint("CONTROLLER", "127.0.0.1", 9094),))])
ENTRIES = (
    m.Entry(0, 1, m.EntryKind.KRAFT_VERSION, b"1"),
    m.Entry(1, 1, m.EntryKind.VOTERS, VOTERS.encode()),
    m.Entry(2, 1, m.EntryKind.DATA, b"42"),
    m.Entry(3, 1, m.EntryKind.VOTERS, VOTERS.without(2).encode()),
)
FETCH = m.FetchRequest("cid", 2, 4, 17, 3, 500, replica_directory_id=DIR)


@pytest.fixture
def fetch_up_to_17(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fetch up to v17 whatever `apis.SUPPORTED_APIS` says: the translation is tested alone."""
    monkeypatch.setitem(apis.SUPPORTED_APIS, apis.FETCH, apis.VersionRange(4, 17))


def test_voter_entries_are_kafkas_control_records_in_fetch_records() -> None:
    data = translate.entries_to_records(ENTRIES)
    seen, pos = [], 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        for r in batch.records:
            kind = struct.unpack(">hh", r.key)[1] if r.key is not None else None
            seen.append((int(r.offset), kind, bytes(r.value or b"")))
        pos += size
    assert [(o, k) for o, k, _ in seen] == [(0, ControlType.KRAFT_VERSION),
                                            (1, ControlType.KRAFT_VOTERS), (2, None),
                                            (3, ControlType.KRAFT_VOTERS)]
    assert seen[0][2] == b"\x00\x00\x00\x01\x00"
    assert decode_voters(seen[1][2]) == VOTERS
    assert tuple(translate.records_to_entries(data)) == ENTRIES


def test_a_fetch_response_carries_voter_entries_through_bytes() -> None:
    msg = m.FetchResponse(m.ErrorCode.none, 1, 4, 2, 0, ENTRIES)
    version = apis.SUPPORTED_APIS[apis.FETCH].max
    kio_msg = translate.response_to_kio(apis.FETCH, version, msg, 1, ME)
    _, body = decode_response(encode_response(9, kio_msg)[4:],
                              apis.response_class(apis.FETCH, version))
    assert translate.response_from_kio(apis.FETCH, body) == msg


@pytest.mark.parametrize("control_type", [ControlType.KRAFT_VOTERS, ControlType.KRAFT_VERSION])
def test_an_unreadable_voter_record_is_refused_not_skipped(control_type: int) -> None:
    record = StoredRecord(11, 4, b"\x00\x00opaque-bytes", int(control_type), 0)
    with pytest.raises(translate.UnreadableControlRecord, match="offset 11"):
        translate.stored_to_entry(record)


@pytest.mark.usefixtures("fetch_up_to_17")
@pytest.mark.parametrize("version", [12, 13, 15, 16, 17])
def test_fetch_requests_of_every_version_round_trip(version: int) -> None:
    body = translate.request_to_kio(FETCH, ME, version)
    req = decode_request(encode_request(1, body, "t")[4:])
    assert req.api_version == version
    expected = FETCH if version >= 17 else m.FetchRequest("cid", 2, 4, 17, 3, 500)
    assert translate.request_from_kio(req.api_key, req.body) == expected
    assert translate.fetch_replica_id(req.body) == 2
    topic = req.body.topics[0]
    if version >= 13:  # topics by id: Kafka's METADATA_TOPIC_ID
        assert topic.topic_id == uuid.UUID(int=1)
    if version >= 15:
        assert int(req.body.replica_state.replica_id) == 2


@pytest.mark.usefixtures("fetch_up_to_17")
def test_a_fetch_naming_another_topic_id_is_not_ours() -> None:
    body = translate.request_to_kio(FETCH, ME, 17)
    other = dataclasses.replace(body.topics[0], topic_id=uuid.uuid4())
    with pytest.raises(translate.NotOurPartition):
        translate.request_from_kio(apis.FETCH, dataclasses.replace(body, topics=(other,)))


@pytest.mark.usefixtures("fetch_up_to_17")
@pytest.mark.parametrize("version", [13, 16, 17])
def test_fetch_responses_by_topic_id_round_trip(version: int) -> None:
    msg = m.FetchResponse(m.ErrorCode.none, 1, 4, 2, 0, ENTRIES)
    kio_msg = translate.response_to_kio(apis.FETCH, version, msg, 1, ME)
    _, body = decode_response(encode_response(9, kio_msg)[4:],
                              apis.response_class(apis.FETCH, version))
    assert body.responses[0].topic_id == uuid.UUID(int=1)
    assert translate.response_from_kio(apis.FETCH, body) == msg
    if version >= 16:
        assert translate.learned_endpoints(body) == {1: ME}


UPDATE = m.UpdateVoterRequest("cid", 4, 2, DIR, (("CONTROLLER", "n2.example", 9093),), (0, 1))


def test_a_voters_own_update_round_trips_as_kafkas_update_raft_voter() -> None:
    body = translate.request_to_kio(UPDATE, ME)
    req = decode_request(encode_request(1, body, "t")[4:])
    assert req.api_key == apis.UPDATE_RAFT_VOTER
    assert translate.request_from_kio(req.api_key, req.body) == UPDATE
    answer = m.UpdateVoterResponse(m.ErrorCode.none, 1, 4)
    kio_msg = translate.response_to_kio(apis.UPDATE_RAFT_VOTER, 0, answer, 1, ME)
    assert (kio_msg.current_leader.host, int(kio_msg.current_leader.port)) == ("127.0.0.1", 9093)
    _, back = decode_response(encode_response(9, kio_msg)[4:], type(kio_msg))
    assert translate.response_from_kio(apis.UPDATE_RAFT_VOTER, back) == answer


def test_a_voter_announces_only_its_advertised_controller_listener() -> None:
    """Its bind address is not announced: peers may dial it another way (a proxy)."""
    from reference_node.config import Listener, NodeConfig
    from reference_node.server.node import announced_endpoints

    bound = Listener("CONTROLLER", Endpoint("0.0.0.0", 9093))
    cfg = NodeConfig(1, {}, (bound,), Path("/tmp/x"), controller_listener_names=("CONTROLLER",))
    assert announced_endpoints(cfg) == ()
    advertised = dataclasses.replace(cfg, advertised_listeners=(
        Listener("CONTROLLER", Endpoint("n1.example", 9093)),
        Listener("CLIENT", Endpoint("n1.example", 9092))))
    assert announced_endpoints(advertised) == (VoterEndpoint("CONTROLLER", "n1.example", 9093),)


def test_a_voters_record_keeps_each_voters_kraft_version_range() -> None:
    from reference_node.storage.kraft_records import voters_payload

    upgraded = VoterSet([dataclasses.replace(v, kraft_versions=(0, 2)) if v.id == 1 else v
                         for v in VOTERS])
    assert decode_voters(voters_payload(upgraded)) == upgraded
    assert VoterSet.decode(upgraded.encode()) == upgraded
    assert decode_voters(voters_payload(upgraded)).get(1).kraft_versions == (0, 2)  # type: ignore[union-attr]
