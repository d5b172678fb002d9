"""KIP-853 in the core, on an in-memory cluster formatted with kraft.version 1: AddRaftVoter and
RemoveRaftVoter on the leader (catch-up, one change at a time, a leader removing itself), a voter
set undone by truncation, directory ids, Kafka's error codes, and the three unsafe switches at the
core level (the simulator catches them end to end: test_membership_sim.py)."""

from __future__ import annotations

import dataclasses
import uuid

from reference_node.raft.api import AddVoter, ClientAppend, RemoveVoter, VoterChangeReply
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    EntryKind,
    ErrorCode,
)
from reference_node.raft.voters import SUPPORTED_KRAFT_VERSIONS
from testkit.raft_cluster import Cluster

OTHER_DIR = uuid.UUID(int=7, version=4)


def kraft1(voters: tuple[int, ...] = (1, 2, 3), observers: tuple[int, ...] = (4,),
           unsafe: frozenset[Unsafe] = frozenset(), down: tuple[int, ...] = ()) -> Cluster:
    """A kraft.version 1 cluster whose node 1 leads epoch 1, its LeaderChange committed, and
    whose observers follow it."""
    cluster = Cluster(voters, observers, RaftConfig(unsafe=unsafe), kraft_version=1, down=down)
    cluster.tick(1, 2000)
    cluster.settle()
    assert cluster.core(1).is_leader
    run(cluster, 100)  # an observer refused before there was a leader asks again
    return cluster


def run(cluster: Cluster, ms: int, rounds: int = 2) -> None:
    """`ms` pass (in `rounds` steps): every running node ticks, every message and flush lands."""
    for _ in range(rounds):
        cluster.now += ms // rounds
        for node, host in cluster.hosts.items():
            if host.up:
                cluster.tick(node)
        cluster.settle()


def replies(cluster: Cluster, request_id: int) -> list[VoterChangeReply]:
    return [r for _, r in cluster.replies
            if isinstance(r, VoterChangeReply) and r.request_id == request_id]


def run_ticks(cluster: Cluster, ms: int = 10) -> None:
    """`ms` pass and every running node ticks; nothing is delivered or flushed."""
    cluster.now += ms
    for node, host in cluster.hosts.items():
        if host.up:
            cluster.tick(node)


def versions_answered(cluster: Cluster) -> None:
    """Deliver the leader's ApiVersions request to the replica it adds, and the answer: the
    VotersRecord is appended (or the add refused); nothing else is delivered."""
    for kind in (ApiVersionsRequest, ApiVersionsResponse):
        (index,) = [i for i, f in enumerate(cluster.in_flight) if isinstance(f.message, kind)]
        cluster.deliver(index)


def answer(cluster: Cluster, request_id: int) -> VoterChangeReply:
    (reply,) = replies(cluster, request_id)
    return reply


def voters_entries(cluster: Cluster, node: int) -> list[int]:
    """The offsets of the VotersRecords in `node`'s log."""
    return [e.offset for e in cluster.core(node).log_view.entries() if e.kind is EntryKind.VOTERS]


# --- AddRaftVoter ---------------------------------------------------------------------------------


def test_a_caught_up_observer_is_added_committed_and_described() -> None:
    cluster = kraft1()
    cluster.step(1, AddVoter(1, cluster.voter(4)))
    cluster.settle()
    run(cluster, 600)
    assert answer(cluster, 1).error == ErrorCode.none
    assert cluster.core(1).high_watermark > voters_entries(cluster, 1)[-1]
    for node in (1, 2, 3, 4):
        assert cluster.core(node).voters.ids == {1, 2, 3, 4}, node
    assert cluster.core(4).is_voter
    quorum = cluster.core(1).describe_quorum()
    assert [r.replica_id for r in quorum.voters] == [1, 2, 3, 4]
    assert quorum.voters[3].directory_id == cluster.hosts[4].directory_id
    assert quorum.observers == () and quorum.kraft_version == 1


def test_the_leader_asks_the_new_voter_its_kraft_versions_before_adding_it() -> None:
    """Kafka's AddVoterHandler: an ApiVersions request to the replica first; the VotersRecord
    (with the levels it answered) is appended only once it answers."""
    cluster = kraft1()
    before = voters_entries(cluster, 1)
    cluster.step(1, AddVoter(1, cluster.voter(4)))
    asked = [f for f in cluster.in_flight if isinstance(f.message, ApiVersionsRequest)]
    assert [(f.src, f.dst) for f in asked] == [(1, 4)]
    assert voters_entries(cluster, 1) == before and replies(cluster, 1) == []
    cluster.settle()
    assert len(voters_entries(cluster, 1)) == len(before) + 1
    voter = cluster.core(1).voters.get(4)
    assert voter is not None and voter.kraft_versions == SUPPORTED_KRAFT_VERSIONS


