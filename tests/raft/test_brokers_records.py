"""Brokers without a cluster: the record codec, the image's brokers (applied, snapshotted,
compared), incarnations, the three settings and the three switches, and the voter+broker
refusal."""

from __future__ import annotations

import json
import random
import uuid

import pytest

from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.core import RaftCore
from reference_node.raft.image import Image, decode_command, encode_write
from reference_node.raft.lifecycle import BrokerIdentity, new_incarnation
from reference_node.raft.messages import Entry, EntryKind
from reference_node.raft.records import (
    BrokerChange,
    BrokerInfo,
    decode_broker_record,
    encode_fence,
    encode_register,
    encode_shutdown,
    encode_unfence,
)

INC = uuid.UUID(int=(1 << 80) | (7 << 76) | (2 << 62))


def data(offset: int, payload: bytes, epoch: int = 1) -> Entry:
    return Entry(offset, epoch, EntryKind.DATA, payload)


def image_of(*payloads: bytes) -> Image:
    image = Image()
    for offset, payload in enumerate(payloads):
        image.apply(data(offset, payload))
    return image


# --- the codec ------------------------------------------------------------------------------------


def test_each_record_round_trips_and_is_sorted_compact_json() -> None:
    reg = encode_register(4, INC, "localhost", 9092)
    assert reg == json.dumps({"op": "register-broker", "broker": 4, "incarnation": str(INC),
                              "host": "localhost", "port": 9092},
                             sort_keys=True, separators=(",", ":")).encode()
    assert decode_broker_record(reg) == BrokerChange("register-broker", 4, incarnation=INC,
                                                     host="localhost", port=9092)
    assert decode_broker_record(encode_fence(4, 7, "session-expired")) == \
        BrokerChange("fence-broker", 4, 7, reason="session-expired")
    assert decode_broker_record(encode_unfence(4, 7, 9)) == \
        BrokerChange("unfence-broker", 4, 7, caught_up=9)
    assert decode_broker_record(encode_shutdown(4, 7)) == BrokerChange("shutdown-broker", 4, 7)


@pytest.mark.parametrize("payload", [
    b"17", b"", b"{", b"[]", encode_write("k", 1),
    b'{"op": "fence-broker", "broker": 4, "epoch": 7, "reason": "because"}',
    b'{"op": "fence-broker", "broker": true, "epoch": 7, "reason": "shutdown"}',
    b'{"op": "unfence-broker", "broker": 4, "epoch": "7", "caught_up": 1}',
    b'{"op": "register-broker", "broker": 4, "incarnation": "nope", "host": "h", "port": 1}',
    b'{"op": "register-broker", "broker": 4, "host": "h", "port": 1}',
    b'{"op": "delete-broker", "broker": 4, "epoch": 7}',
])
def test_anything_else_is_not_a_broker_record(payload: bytes) -> None:
    assert decode_broker_record(payload) is None


def test_a_broker_record_is_no_kv_command_and_leaves_kv_alone() -> None:
    reg = encode_register(4, INC, "h", 1)
    assert decode_command(reg) is None
    image = image_of(encode_write("a", 1), reg)
    assert image.kv == {"a": 1}
    assert image.records == 2  # counted and digested like every data record
    assert image_of(encode_write("a", 1), b"x").digest != image.digest


# --- the image ------------------------------------------------------------------------------------


def test_register_unfence_shutdown_fence_as_the_image_applies_them() -> None:
    image = image_of(b"x", encode_register(4, INC, "h", 9092))
    assert image.brokers[4] == BrokerInfo(4, INC, 1, "h", 9092, True, False, 1)
    assert image.brokers[4].state == "inactive"
    image.apply(data(2, encode_unfence(4, 1, 2)))
    assert (image.brokers[4].state, image.brokers[4].since) == ("active", 2)
    image.apply(data(3, encode_shutdown(4, 1)))
    assert (image.brokers[4].state, image.brokers[4].since) == ("stopping", 3)
    image.apply(data(4, encode_fence(4, 1, "shutdown")))
    assert (image.brokers[4].state, image.brokers[4].since) == ("inactive", 4)
    assert image.brokers[4].to_json() == {
        "broker": 4, "incarnation": str(INC), "epoch": 1, "host": "h", "port": 9092,
        "fenced": True, "shutdown": False, "since": 4, "state": "inactive"}


