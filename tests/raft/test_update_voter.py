"""KIP-853's UpdateRaftVoter: a voter whose endpoints or supported kraft.version levels are not
what the voter set says announces itself to the leader (Kafka's pollFollowerAsVoter), and the
leader checks the request as Kafka's UpdateVoterHandler does, appends the updated set and answers
at once; a new leader writes its own entry anew at the start of its epoch."""

from __future__ import annotations

import dataclasses

from test_membership import answer, kraft1, run, voters_entries

from reference_node.raft.api import Ready, Receive, RemoveVoter
from reference_node.raft.messages import (
    ErrorCode,
    FetchRequest,
    UpdateVoterRequest,
    UpdateVoterResponse,
)
from reference_node.raft.states import Follower
from reference_node.raft.voters import Voter, VoterEndpoint
from testkit.raft_cluster import CLUSTER_ID, Cluster

MOVED = (VoterEndpoint("CONTROLLER", "moved.example", 19092),)


def update_of(voter: Voter, epoch: int, **changes: object) -> UpdateVoterRequest:
    """The UpdateRaftVoter `voter` would send, with `changes` to its fields."""
    request = UpdateVoterRequest(
        CLUSTER_ID, epoch, voter.id, voter.directory_id,
        tuple((e.name, e.host, e.port) for e in voter.endpoints), voter.kraft_versions)
    return dataclasses.replace(request, **changes)  # type: ignore[arg-type]


def ask(cluster: Cluster, node: int, src: int, request: UpdateVoterRequest) -> ErrorCode:
    """Hand `request` from `src` to `node`; the error of its answer."""
    before = len(cluster.in_flight)
    cluster.step(node, Receive(src, request))
    answers = [f.message for f in cluster.in_flight[before:]
               if isinstance(f.message, UpdateVoterResponse) and f.dst == src]
    assert len(answers) == 1, cluster.in_flight[before:]
    return answers[0].error


def restarted_elsewhere(cluster: Cluster, node: int, **moved: object) -> None:
    """`node` comes back with other endpoints or kraft.version levels (`moved`: Host fields)."""
    cluster.crash(node)
    for name, value in moved.items():
        setattr(cluster.hosts[node], name, value)
    cluster.start(node)


def test_a_voter_restarted_with_new_endpoints_updates_the_voter_set_itself() -> None:
    """Kafka's pollFollowerAsVoter: after 3 x the fetch timeout following the leader, voter 2
    sends UpdateRaftVoter instead of a Fetch; the leader appends the set with 2's new endpoints
    and answers at once; the record commits; 2 asks no more."""
    cluster = kraft1()
    sent: list[object] = []
    cluster.on_ready = lambda node, ready: sent.extend(
        s.message for s in ready.messages if node == 2 and isinstance(s.message, UpdateVoterRequest))
    restarted_elsewhere(cluster, 2, endpoints=MOVED)
    run(cluster, 1000)
    assert sent == [] and cluster.core(1).voters.get(2).endpoints != MOVED  # type: ignore[union-attr]
    run(cluster, 8000, rounds=40)
    assert len(sent) == 1
    for node in (1, 2, 3):
        voter = cluster.core(node).voters.get(2)
        assert voter is not None and voter.endpoints == MOVED
    assert cluster.core(1).high_watermark > voters_entries(cluster, 1)[-1]
    run(cluster, 8000, rounds=40)
    assert len(sent) == 1  # the set names it as it is now


def test_a_voter_whose_kraft_versions_changed_updates_them() -> None:
    """The VotersRecord keeps each voter's supported kraft.version range; a voter restarted with
    another one (an upgrade) announces it the same way."""
    cluster = kraft1()
    restarted_elsewhere(cluster, 3, kraft_versions=(0, 2))
    run(cluster, 8000, rounds=40)
    voter = cluster.core(1).voters.get(3)
    assert voter is not None and voter.kraft_versions == (0, 2)


