"""A one-voter quorum (`kafka-storage format --standalone`): its leader is a majority by itself.

Nobody fetches from it, so check-quorum (KIP-595 "Leader Progress Timeout") must count the leader
alone as its quorum; before, it resigned every 3 s and the epoch climbed (1 -> 5 in 20 s).
"""

from __future__ import annotations

from raft_helpers import drain, make, tick

from reference_node.raft.api import ClientAppend, ClientRead, LogFlushed
from reference_node.raft.messages import ErrorCode


def test_a_single_voter_leader_keeps_its_epoch_for_a_minute() -> None:
    core = make(voters=(1,))
    now = 0
    while not core.is_leader:
        now += 100
        tick(core, now)
    epoch = core.epoch
    assert epoch == 1
    states = []
    elected = now
    for at in range(elected, elected + 60_000, 50):
        ready = tick(core, at)
        states += [e for e in ready.events if e["type"] == "state"]
        assert core.is_leader and core.epoch == epoch, f"resigned at {at} ms: {states}"
    assert states == []


def test_a_single_voter_leader_commits_and_reads_alone() -> None:
    core = make(voters=(1,))
    now = 0
    while not core.is_leader:
        now += 100
        tick(core, now)
    core.step(LogFlushed(core.log_end_offset))
    drain(core)
    core.step(ClientAppend(7, (b"42",)))
    ready = drain(core)
    assert ready.flush and [e.payload for e in ready.entries] == [b"42"]
    core.step(LogFlushed(core.log_end_offset))
    replies = drain(core).replies
    assert [(r.request_id, r.error) for r in replies] == [(7, ErrorCode.none)]
    core.step(ClientRead(8, 0))
    (read,) = drain(core).replies
    assert read.error == ErrorCode.none and read.high_watermark == core.log_end_offset