def test_a_replica_that_does_not_answer_is_refused_after_the_request_timeout() -> None:
    """No answer to ApiVersions within the request timeout (the replica is down): REQUEST_TIMED_OUT
    (Kafka's maybeExpirePendingOperation), and nothing changes."""
    cluster = kraft1(down=(4,))
    end, before = cluster.core(1).log_end_offset, voters_entries(cluster, 1)
    cluster.step(1, AddVoter(1, cluster.voter(4), timeout_ms=60_000))
    run(cluster, cluster.config.request_timeout_ms - 10)
    assert replies(cluster, 1) == []
    run(cluster, 10, rounds=1)
    reply = answer(cluster, 1)
    assert reply.error == ErrorCode.request_timed_out
    assert reply.message is not None and "did not answer ApiVersions" in reply.message
    assert cluster.core(1).voters.ids == {1, 2, 3}
    assert voters_entries(cluster, 1) == before and cluster.core(1).log_end_offset == end


def test_a_replica_not_caught_up_when_it_answers_is_refused() -> None:
    """The catch-up check runs when the answer comes (Kafka's isReplicaCaughtUp): replica 4 of
    another directory than the one fetching answers, but that replica never fetched."""
    cluster = kraft1()
    other = dataclasses.replace(cluster.voter(4), directory_id=OTHER_DIR)
    cluster.step(1, AddVoter(1, other))
    cluster.settle()
    reply = answer(cluster, 1)
    assert reply.error == ErrorCode.request_timed_out
    assert reply.message is not None and "has not caught up" in reply.message
    assert cluster.core(1).voters.ids == {1, 2, 3}


def test_a_replica_without_the_finalized_kraft_version_is_invalid() -> None:
    """Kafka's validVersionRange: a replica that cannot read kraft.version 1 records must not
    vote on them (INVALID_REQUEST)."""
    cluster = kraft1()
    cluster.crash(4)
    cluster.hosts[4].kraft_versions = (0, 0)
    cluster.start(4)
    run(cluster, 600)
    cluster.step(1, AddVoter(1, cluster.voter(4)))
    cluster.settle()
    reply = answer(cluster, 1)
    assert reply.error == ErrorCode.invalid_request
    assert reply.message is not None and "0..0" in reply.message
    assert cluster.core(1).voters.ids == {1, 2, 3}


def test_a_second_change_while_one_is_pending_or_uncommitted_is_refused() -> None:
    cluster = kraft1()
    before = voters_entries(cluster, 1)
    cluster.step(1, AddVoter(1, cluster.voter(4)))  # asking 4's ApiVersions: an add pending
    cluster.step(1, RemoveVoter(2, 2, cluster.hosts[2].directory_id))
    assert answer(cluster, 2).error == ErrorCode.request_timed_out
    cluster.deliver(0)  # 4 gets the ApiVersions request
    cluster.deliver(len(cluster.in_flight) - 1)  # and its answer: appended, not committed
    assert len(voters_entries(cluster, 1)) == len(before) + 1
    cluster.step(1, RemoveVoter(3, 2, cluster.hosts[2].directory_id))
    assert answer(cluster, 3).error == ErrorCode.request_timed_out
    cluster.settle()
    run(cluster, 600)
    assert answer(cluster, 1).error == ErrorCode.none
    assert cluster.core(1).voters.ids == {1, 2, 3, 4}
    cluster.step(1, RemoveVoter(4, 2, cluster.hosts[2].directory_id))  # now it may
    cluster.settle()
    run(cluster, 600)
    assert answer(cluster, 4).error == ErrorCode.none
    assert cluster.core(1).voters.ids == {1, 3, 4}


def test_a_refused_add_holds_no_other_change_off() -> None:
    """Once the add is refused, nothing waits for the replica: the next change is taken."""
    cluster = kraft1(down=(4,))
    cluster.step(1, AddVoter(1, cluster.voter(4)))
    run(cluster, cluster.config.request_timeout_ms)
    assert answer(cluster, 1).error == ErrorCode.request_timed_out
    cluster.step(1, RemoveVoter(2, 3, cluster.hosts[3].directory_id))
    cluster.settle()
    run(cluster, 600)
    assert answer(cluster, 2).error == ErrorCode.none
    assert cluster.core(1).voters.ids == {1, 2}


