"""The process faults of the simulator: pause, leader-stall, crash-after-persist, vote-delay.

Each test runs the fault alone and watches, from the handlers the simulation dispatches to, that the
fault reaches the state it is for: a paused node handles nothing until it resumes and then what
waited, in order; a stalled leader resumes in an older epoch and steps down; a crash between
persisting and sending loses the sends of a persisted Ready; a vote answer reaches its candidate
after that candidate moved on, and does not count there."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from reference_node.raft.api import QuorumState, Ready, Receive, Tick
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    VoteRequest,
    VoteResponse,
)
from reference_node.sim.events import (
    DROPPED,
    Deliver,
    Event,
    PersistCrash,
    Resume,
    TickDue,
)
from reference_node.sim.faults import FAULTS, parse_faults
from reference_node.sim.nemesis import FAULT_STARTS
from reference_node.sim.node import SimNode
from reference_node.sim.simulation import SimConfig, Simulation, run_seed

PROCESS_FAULTS = ("pause", "leader-stall", "crash-after-persist", "vote-delay")


def config(fault: str, **kwargs: Any) -> SimConfig:
    return SimConfig(faults=(fault,), time_ms=15_000, **kwargs)


def test_the_process_faults_are_faults_of_all() -> None:
    for name in PROCESS_FAULTS:
        assert name in FAULTS and name in FAULT_STARTS and name in parse_faults("all")


def test_each_process_fault_keeps_every_invariant_and_replays() -> None:
    for name in PROCESS_FAULTS:
        for seed in range(2):
            first = run_seed(seed, SimConfig(faults=(name,), time_ms=15_000, trace=True))
            assert first.ok, (name, seed, first.violation)
            again = run_seed(seed, SimConfig(faults=(name,), time_ms=15_000, trace=True))
            assert again.trace == first.trace, (name, seed)


# --- pause ----------------------------------------------------------------------------------------


@dataclass
class Pause:
    node: int
    start: int
    held: list[Event] = field(default_factory=list)
    """What reached the node while paused, in arrival order (the host's `held`)."""
    resumed: int | None = None
    handled_after: list[tuple[int, Event]] = field(default_factory=list)
    """Events handled for the node from the resume on (time, event), until the next pause."""


def watch_pauses(sim: Simulation) -> tuple[list[Pause], list[tuple[int, int, type]]]:
    """Record every pause, and every event that stepped a paused node's core (none should)."""
    cluster = sim.cluster
    pauses: list[Pause] = []
    current: dict[int, Pause] = {}
    stepped_while_paused: list[tuple[int, int, type]] = []
    original_pause, original_resume = cluster.faults.pause, cluster.faults.resume

    def pause(node: SimNode) -> None:
        original_pause(node)
        if node.held is not None:
            current[node.id] = Pause(node.id, sim.queue.now)
            pauses.append(current[node.id])

    def resume(node: SimNode) -> None:
        record = current.pop(node.id, None)
        if record is not None and node.held is not None:
            record.held = list(node.held)
            record.resumed = sim.queue.now
        original_resume(node)

    cluster.faults.pause = pause  # type: ignore[method-assign]
    cluster.faults.resume = resume  # type: ignore[method-assign]

    def watching(kind: type, handler: Any) -> Any:
        def handle(event: Any) -> Any:
            result = handler(event)
            if isinstance(result, SimNode):
                if result.held is not None:
                    stepped_while_paused.append((sim.queue.now, result.id, kind))
                for record in pauses:
                    if record.node == result.id and record.resumed is not None and \
                            record.resumed <= sim.queue.now < record.resumed + 1:
                        record.handled_after.append((sim.queue.now, event))
            return result
        return handle

    for kind in list(sim.handlers):
        sim.handlers[kind] = watching(kind, sim.handlers[kind])
    return pauses, stepped_while_paused


def test_a_paused_node_handles_nothing_then_what_waited_in_order_with_its_clock_jumped() -> None:
    """A paused node's core is stepped by nothing while the pause lasts (1-2 s): its messages,
    timers and client requests wait. At the resume its timer fires first, then every message that
    waited, in arrival order, all in the resume's millisecond; its clock is the resume's."""
    pauses: list[Pause] = []
    for seed in range(3):
        sim = Simulation(seed, config("pause"))
        seen, stepped = watch_pauses(sim)
        result = sim.run()
        assert result.ok, (seed, result.violation)
        assert not stepped, stepped
        pauses += seen
    resumed = [p for p in pauses if p.resumed is not None and p.held]
    assert len(resumed) >= 5
    lengths = [p.resumed - p.start for p in resumed if p.resumed is not None]
    assert all(0 < ms <= 2000 for ms in lengths) and max(lengths) >= 1000, lengths
    for p in resumed:
        waited = [e for e in p.held if type(e) is Deliver]
        handled = [e for _, e in p.handled_after if type(e) is Deliver]
        assert handled[:len(waited)] == waited  # all of them, in order, before any newcomer
        kinds = [type(e) for _, e in p.handled_after]
        if TickDue in kinds:
            assert kinds[0] is TickDue  # the timer that came due fires first
    # Fetches, votes, client requests waited: the node was really stopped.
    assert sum(len(p.held) for p in resumed) >= 20


def test_a_paused_nodes_core_sees_the_jumped_clock() -> None:
    """The first step after a resume runs at the resume's time: the core's clock jumped by the
    pause (a leader's check-quorum and a follower's fetch timeout judge from it)."""
    sim = Simulation(0, config("pause"))
    cluster = sim.cluster
    clocks: list[tuple[int, int, int]] = []
    original_resume = cluster.faults.resume

    def resume(node: SimNode) -> None:
        before = node.core.now if node.core is not None else None
        original_resume(node)
        if before is not None:
            clocks.append((node.id, before, sim.queue.now))

    cluster.faults.resume = resume  # type: ignore[method-assign]
    result = sim.run()
    assert result.ok, result.violation
    assert clocks and all(now - before >= 1000 for _, before, now in clocks), clocks


# --- leader-stall ---------------------------------------------------------------------------------


def test_a_stalled_leader_resumes_in_an_older_epoch_and_steps_down() -> None:
    """leader-stall pauses the leader past the fetch timeout: the voters elect a leader of a
    newer epoch meanwhile, and the old one resumes still leading its own, with the new epoch's
    requests and its followers' old fetches waiting for it; handling them, it steps down."""
    zombies = 0
    for seed in range(3):
        sim = Simulation(seed, config("leader-stall"))
        cluster = sim.cluster
        resume = sim.handlers[Resume]
        stale: list[tuple[int, int]] = []

        def on_resume(event: Resume, resume: Any = resume, cluster: Any = cluster,
                      stale: list[tuple[int, int]] = stale, sim: Simulation = sim) -> Any:
            node = cluster.nodes[event.node]
            core = node.core
            if core is not None and core.is_leader and node.held:
                newest = max(n.core.epoch for n in cluster.nodes.values() if n.core is not None)
                held = [e.msg for e in node.held if type(e) is Deliver]
                if newest > core.epoch and any(type(m) is FetchRequest for m in held):
                    stale.append((event.node, core.epoch))
            return resume(event)

        sim.handlers[Resume] = on_resume
        deliver = sim.handlers[Deliver]
        stepped_down: set[tuple[int, int]] = set()

        def on_deliver(event: Deliver, deliver: Any = deliver, cluster: Any = cluster,
                       stale: list[tuple[int, int]] = stale,
                       stepped_down: set[tuple[int, int]] = stepped_down) -> Any:
            result = deliver(event)
            node = cluster.nodes[event.dst]
            for who, epoch in stale:
                if who == event.dst and node.core is not None and not node.core.is_leader:
                    stepped_down.add((who, epoch))
            return result

        sim.handlers[Deliver] = on_deliver
        result = sim.run()
        assert result.ok, (seed, result.violation)
        assert set(stale) <= stepped_down, (seed, stale, stepped_down)
        zombies += len(stale)
    assert zombies >= 3


# --- crash-after-persist --------------------------------------------------------------------------


@dataclass
class LostReady:
    node: int
    ready: Ready
    qs_after: QuorumState | None


def test_a_crash_after_persist_keeps_the_persisted_state_and_loses_the_sends() -> None:
    """Each victim dies with its Ready's quorum state on disk (or a completed flush behind it) and
    none of its messages or replies sent: among them granted votes and follower fetches; it
    comes back within 1 s."""
    lost: list[LostReady] = []
    restarts: list[int] = []
    for seed in range(3):
        sim = Simulation(seed, config("crash-after-persist"))
        cluster = sim.cluster
        original = cluster.faults.crashes_after_persist

        def crashes(node: SimNode, ready: Ready, original: Any = original) -> bool:
            if not original(node, ready):
                return False
            lost.append(LostReady(node.id, ready, node.qs))
            return True

        cluster.faults.crashes_after_persist = crashes  # type: ignore[method-assign]
        on_crash = sim.handlers[PersistCrash]
        crashed_at: dict[int, int] = {}

        def on_persist_crash(event: PersistCrash, on_crash: Any = on_crash,
                             crashed_at: dict[int, int] = crashed_at,
                             sim: Simulation = sim) -> Any:
            crashed_at[event.node] = sim.queue.now
            return on_crash(event)

        def on_start(node: SimNode, start: Any = cluster.start, crashed_at: dict[int, int] =
                     crashed_at, sim: Simulation = sim) -> None:
            if node.id in crashed_at:
                restarts.append(sim.queue.now - crashed_at.pop(node.id))
            start(node)

        sim.handlers[PersistCrash] = on_persist_crash
        cluster.start = on_start  # type: ignore[method-assign]
        result = sim.run()
        assert result.ok, (seed, result.violation)
        in_flight = {id(event.msg) for _, _, event in sim.queue.heap if type(event) is Deliver}
        for record in lost:
            assert not any(id(send.message) in in_flight for send in record.ready.messages)
    assert len(lost) >= 10
    for record in lost:
        assert record.ready.messages or record.ready.replies
        if record.ready.quorum_state is not None:
            assert record.qs_after == record.ready.quorum_state  # persisted before the crash
    messages = [send.message for record in lost for send in record.ready.messages]
    assert any(type(m) is VoteResponse and m.vote_granted and not m.pre_vote for m in messages)
    assert any(type(m) is FetchRequest for m in messages)
    assert restarts and all(2 <= ms < 1000 for ms in restarts), restarts


# --- vote-delay -----------------------------------------------------------------------------------


def test_vote_delay_delivers_grants_after_their_candidate_moved_on() -> None:
    """Under vote-delay, Vote and pre-vote answers take 1-3.5 s: some reach their candidate after
    its round ended (its next election began, or it was elected, or it follows another), and the
    other messages keep their usual 1-3 ms."""
    late: list[tuple[str, bool]] = []
    answered_in_ms: list[int] = []
    for seed in range(3):
        sim = Simulation(seed, config("vote-delay"))
        cluster = sim.cluster
        deliver = sim.handlers[Deliver]
        sent_at: dict[int, int] = {}

        def on_deliver(event: Deliver, deliver: Any = deliver, cluster: Any = cluster,
                       sent_at: dict[int, int] = sent_at, sim: Simulation = sim) -> Any:
            node = cluster.nodes[event.dst]
            message = event.msg
            if type(message) is VoteRequest and cluster.net.vote_delay is not None:
                sent_at.setdefault(event.rid, sim.queue.now)  # answered now, delayed
            if type(message) is VoteResponse and node.core is not None:
                request = node.rpc.request_of(event.rid)
                if isinstance(request, VoteRequest) and event.rid in sent_at:
                    answered_in_ms.append(sim.queue.now - sent_at[event.rid])
                core = node.core
                if message.vote_granted and isinstance(request, VoteRequest):
                    asked = core.epoch + 1 if core.state_name == "prospective" else core.epoch
                    running = core.state_name in ("prospective", "candidate") and \
                        (core.state_name == "prospective") == request.pre_vote
                    if not running or request.candidate_epoch != asked:
                        late.append((core.state_name, request.pre_vote))
            return deliver(event)

        sim.handlers[Deliver] = on_deliver
        result = sim.run()
        assert result.ok, (seed, result.violation)
    assert len(late) >= 5, late
    assert {pre for _, pre in late} == {True, False}  # late pre-vote grants and late vote grants
    assert any(state in ("prospective", "candidate") for state, _ in late)  # in a newer round
    assert min(answered_in_ms) >= 1000 and max(answered_in_ms) >= 2000


def test_only_vote_answers_are_delayed() -> None:
    sim = Simulation(1, config("vote-delay"))
    net = sim.cluster.net
    net.vote_delay = (1000, 3500)
    assert all(min(net.vote_delayed([5, 7])) >= 1005 for _ in range(50))
    assert all(t <= 4 for t in net.delivery_times(0, 1, 2))  # the rest: 1-3 ms as always


# --- the core: a late grant counts only in its own round ------------------------------------------


def _core(node_id: int = 1) -> RaftCore:
    core = RaftCore(node_id, [1, 2, 3, 4, 5], "c", RaftConfig(), random.Random(0), 0, None, [])
    core.advance(core.ready())
    return core


def _step(core: RaftCore, src: int, message: Any, in_reply_to: Any = None) -> Ready:
    core.step(Receive(src, message, in_reply_to), now_ms=core.now)
    ready = core.ready()
    core.advance(ready)
    return ready


def _pre_vote_requests(ready: Ready) -> dict[int, VoteRequest]:
    return {s.dst: s.message for s in ready.messages
            if isinstance(s.message, VoteRequest) and s.message.pre_vote}


def test_a_late_pre_vote_grant_of_an_older_epoch_does_not_count() -> None:
    """A prospective of epoch 1 gets node 2's grant, in epoch 1, of the pre-vote it asked in
    epoch 0 (node 2 had moved on when it answered): that grant judged another round; counted,
    with one grant of the current round it would make a majority of 5 and start a candidacy
    nobody granted."""
    core = _core()
    core.step(Tick(3000))
    ready = core.ready()
    core.advance(ready)
    old = _pre_vote_requests(ready)
    assert core.state_name == "prospective" and old[2].candidate_epoch == 0
    _step(core, 3, BeginQuorumEpochRequest("c", 3, 1, 1))
    assert (core.state_name, core.epoch) == ("follower", 1)
    core.step(Tick(6000))
    ready = core.ready()
    core.advance(ready)
    new = _pre_vote_requests(ready)
    assert core.state_name == "prospective" and new[4].candidate_epoch == 1
    _step(core, 2, VoteResponse(ErrorCode.none, -1, 1, True, True), in_reply_to=old[2])
    _step(core, 4, VoteResponse(ErrorCode.none, -1, 1, True, True), in_reply_to=new[4])
    assert core.state_name == "prospective" and core.epoch == 1
    _step(core, 5, VoteResponse(ErrorCode.none, -1, 1, True, True), in_reply_to=new[5])
    assert core.state_name == "candidate" and core.epoch == 2  # the current round's grants win


def test_the_held_events_are_dropped_events() -> None:
    """What a paused node holds leaves no trace line until it is handled (DROPPED at arrival)."""
    sim = Simulation(0, config("pause"))
    cluster = sim.cluster
    node = cluster.nodes[1]
    sim.cluster.start(node)
    cluster.faults.pause(node)
    assert node.core is not None
    event = Deliver(1, node.inc, 2, FetchRequest("c", 2, 0, 0, 0, 0), 99)
    assert cluster.on_deliver(event) is DROPPED and node.held == [event]
    cluster.faults.resume(node)
    assert node.held is None and any(e is event for _, _, e in sim.queue.heap)