def test_a_record_of_another_registration_epoch_or_broker_is_a_no_op() -> None:
    image = image_of(encode_register(4, INC, "h", 1), encode_unfence(4, 0, 0))
    before = image.brokers[4]
    image.apply(data(2, encode_fence(4, 99, "want-fence")))  # not its epoch
    image.apply(data(3, encode_unfence(5, 0, 0)))  # no such broker
    image.apply(data(4, encode_unfence(4, 0, 3)))  # already unfenced: `since` stays
    assert image.brokers == {4: before}


def test_a_new_registration_is_a_new_epoch_fenced() -> None:
    newer = uuid.UUID(int=INC.int + 1)
    image = image_of(encode_register(4, INC, "h", 1), encode_unfence(4, 0, 0),
                     encode_register(4, newer, "h2", 2))
    assert image.brokers[4] == BrokerInfo(4, newer, 2, "h2", 2, True, False, 2)


def test_snapshot_round_trip_and_equality_keep_the_brokers() -> None:
    image = image_of(encode_write("k", "v"), encode_register(5, INC, "h", 1),
                     encode_register(4, INC, "g", 2), encode_unfence(4, 2, 2))
    records = image.to_records()
    head = json.loads(records[0])["image"]
    assert [b["broker"] for b in head["brokers"]] == [4, 5]
    back = Image.from_records(records)
    assert back == image and back.brokers == image.brokers and back.kv == {"k": "v"}
    assert image.copy() == image
    other = image.copy()
    other.brokers[4] = BrokerInfo(4, INC, 2, "g", 2, fenced=True, since=2)
    assert other != image


def test_an_image_without_brokers_snapshots_as_before() -> None:
    head = json.loads(image_of(encode_write("k", 1)).to_records()[0])["image"]
    assert "brokers" not in head


def test_a_snapshot_with_a_bad_broker_entry_is_refused_in_one_line() -> None:
    records = image_of(encode_register(4, INC, "h", 1)).to_records()
    head = json.loads(records[0])
    del head["image"]["brokers"][0]["epoch"]
    with pytest.raises(ValueError, match="image header") as info:
        Image.from_records([json.dumps(head).encode(), *records[1:]])
    assert "\n" not in str(info.value)


# --- incarnations ---------------------------------------------------------------------------------


def test_incarnations_are_uuid7_and_ordered_by_start_time() -> None:
    rng = random.Random(1)
    first = new_incarnation(1_700_000_000_000, rng)
    later = new_incarnation(1_700_000_000_001, rng)
    assert first.version == 7 and first.variant == uuid.RFC_4122
    assert first.int >> 80 == 1_700_000_000_000
    assert later.int > first.int
    assert len({new_incarnation(5, rng) for _ in range(50)}) == 50  # random below the ms


# --- settings and switches ------------------------------------------------------------------------


def test_broker_settings_default_to_kafkas_and_the_timeout_must_exceed_the_session() -> None:
    c = RaftConfig()
    assert (c.broker_session_timeout_ms, c.broker_heartbeat_interval_ms,
            c.broker_heartbeat_timeout_ms) == (9000, 2000, 12000)
    RaftConfig(broker_session_timeout_ms=3000, broker_heartbeat_interval_ms=500,
               broker_heartbeat_timeout_ms=4500)
    for timeout in (3000, 2000):
        with pytest.raises(ValueError, match=r"broker\.heartbeat\.timeout\.ms") as info:
            RaftConfig(broker_session_timeout_ms=3000, broker_heartbeat_timeout_ms=timeout)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="broker_heartbeat_interval_ms"):
        RaftConfig(broker_heartbeat_interval_ms=0)


def test_the_broker_switches_are_appended_last_in_order() -> None:
    names = [switch.value for switch in Unsafe]
    assert names[-3:] == ["no-self-fence", "accept-old-incarnation", "unfence-before-caught-up"]
    assert names[:2] == ["skip-flush", "resume-leader-after-restart"]
    assert Unsafe.parse("no-self-fence") == {Unsafe.NO_SELF_FENCE}


def test_a_voter_may_also_be_a_broker() -> None:
    identity = BrokerIdentity(INC, "localhost", 9092)
    voter = RaftCore(1, (1, 2, 3), "c", RaftConfig(), random.Random(0), 0, broker=identity)
    assert voter.is_voter and voter.broker_status() is not None
    observer = RaftCore(4, (1, 2, 3), "c", RaftConfig(), random.Random(0), 0, broker=identity)
    status = observer.broker_status()
    assert status is not None and status.state == "initial" and not status.serving
    assert status.self_fenced and status.contact_age_ms is None and status.broker_epoch == -1
    assert RaftCore(1, (1, 2, 3), "c", RaftConfig(), random.Random(0), 0).broker_status() is None
