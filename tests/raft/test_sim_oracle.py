"""The invariants' own models (sim/oracle.py): what they say, that they agree with a correct
implementation, and that a bug planted in `Image.apply` or `VoterSet.majority` changes nothing of
what the invariants expect, so that the invariant it breaks fires."""

from __future__ import annotations

import itertools
import json
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from reference_node.raft.image import Image, decode_command, encode_cas, encode_write
from reference_node.raft.image import fold_digest as image_fold_digest
from reference_node.raft.messages import Entry, EntryKind
from reference_node.raft.voters import VoterSet, overlapping
from reference_node.sim.invariants import INVARIANTS, Invariants, Violation
from reference_node.sim.oracle import (
    GENESIS_DIGEST,
    Broker,
    BrokerRecord,
    StateModel,
    fold_brokers,
    fold_digest,
    is_majority,
    majorities_meet,
    majority,
    observed_brokers,
    read_record,
)
from reference_node.sim.simulation import SimConfig, run_seed

INCARNATION = uuid.UUID("018bcfe5-6800-7000-8000-000000000001")
LATER = uuid.UUID("018bcfe5-7000-7000-8000-000000000002")


def data(offset: int, payload: bytes, epoch: int = 1) -> Entry:
    return Entry(offset, epoch, EntryKind.DATA, payload)


def broker_json(**body: Any) -> bytes:
    """A broker record in the design's form (the controller's encoding: sorted, compact)."""
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def register(broker: int, incarnation: uuid.UUID = INCARNATION) -> bytes:
    return broker_json(op="register-broker", broker=broker, incarnation=str(incarnation),
                       host=f"node{broker}", port=9092)


def unfence(broker: int, epoch: int, caught_up: int) -> bytes:
    return broker_json(op="unfence-broker", broker=broker, epoch=epoch, caught_up=caught_up)


def fence(broker: int, epoch: int, reason: str = "session-expired") -> bytes:
    return broker_json(op="fence-broker", broker=broker, epoch=epoch, reason=reason)


def shutdown(broker: int, epoch: int) -> bytes:
    return broker_json(op="shutdown-broker", broker=broker, epoch=epoch)


KV_LOG = [data(0, encode_write("x", 1)), data(1, encode_cas("x", 1, 2)),
          data(2, encode_cas("x", 1, 3)), data(3, b"17")]
"""A write, a cas that swaps, one that does not, opaque data."""


def commit(inv: Invariants, entries: list[Entry], image: Image | None = None) -> None:
    inv.high_watermark(1, 0, len(entries), lambda o: entries[o], image=image)


def fold(entries: list[Entry]) -> tuple[Image, list[str | None]]:
    """The implementation's image of `entries`, and each one's outcome."""
    image = Image()
    return image, [image.apply(e) for e in entries]


@contextmanager
def caught(invariant: str) -> Iterator[pytest.ExceptionInfo[Violation]]:
    assert invariant in INVARIANTS
    with pytest.raises(Violation, match=f"^{invariant}: ") as info:
        yield info


# --- the models ------------------------------------------------------------------------------------


def test_a_majority_is_more_than_half() -> None:
    assert [majority(n) for n in range(1, 8)] == [1, 2, 2, 3, 3, 4, 4]
    assert is_majority({1, 2}, [1, 2, 3])
    assert not is_majority({1}, [1, 2, 3])
    assert not is_majority({1, 2}, [1, 2, 3, 4])
    assert not is_majority({1, 4, 5}, [1, 2, 3])  # only voters count
    assert not is_majority([1, 1], [1, 2, 3])  # each voter counts once


def _disjoint_majorities(a: frozenset[int], b: frozenset[int]) -> bool:
    """By brute force: a majority of `a` and one of `b` that share no voter."""
    def majorities(ids: frozenset[int]) -> list[set[int]]:
        return [set(c) for size in range(majority(len(ids)), len(ids) + 1)
                for c in itertools.combinations(sorted(ids), size)]
    return any(not (x & y) for x in majorities(a) for y in majorities(b))


def test_majorities_meet_exactly_when_no_two_of_them_are_disjoint() -> None:
    sets = [frozenset(c) for size in range(1, 6) for c in itertools.combinations(range(1, 6), size)]
    for a in sets:
        for b in sets:
            assert majorities_meet(a, b) is not _disjoint_majorities(a, b), (sorted(a), sorted(b))
    assert majorities_meet({1, 2, 3}, {1, 2, 3, 4})  # one voter added: KIP-853's change
    assert not majorities_meet({1, 2, 3}, {2, 3, 4})  # one swapped: {1, 2} and {3, 4}