# --- RemoveRaftVoter ------------------------------------------------------------------------------


def _remove_leader_with_3_down(unsafe: frozenset[Unsafe] = frozenset()) -> tuple[Cluster, int]:
    """Leader 1 removes itself while voter 3 is down: the new set {2, 3} needs 3."""
    cluster = kraft1(observers=(), unsafe=unsafe)
    cluster.crash(3)
    before = voters_entries(cluster, 1)
    cluster.step(1, RemoveVoter(1, 1, cluster.hosts[1].directory_id))
    offset = voters_entries(cluster, 1)[-1]
    assert offset not in before
    cluster.settle()
    run(cluster, 600)
    return cluster, offset


def test_a_leader_removing_itself_leads_until_the_removal_commits_then_resigns() -> None:
    cluster, offset = _remove_leader_with_3_down()
    leader = cluster.core(1)
    # 1 and 2 hold the VotersRecord, but 1 is not a voter of the set in effect: its own log does
    # not count, and {2, 3} has no majority without 3.
    assert cluster.core(2).log_end_offset > offset and cluster.hosts[2].disk.flushed > offset
    assert leader.is_leader and not leader.is_voter
    assert leader.high_watermark <= offset and replies(cluster, 1) == []
    cluster.start(3)
    run(cluster, 600)
    assert answer(cluster, 1).error == ErrorCode.none
    assert cluster.core(1).state_name == "resigned"
    for _ in range(20):
        run(cluster, 500)
        if any(cluster.core(n).is_leader for n in (2, 3)):
            break
    new = next(n for n in (2, 3) if cluster.core(n).is_leader)
    assert cluster.core(new).epoch > 1 and cluster.core(new).voters.ids == {2, 3}
    run(cluster, 2500, rounds=5)
    old = cluster.core(1)  # an observer now, following the new leader
    assert not old.is_voter and not old.is_leader and old.leader_id == new


def test_a_removed_leader_goes_unattached_in_the_next_epoch() -> None:
    """Kafka's pollResigned: a resigned replica that is not a voter, at its election timeout,
    goes to Unattached in epoch + 1 (not the epoch it led: a Fetch answer of that epoch naming
    it the leader would otherwise be taken at its word)."""
    cluster, _ = _remove_leader_with_3_down()
    cluster.start(3)
    run(cluster, 600)
    assert answer(cluster, 1).error == ErrorCode.none
    old = cluster.core(1)
    assert old.state_name == "resigned" and old.epoch == 1
    cluster.crash(2)
    cluster.crash(3)  # no new leader to learn of: only the timer moves it
    run(cluster, 2000, rounds=10)
    old = cluster.core(1)
    assert old.state_name == "unattached" and old.epoch == 2 and old.leader_id is None
    assert not old.is_voter


def test_leader_remove_no_resign_counts_the_removed_leader() -> None:
    """KAFKA-16530's defect at the core: the removed leader counts its own log, so {1, 2} commit
    the change that makes the set {2, 3}, where only 2 holds it; and it leads on."""
    cluster, offset = _remove_leader_with_3_down(frozenset({Unsafe.LEADER_REMOVE_NO_RESIGN}))
    assert cluster.core(1).high_watermark > offset
    assert answer(cluster, 1).error == ErrorCode.none
    assert cluster.core(1).is_leader


def test_the_last_voter_cannot_be_removed() -> None:
    cluster = kraft1(voters=(1,), observers=())
    cluster.step(1, RemoveVoter(1, 1, cluster.hosts[1].directory_id))
    reply = answer(cluster, 1)
    assert reply.error == ErrorCode.voter_not_found and "last voter" in (reply.message or "")


def test_a_wrong_directory_or_unknown_id_is_voter_not_found() -> None:
    cluster = kraft1()
    before = voters_entries(cluster, 1)
    cluster.step(1, RemoveVoter(1, 2, OTHER_DIR))
    cluster.step(1, RemoveVoter(2, 9, None))
    assert answer(cluster, 1).error == ErrorCode.voter_not_found
    assert answer(cluster, 2).error == ErrorCode.voter_not_found
    assert cluster.core(1).voters.ids == {1, 2, 3} and voters_entries(cluster, 1) == before


