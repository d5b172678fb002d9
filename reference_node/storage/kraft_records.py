"""KIP-853's control records as Kafka writes them: `KRaftVersionRecord` (ControlRecordType
KRAFT_VERSION = 5) and `VotersRecord` (KRAFT_VOTERS = 6), to and from the core's forms.

The core knows a voter set as a `VoterSet` and the `kraft.version` as an int; the log, the Fetch
records and the snapshots hold Kafka's messages, serialized by kio exactly as Kafka writes them.
The mapping is exact both ways except for what the core does not keep.

A payload that does not decode is refused with `ControlRecordError` (one line): unlike a
LeaderChange, a voter record cannot be skipped, since a replica that ignored one would count
votes against the wrong set.

Details (the schema versions, the field mapping, the text form of directory ids):
docs/internals/storage.md#kraft_records
"""

from __future__ import annotations

import io
import uuid
from functools import cache
from typing import Any

from kio.schema.k_raft_version_record.v0.data import KRaftVersionRecord
from kio.schema.types import BrokerId
from kio.schema.voters_record.v0.data import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, u16

from reference_node.raft.voters import Voter as CoreVoter
from reference_node.raft.voters import VoterEndpoint, VoterSet, kafka_uuid, parse_kafka_uuid

__all__ = [
    "KRAFT_VERSION_MAX",
    "ControlRecordError",
    "decode_kraft_version",
    "decode_voters",
    "describe_voters",
    "kraft_version_json",
    "kraft_version_payload",
    "parse_uuid_text",
    "to_kio",
    "uuid_text",
    "voters_json",
    "voters_payload",
]

RECORD_VERSION = 0
"""Kafka's KRAFT_VERSION_CURRENT_VERSION and KRAFT_VOTERS_CURRENT_VERSION."""
KRAFT_VERSION_MAX = 1
"""The highest `kraft.version` this node supports (KIP-853's level 1)."""
ZERO_UUID = uuid.UUID(int=0)


class ControlRecordError(ValueError):
    """A KRaftVersionRecord or VotersRecord payload that is not one; the message is one line."""


# --- Kafka's Uuid text form -----------------------------------------------------------------------


uuid_text = kafka_uuid
parse_uuid_text = parse_kafka_uuid


# --- the payloads ---------------------------------------------------------------------------------


@cache
def _writer(cls: Any) -> Any:
    return entity_writer(cls)


@cache
def _reader(cls: Any) -> Any:
    return entity_reader(cls)


def _write(message: Any) -> bytes:
    buf = io.BytesIO()
    cls: Any = type(message)
    _writer(cls)(buf, message)
    return buf.getvalue()


def _read(cls: Any, payload: bytes, what: str) -> Any:
    try:
        message, used = _reader(cls)(payload, 0)
    except Exception as exc:  # kio raises several types for short or odd bytes
        raise ControlRecordError(f"unreadable {what} ({len(payload)} bytes): {exc!r}") from None
    if used != len(payload):
        raise ControlRecordError(f"{what} of {used} bytes followed by {len(payload) - used} "
                                 "more: not one message")
    return message


def kraft_version_payload(level: int) -> bytes:
    """The KRaftVersionRecord of `kraft.version` `level`."""
    if not 0 <= level <= 0x7FFF:
        raise ValueError(f"kraft.version {level} does not fit an int16")
    return _write(KRaftVersionRecord(version=i16(RECORD_VERSION), k_raft_version=i16(level)))


def decode_kraft_version(payload: bytes) -> int:
    """The `kraft.version` a KRaftVersionRecord sets; ControlRecordError if it is not one."""
    record = _read(KRaftVersionRecord, payload, "KRaftVersionRecord")
    level = int(record.k_raft_version)
    if level < 0:
        raise ControlRecordError(f"KRaftVersionRecord with kraft.version {level}")
    return level


def to_kio(voters: VoterSet) -> VotersRecord:
    return VotersRecord(version=i16(RECORD_VERSION), voters=tuple(
        Voter(voter_id=BrokerId(v.id), voter_directory_id=v.directory_id or ZERO_UUID,
              endpoints=tuple(Endpoint(name=e.name, host=e.host, port=u16(e.port))
                              for e in v.endpoints),
              k_raft_version_feature=KRaftVersionFeature(
                  min_supported_version=i16(v.kraft_versions[0]),
                  max_supported_version=i16(v.kraft_versions[1])))
        for v in voters))


def voters_payload(voters: VoterSet) -> bytes:
    """The VotersRecord of `voters`."""
    return _write(to_kio(voters))


def decode_voters(payload: bytes) -> VoterSet:
    """The voter set a VotersRecord holds; ControlRecordError if it is not one (or names a voter
    twice, or none)."""
    record = _read(VotersRecord, payload, "VotersRecord")
    try:
        voters = VoterSet(
            CoreVoter(int(v.voter_id), _directory(v.voter_directory_id),
                      tuple(VoterEndpoint(str(e.name), str(e.host), int(e.port))
                            for e in v.endpoints),
                      (int(v.k_raft_version_feature.min_supported_version),
                       int(v.k_raft_version_feature.max_supported_version)))
            for v in record.voters)
    except ValueError as exc:
        raise ControlRecordError(f"VotersRecord: {exc}") from None
    if not voters:
        raise ControlRecordError("VotersRecord with no voter")
    return voters


def _directory(value: uuid.UUID | None) -> uuid.UUID | None:
    return None if value is None or value == ZERO_UUID else value


# --- as kafka-dump-log.sh prints them -------------------------------------------------------------


def kraft_version_json(payload: bytes) -> dict[str, int]:
    """Kafka's KRaftVersionRecordJsonConverter form."""
    record = _read(KRaftVersionRecord, payload, "KRaftVersionRecord")
    return {"version": int(record.version), "kRaftVersion": int(record.k_raft_version)}


def voters_json(payload: bytes) -> dict[str, Any]:
    """Kafka's VotersRecordJsonConverter form (directory ids in Kafka's text form)."""
    record = _read(VotersRecord, payload, "VotersRecord")
    return {"version": int(record.version), "voters": [
        {"voterId": int(v.voter_id), "voterDirectoryId": uuid_text(v.voter_directory_id),
         "endpoints": [{"name": e.name, "host": e.host, "port": int(e.port)}
                       for e in v.endpoints],
         "kRaftVersionFeature": {
             "minSupportedVersion": int(v.k_raft_version_feature.min_supported_version),
             "maxSupportedVersion": int(v.k_raft_version_feature.max_supported_version)}}
        for v in record.voters]}


def describe_voters(voters: VoterSet) -> str:
    """`id@host:port:directoryId,...`, the form of `--initial-controllers` (Kafka's text ids)."""
    out = []
    for v in voters:
        ep = v.endpoints[0] if v.endpoints else None
        host = "?" if ep is None else (f"[{ep.host}]" if ":" in ep.host else ep.host)
        port = "?" if ep is None else str(ep.port)
        out.append(f"{v.id}@{host}:{port}:{uuid_text(v.directory_id)}")
    return ",".join(out)