def test_the_state_model_applies_kv_commands_and_counts_data() -> None:
    model = StateModel()
    control = Entry(4, 2, EntryKind.LEADER_CHANGE, b"\x00")
    outcomes = [model.apply(e) for e in [*KV_LOG, control]]
    assert outcomes == ["ok", "swapped", "not-swapped", None, None]
    assert model.kv == {"x": 2}
    assert (model.end_offset, model.epoch, model.records) == (5, 2, 4)
    digest = GENESIS_DIGEST
    for entry in KV_LOG:
        digest = fold_digest(digest, entry.offset, entry.payload)
    assert model.digest == digest
    cas_on_missing = StateModel()
    assert cas_on_missing.apply(data(0, encode_cas("y", None, 5))) == "swapped"  # null: missing
    with pytest.raises(ValueError, match="apply of offset 3"):
        model.apply(data(3, b"again"))


def test_the_state_model_applies_broker_records() -> None:
    model = StateModel()
    for offset, payload in enumerate([register(4), unfence(4, 0, 1), unfence(4, 0, 2),
                                      shutdown(4, 0), fence(4, 9)]):
        model.apply(data(offset, payload))
    # The second unfence changes nothing; the fence names another registration.
    assert model.brokers == {4: Broker(4, INCARNATION, 0, "node4", 9092, fenced=False,
                                       shutdown=True, since=3)}
    assert model.brokers[4].state == "stopping"
    assert model.kv == {} and model.records == 5
    model.apply(data(5, fence(4, 0, "shutdown")))
    assert model.brokers[4].state == "inactive" and model.brokers[4].since == 5
    model.apply(data(6, register(4, LATER)))
    assert model.brokers[4] == Broker(4, LATER, 6, "node4", 9092, True, False, 6)
    brokers: dict[int, Broker] = {}
    fold_brokers(brokers, [data(0, register(5)), data(1, b"7"), data(2, unfence(5, 0, 1))])
    assert brokers[5].state == "active"


@pytest.mark.parametrize("payload", [
    b"17", b"{", b"[1]", b'{"op": "write", "key": [1], "value": 1}',
    b'{"op": "cas", "key": "x", "from": 1}', b'{"op": "write", "key": "x"}',
    broker_json(op="register-broker", broker=True, incarnation=str(INCARNATION), host="h", port=1),
    broker_json(op="register-broker", broker=4, incarnation="nope", host="h", port=1),
    broker_json(op="fence-broker", broker=4, epoch=0, reason="bored"),
    broker_json(op="unfence-broker", broker=4, epoch=0),
    broker_json(op="shutdown-broker", broker=4, epoch="0"),
])
def test_anything_else_is_opaque_data(payload: bytes) -> None:
    assert read_record(payload) is None


def test_records_read_as_the_design_writes_them() -> None:
    assert read_record(unfence(4, 7, 9)) == BrokerRecord("unfence-broker", 4, 7, caught_up=9)
    assert read_record(register(4)) == BrokerRecord("register-broker", 4, incarnation=INCARNATION,
                                                    host="node4", port=9092)


def _random_log(rng: random.Random, n: int) -> list[Entry]:
    entries: list[Entry] = []
    epoch_of_broker: dict[int, int] = {}
    for offset in range(n):
        roll = rng.random()
        key = rng.choice(["x", "y", 3])
        broker = rng.choice([4, 5])
        epoch = epoch_of_broker.get(broker, rng.randrange(3))
        if roll < 0.1:
            entry = Entry(offset, 1, EntryKind.LEADER_CHANGE, b"lc")
        elif roll < 0.3:
            entry = data(offset, str(rng.randrange(100)).encode())
        elif roll < 0.5:
            entry = data(offset, encode_write(key, rng.randrange(4)))
        elif roll < 0.7:
            entry = data(offset, encode_cas(key, rng.choice([None, 0, 1, 2, 3]), rng.randrange(4)))
        elif roll < 0.8:
            entry = data(offset, register(broker, uuid.UUID(int=rng.getrandbits(128))))
            epoch_of_broker[broker] = offset
        else:
            payload = rng.choice([unfence(broker, epoch, offset), fence(broker, epoch),
                                  shutdown(broker, epoch)])
            entry = data(offset, payload)
        entries.append(entry)
    return entries


def test_the_model_agrees_with_a_correct_image() -> None:
    """The other side of independence: on the code as it is, the two folds are the same, record
    by record (so the invariants expect what a correct node holds)."""
    rng = random.Random(7)
    for _ in range(30):
        entries = _random_log(rng, 60)
        image, model = Image(), StateModel()
        for entry in entries:
            assert model.apply(entry) == image.apply(entry)
            assert (model.end_offset, model.epoch, model.records, model.digest, model.kv) == \
                (image.end_offset, image.epoch, image.records, image.digest, image.kv)
            assert model.brokers == observed_brokers(image.brokers)
    assert fold_digest(GENESIS_DIGEST, 3, b"x") == image_fold_digest(GENESIS_DIGEST, 3, b"x")