# --- errors ---------------------------------------------------------------------------------------


def test_a_voter_already_in_the_set_is_duplicate_voter() -> None:
    cluster = kraft1()
    cluster.step(1, AddVoter(1, cluster.voter(2)))
    assert answer(cluster, 1).error == ErrorCode.duplicate_voter


def test_static_voters_are_unsupported_version() -> None:
    cluster = Cluster((1, 2, 3), (4,))
    cluster.tick(1, 2000)
    cluster.settle()
    run(cluster, 0)
    cluster.step(1, AddVoter(1, cluster.voter(4)))
    cluster.step(1, RemoveVoter(2, 3, None))
    assert answer(cluster, 1).error == ErrorCode.unsupported_version
    assert answer(cluster, 2).error == ErrorCode.unsupported_version


def test_a_follower_is_not_the_leader() -> None:
    cluster = kraft1()
    cluster.step(2, AddVoter(1, cluster.voter(4)))
    reply = answer(cluster, 1)
    assert reply.error == ErrorCode.not_leader_or_follower and reply.leader_id == 1


# --- the set in effect ----------------------------------------------------------------------------


def test_truncation_undoes_an_uncommitted_voters_record_on_a_follower() -> None:
    """Leader 1 appends the VotersRecord adding 4; only follower 2 receives it, then 1 crashes
    before flushing it. 3 is elected with 1's vote, and 2, following 3, truncates the record
    away: its set is {1, 2, 3} again (KIP-853: a set is in effect from its append, undone by a
    truncation)."""
    cluster = kraft1()
    before = voters_entries(cluster, 2)
    cluster.crash(3)
    cluster.step(1, AddVoter(1, cluster.voter(4)))
    versions_answered(cluster)
    offset = voters_entries(cluster, 1)[-1]
    for _ in range(10):
        if voters_entries(cluster, 2) != before:
            break
        while cluster.in_flight:  # 2's fetch brings it (once its parked fetch expires)
            cluster.deliver(0)
        run_ticks(cluster, 100)  # and 1 never flushes it
    assert voters_entries(cluster, 2) == [*before, offset]
    assert cluster.core(2).voters.ids == {1, 2, 3, 4} and cluster.core(2).high_watermark <= offset
    cluster.crash(1)
    assert cluster.hosts[1].disk.flushed <= offset  # lost with the crash
    cluster.crash(2)  # so that 3 and 1 elect a leader without the record
    cluster.start(3)
    cluster.start(1)
    for _ in range(20):
        run(cluster, 500)
        if cluster.core(3).is_leader:
            break
    assert cluster.core(3).is_leader
    cluster.start(2)
    run(cluster, 600)
    follower = cluster.core(2)
    assert follower.leader_id == 3 and follower.voters.ids == {1, 2, 3}
    assert offset not in voters_entries(cluster, 2)


def test_a_reformatted_voter_does_not_count() -> None:
    """Voter 3's disk is replaced (a new directory id): the replica fetching as 3 is not the
    voter, so with 2 down nothing commits; removed by its old directory and added by its new one,
    it counts again."""
    cluster = kraft1(observers=())
    old_dir = cluster.hosts[3].directory_id
    cluster.wipe(3)
    cluster.start(3)
    for _ in range(10):  # the new 3 asks a random bootstrap server till it finds the leader
        run(cluster, 200, rounds=1)
        if cluster.core(3).leader_id == 1:
            break
    cluster.crash(2)
    hw = cluster.core(1).high_watermark
    cluster.step(1, ClientAppend(1, (b"x",)))
    run(cluster, 600)
    assert cluster.core(3).log_end_offset == cluster.core(1).log_end_offset
    assert cluster.hosts[3].disk.flushed == cluster.core(1).log_end_offset
    assert cluster.core(1).high_watermark == hw
    cluster.start(2)
    cluster.step(1, RemoveVoter(10, 3, old_dir))
    run(cluster, 600)
    assert answer(cluster, 10).error == ErrorCode.none
    cluster.step(1, AddVoter(11, cluster.voter(3)))
    run(cluster, 600)
    assert answer(cluster, 11).error == ErrorCode.none
    assert cluster.core(1).voters.get(3) == cluster.voter(3)