def test_a_leader_restarted_with_new_endpoints_writes_them_at_the_start_of_its_epoch() -> None:
    """Kafka's appendStartOfEpochControlRecords: a new leader whose entry differs from what it
    is now appends the updated set after its LeaderChange (a lone voter never follows anyone to
    send UpdateRaftVoter to)."""
    cluster = Cluster((1,), kraft_version=1)
    cluster.tick(1, 2000)
    cluster.settle()
    assert cluster.core(1).is_leader
    restarted_elsewhere(cluster, 1, endpoints=MOVED)
    cluster.tick(1, 2000)
    cluster.settle()
    core = cluster.core(1)
    voter = core.voters.get(1)
    assert core.is_leader and voter is not None and voter.endpoints == MOVED
    assert core.high_watermark > voters_entries(cluster, 1)[-1]


def test_the_leader_answers_an_update_before_its_record_commits() -> None:
    """Kafka's UpdateVoterHandler replies NONE once the VotersRecord is appended; the record
    commits later (here once a voter is back), and then nothing holds another change off."""
    cluster = kraft1(observers=())
    cluster.crash(2)
    cluster.crash(3)
    epoch = cluster.core(1).epoch
    assert ask(cluster, 1, 2, update_of(cluster.voter(2), epoch, listeners=(
        ("CONTROLLER", "moved.example", 19092),))) == ErrorCode.none
    offset = voters_entries(cluster, 1)[-1]
    assert cluster.core(1).high_watermark <= offset  # not committed: {1} is no majority
    assert cluster.core(1).voters.get(2).endpoints == MOVED  # type: ignore[union-attr]
    cluster.start(2)
    run(cluster, 600)
    assert cluster.core(1).high_watermark > offset
    cluster.step(1, RemoveVoter(8, 3, cluster.hosts[3].directory_id))
    cluster.settle()
    run(cluster, 600)
    assert answer(cluster, 8).error == ErrorCode.none
    assert cluster.core(1).voters.ids == {1, 2}


def test_the_leader_refuses_an_update_as_kafka_does() -> None:
    """handleUpdateVoterRequest, then UpdateVoterHandler: an older epoch is fenced, a newer one
    unknown, a follower is no leader; a voter key without a directory, no endpoint or an
    impossible range is INVALID_REQUEST; a range without the finalized kraft.version too (the
    voter could not read the log); an observer is VOTER_NOT_FOUND. Nothing is appended."""
    cluster = kraft1()
    before = voters_entries(cluster, 1)
    epoch = cluster.core(1).epoch
    two = cluster.voter(2)
    cases = [
        (1, update_of(two, epoch - 1), ErrorCode.fenced_leader_epoch),
        (1, update_of(two, epoch + 1), ErrorCode.unknown_leader_epoch),
        (2, update_of(cluster.voter(3), epoch), ErrorCode.not_leader_or_follower),
        (1, update_of(two, epoch, voter_directory_id=None), ErrorCode.invalid_request),
        (1, update_of(two, epoch, listeners=()), ErrorCode.invalid_request),
        (1, update_of(two, epoch, kraft_versions=(1, 0)), ErrorCode.invalid_request),
        (1, update_of(two, epoch, kraft_versions=(2, 3)), ErrorCode.invalid_request),
        (1, update_of(cluster.voter(4), epoch), ErrorCode.voter_not_found),
    ]
    for node, request, error in cases:
        src = 3 if node == 2 else request.voter_id
        assert ask(cluster, node, src, request) == error, request
    assert voters_entries(cluster, 1) == before


def test_a_voter_sends_the_update_in_its_fetch_slot() -> None:
    """One request to the leader at a time (Kafka's RequestManager): the UpdateRaftVoter takes
    the place of a Fetch, and the next Fetch goes once it is answered."""
    cluster = kraft1()
    seen: list[tuple[list[str], bool]] = []

    def watch(node: int, ready: Ready) -> None:
        for send in ready.messages:
            if node == 2 and isinstance(send.message, UpdateVoterRequest):
                state = cluster.core(2).state
                seen.append(([type(s.message).__name__ for s in ready.messages],
                             isinstance(state, Follower) and state.fetch_in_flight is send.message))

    cluster.on_ready = watch
    restarted_elsewhere(cluster, 2, endpoints=MOVED)
    run(cluster, 8000, rounds=40)
    assert seen == [(["UpdateVoterRequest"], True)]
    state = cluster.core(2).state
    assert isinstance(state, Follower) and isinstance(state.fetch_in_flight, FetchRequest)