def test_the_majorities_agree_with_a_correct_voter_set() -> None:
    sets = [VoterSet.of(c) for size in range(1, 6) for c in itertools.combinations(range(5), size)]
    for voters in sets:
        assert majority(len(voters.ids)) == voters.majority
        for other in sets:
            assert majorities_meet(voters.ids, other.ids) is overlapping(voters, other)


# --- bugs planted in the implementation ------------------------------------------------------------

_apply = Image.apply


def _cas_always_swaps(self: Image, entry: Entry) -> str | None:
    """`Image.apply` with a bug: a cas swaps whatever the key holds."""
    outcome = _apply(self, entry)
    if outcome == "not-swapped":
        command = decode_command(entry.payload)
        assert command is not None
        self.kv[command.key] = command.value
        return "swapped"
    return outcome


def _brokers_dropped(self: Image, entry: Entry) -> str | None:
    """`Image.apply` with a bug: broker records are counted and digested, and change no broker."""
    brokers = dict(self.brokers)
    outcome = _apply(self, entry)
    self.brokers = brokers
    return outcome


def test_a_cas_bug_in_image_apply_leaves_the_expectation_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "apply", _cas_always_swaps)
    node, told = fold(KV_LOG)
    assert told[2] == "swapped" and node.kv == {"x": 3}  # the bug is in force
    inv = Invariants()
    commit(inv, KV_LOG)
    assert inv.outcomes == ["ok", "swapped", "not-swapped", None]
    assert inv.image.kv == {"x": 2}
    inv.outcome(1, 1, told[1])
    with caught("ConsistentOutcomes"):
        inv.outcome(1, 2, told[2])
    with caught("ConsistentOutcomes"):
        inv.read_image(1, -1, 4, tuple(node.kv.items()))
    with caught("SnapshotMatchesLog") as info:
        inv.snapshot_seen(1, node.snapshot_id, node)
    assert "kv {'x': 3} (committed: {'x': 2})" in str(info.value)


def test_the_simulator_catches_a_cas_bug_in_image_apply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "apply", _cas_always_swaps)
    result = run_seed(0, SimConfig())
    assert result.violation is not None and result.violation.invariant == "ConsistentOutcomes"
    assert "told a client 'swapped'" in result.violation.detail
    assert "applying the committed log gives 'not-swapped'" in result.violation.detail


def test_a_broker_bug_in_image_apply_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "apply", _brokers_dropped)
    entries = [data(0, b"1"), data(1, register(4)), data(2, unfence(4, 1, 2))]
    node, _ = fold(entries)
    assert node.brokers == {} and node.records == 3  # the bug is in force
    inv = Invariants(brokers=True)
    with caught("BrokersAgree"):
        commit(inv, entries, node)
    assert inv.image.brokers[4].state == "active"
    result = run_seed(0, SimConfig(voters=3, observers=0, brokers=2, time_ms=20_000))
    assert result.violation is not None and result.violation.invariant == "BrokersAgree"


def _majority_off_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """`VoterSet.majority` with a bug: half of the voters (rounded down) is a majority."""
    monkeypatch.setattr(VoterSet, "majority", property(lambda self: len(self) // 2))
    assert VoterSet.of([1, 2, 3, 4, 5]).majority == 2  # the bug is in force


def test_a_majority_bug_leaves_the_expectation_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    _majority_off_by_one(monkeypatch)
    assert majority(5) == 3 and not is_majority({1, 2}, [1, 2, 3, 4, 5])
    inv = Invariants()
    inv.majority_flushed(1, 10, 3, [1, 2, 3, 4, 5])
    with caught("MajorityReachedHighWatermark") as info:
        inv.majority_flushed(1, 10, 2, [1, 2, 3, 4, 5])
    assert "(need 3)" in str(info.value)
    # The implementation's own overlap test now says a one-voter change is unsafe; the invariant
    # still knows it is not, and still knows that a two-voter change is.
    assert not overlapping(VoterSet.of([1, 2, 3]), VoterSet.of([1, 2, 3, 4]))
    inv.voter_sets_overlap(1, 3, VoterSet.of([1, 2, 3]), VoterSet.of([1, 2, 3, 4]))
    with caught("VoterSetsOverlap"):
        inv.voter_sets_overlap(1, 3, VoterSet.of([1, 2, 3]), VoterSet.of([1, 2, 3, 4, 5]))


@pytest.mark.parametrize(("voters", "invariant"), [
    (5, "GrantsOfOwnEpoch"),  # a pre-vote won with two grants of five
    (3, "MajorityReachedHighWatermark"),  # a leader alone commits
])
def test_the_simulator_catches_a_majority_bug(monkeypatch: pytest.MonkeyPatch, voters: int,
                                              invariant: str) -> None:
    _majority_off_by_one(monkeypatch)
    result = run_seed(0, SimConfig(voters=voters, observers=0))
    assert result.violation is not None and result.violation.invariant == invariant
    assert f"majority {majority(voters)}" in result.violation.detail or \
        f"(need {majority(voters)})" in result.violation.detail
