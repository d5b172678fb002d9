"""What the leader records and reports: the LeaderChange record's voters, and DescribeQuorum's
progress rows as Kafka's LeaderState computes them (KIP-595 DescribeQuorum; Kafka's
`ReplicaState.updateFollowerState`, `clearInactiveObservers`)."""

from raft_helpers import CLUSTER, deliver, drain, elect, make, tick

from reference_node.raft.api import ClientAppend, LogFlushed, QuorumState, Tick
from reference_node.raft.messages import EntryKind, FetchRequest, LeaderChange
from reference_node.raft.states import OBSERVER_SESSION_TIMEOUT_MS


def fetch(core, rid: int, offset: int, now: int) -> None:  # type: ignore[no-untyped-def]
    last_epoch = core.log.epoch_at(offset - 1) if offset > 0 else 0
    core.step(Tick(now))
    deliver(core, rid, FetchRequest(CLUSTER, rid, core.epoch, offset, last_epoch, 0))


def leader(voters=(1, 2, 3)):  # type: ignore[no-untyped-def]
    core = make(voters=voters, qs=QuorumState(1, None, None))
    elect(core, now=5000)
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    return core


def test_leader_change_names_voters_and_granting_voters() -> None:
    core = leader()
    first = core.log.get(core.log.start_offset)
    assert first is not None and first.kind is EntryKind.LEADER_CHANGE
    change = LeaderChange.decode(first.payload)
    assert change.leader_id == 1
    assert change.voters == (1, 2, 3)
    assert change.granting_voters == (1, 2)  # itself and voter 2 (raft_helpers.elect)


def test_single_voter_leader_change_is_granted_by_itself() -> None:
    core = make(voters=(1,), qs=QuorumState(0, None, None))
    tick(core, 5000)
    tick(core, 5001)
    assert core.is_leader
    first = core.log.get(0)
    assert first is not None
    assert LeaderChange.decode(first.payload) == LeaderChange(1, (1,), (1,))


def test_leader_change_payload_round_trips_and_reads_the_old_form() -> None:
    change = LeaderChange(3, (1, 2, 3), (2, 3))
    assert LeaderChange.decode(change.encode()) == change
    assert LeaderChange.decode(b"7") == LeaderChange(7)


def test_caught_up_timestamp_uses_the_leader_end_at_the_previous_fetch() -> None:
    """Kafka: a fetch that reaches the leader's end offset *as of the previous fetch* proves the
    replica was caught up at the time of that previous fetch, even if the leader has moved on."""
    core = leader()
    end = core.log.end_offset
    fetch(core, 2, end, now=6000)                    # caught up now
    assert _row(core, 2).last_caught_up_timestamp == 6000
    core.step(ClientAppend(1, (b"a",)))
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    fetch(core, 2, end, now=7000)                    # behind: the leader has one more record
    assert _row(core, 2).last_caught_up_timestamp == 6000
    core.step(ClientAppend(2, (b"b",)))
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    fetch(core, 2, end + 1, now=8000)                # reached the end as of the 7000 fetch
    row = _row(core, 2)
    assert row.last_caught_up_timestamp == 7000 and row.last_fetch_timestamp == 8000


def test_leader_reports_its_flushed_end_offset() -> None:
    core = leader()
    flushed = core.log.end_offset
    core.step(ClientAppend(1, (b"a", b"b")))
    drain(core)
    assert core.log.end_offset == flushed + 2
    assert _row(core, 1).log_end_offset == flushed
    core.step(LogFlushed(core.log.end_offset))
    drain(core)
    assert _row(core, 1).log_end_offset == flushed + 2


def test_observers_expire_after_the_session_timeout() -> None:
    core = leader()
    fetch(core, 7, core.log.end_offset, now=6000)
    assert [r.replica_id for r in core.describe_quorum().observers] == [7]
    # Voters keep fetching; the observer stops.
    for now in range(7000, 6000 + OBSERVER_SESSION_TIMEOUT_MS, 1000):
        fetch(core, 2, core.log.end_offset, now=now)
    assert [r.replica_id for r in core.describe_quorum().observers] == [7]
    fetch(core, 2, core.log.end_offset, now=6000 + OBSERVER_SESSION_TIMEOUT_MS)
    tick(core, 6000 + OBSERVER_SESSION_TIMEOUT_MS)
    assert core.is_leader
    assert core.describe_quorum().observers == ()
    assert 7 not in core.state.progress  # type: ignore[union-attr]


def _row(core, rid: int):  # type: ignore[no-untyped-def]
    d = core.describe_quorum()
    return next(r for r in d.voters + d.observers if r.replica_id == rid)