def test_add_unflushed_voter_counts_entries_the_new_voter_has_not_flushed() -> None:
    """KAFKA-17332's defect at the core: the observer fetches from its unflushed log end, so once
    added its unflushed entries count toward the high watermark. Voters {1, 2} with 2 down:
    entry x is flushed on 1 only; observer 3 has it unflushed when it is added, and {1, 3} is a
    majority of {1, 2, 3}."""
    for unsafe, counted in ((frozenset(), False), (frozenset({Unsafe.ADD_UNFLUSHED_VOTER}), True)):
        cluster = kraft1(voters=(1, 2), observers=(3,), unsafe=unsafe)
        cluster.crash(2)
        cluster.step(1, ClientAppend(1, (b"x",)))
        x = cluster.core(1).log_end_offset - 1
        cluster.flush(1)
        while cluster.in_flight:  # 3 receives x; its flush never completes
            cluster.deliver(0)
        assert cluster.core(3).log_end_offset > x >= cluster.hosts[3].disk.flushed
        cluster.step(1, AddVoter(2, cluster.voter(3)))
        versions_answered(cluster)
        cluster.flush(1)
        while cluster.in_flight:
            cluster.deliver(0)
        assert cluster.core(1).voters.ids == {1, 2, 3}
        assert [n for n in (1, 2, 3) if cluster.hosts[n].disk.flushed > x] == [1]
        assert (cluster.core(1).high_watermark > x) is counted, unsafe


def test_a_replica_formatted_without_the_checkpoint_learns_the_voters_from_the_log() -> None:
    """The first leader writes the checkpoint's kraft.version and voters into the log (Kafka's
    appendStartOfEpochControlRecords): a replica formatted with `--no-initial-controllers`
    learns them there."""
    cluster = Cluster((1, 2, 3), (4,), kraft_version=1, down=(4,))
    cluster.wipe(4, checkpoint=False)  # `kraft node format --no-initial-controllers`
    cluster.start(4)
    cluster.tick(1, 2000)
    cluster.settle()
    run(cluster, 600)
    observer = cluster.core(4)
    assert observer.high_watermark == cluster.core(1).high_watermark
    assert observer.kraft_version == 1
    assert observer.voters == cluster.core(1).voters


# --- core defects found by the simulator (issue 16), open until the core is fixed -----------------


def test_a_leader_cut_off_resigns_after_its_voter_set_shrinks() -> None:
    """Leader 1 of {1, 2, 3, 4} heard from 2 only (3 and 4 are down), then 2 goes down too and 1
    removes 4: {1, 2} is a majority of {1, 2, 3}, but 2's fetch came before. With no fetch from
    anyone, 1 must resign within the check-quorum timeout (3 s) as Kafka's leader does."""
    cluster = kraft1(voters=(1, 2, 3, 4), observers=())
    cluster.crash(3)
    cluster.crash(4)
    run(cluster, 200)  # 2 fetches: the leader heard from 1 and 2 of {1, 2, 3, 4}
    cluster.crash(2)
    cluster.step(1, RemoveVoter(1, 4, cluster.hosts[4].directory_id))
    assert cluster.core(1).voters.ids == {1, 2, 3}
    run(cluster, 6000, rounds=60)
    assert not cluster.core(1).is_leader


def test_a_new_voter_votes_before_it_has_the_record_that_added_it() -> None:
    """Voters {1, 2, 3}, 3 down: leader 1 adds 4; only 2 receives the VotersRecord, then 1
    crashes and 3 comes back. 2 needs three of {1, 2, 3, 4}: 3 and 4, which does not know yet
    that it votes."""
    cluster = kraft1()
    cluster.crash(3)
    cluster.step(1, AddVoter(1, cluster.voter(4)))
    versions_answered(cluster)
    for _ in range(20):
        for msg in list(cluster.in_flight):  # nothing to or from 4
            index = cluster.in_flight.index(msg)
            if 4 in (msg.src, msg.dst):
                cluster.drop(index)
            else:
                cluster.deliver(index)
        if cluster.core(2).voters.ids == {1, 2, 3, 4}:
            break
        run_ticks(cluster, 100)
    assert cluster.core(2).voters.ids == {1, 2, 3, 4} and cluster.core(4).voters.ids == {1, 2, 3}
    cluster.crash(1)
    for msg in list(cluster.in_flight):
        if 4 in (msg.src, msg.dst):
            cluster.drop(cluster.in_flight.index(msg))
    cluster.start(3)
    for _ in range(40):
        run(cluster, 500, rounds=1)
        if cluster.core(2).is_leader:
            break
    assert cluster.core(2).is_leader
