"""KIP-853's UpdateRaftVoter: a voter's endpoints and supported versions change in the log."""

from __future__ import annotations

import dataclasses

from test_membership import answer, kraft1, run, voters_entries

from reference_node.raft.api import RemoveVoter, UpdateVoter
from reference_node.raft.messages import ErrorCode
from reference_node.raft.voters import VoterEndpoint

MOVED = (VoterEndpoint("CONTROLLER", "moved.example", 19092),)


def test_a_voter_announcing_new_endpoints_gets_them_committed() -> None:
    cluster = kraft1()
    before = voters_entries(cluster, 1)
    cluster.step(1, UpdateVoter(7, dataclasses.replace(cluster.voter(2), endpoints=MOVED)))
    run(cluster, 100)
    assert answer(cluster, 7).error == ErrorCode.none
    assert len(voters_entries(cluster, 1)) == len(before) + 1
    voter_2 = cluster.core(1).voters.get(2)
    assert voter_2 is not None and voter_2.endpoints == MOVED


def test_an_update_for_a_replica_that_is_not_a_voter_is_voter_not_found() -> None:
    """An observer (or a voter's id with another directory) cannot rewrite the voter set's
    endpoints: nothing is appended."""
    cluster = kraft1()
    before = voters_entries(cluster, 1)
    cluster.step(1, UpdateVoter(8, dataclasses.replace(cluster.voter(4), endpoints=MOVED)))
    assert answer(cluster, 8).error == ErrorCode.voter_not_found
    assert voters_entries(cluster, 1) == before


def test_an_update_sent_to_a_follower_is_refused_under_its_own_request_id() -> None:
    cluster = kraft1()
    cluster.step(2, UpdateVoter(9, dataclasses.replace(cluster.voter(2), endpoints=MOVED)))
    reply = answer(cluster, 9)
    assert reply.error == ErrorCode.not_leader_or_follower and reply.leader_id == 1


def test_an_update_is_answered_before_its_record_commits() -> None:
    """Kafka's UpdateVoterHandler replies NONE once the VotersRecord is appended; the record
    commits later (here once a voter is back), and then nothing holds another change off."""
    cluster = kraft1(observers=())
    cluster.crash(2)
    cluster.crash(3)
    cluster.step(1, UpdateVoter(7, dataclasses.replace(cluster.voter(2), endpoints=MOVED)))
    offset = voters_entries(cluster, 1)[-1]
    assert answer(cluster, 7).error == ErrorCode.none
    assert cluster.core(1).high_watermark <= offset  # not committed: {1} is no majority
    cluster.start(2)
    run(cluster, 600)
    assert cluster.core(1).high_watermark > offset
    cluster.step(1, RemoveVoter(8, 3, cluster.hosts[3].directory_id))
    cluster.settle()
    run(cluster, 600)
    assert answer(cluster, 8).error == ErrorCode.none
    assert cluster.core(1).voters.ids == {1, 2}
    assert answer(cluster, 7).error == ErrorCode.none  # answered once, not again on commit
