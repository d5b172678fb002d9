"""What the active fault does to the hosts, beside the links (network.py): stalled disks, paused
processes, and the crashers that kill a node at one precise point of its work.

Under `fsync-stall` a node's disk completes nothing until the fault stops (the quorum-state file
excepted: holding it back would freeze the whole node); messages, reads and ticks go on. Under
`pause` and `leader-stall` a node's process is stopped as by SIGSTOP: what reaches it meanwhile
waits in arrival order (`SimNode.held`), and on resume its timer fires first. Under
`crash-after-persist` the victims crash between persisting a Ready and sending its messages
(`PersistCrasher`); under `crash-after-vote` the bridge node crashes right after each vote it
grants (`VoteCrasher`). Details: docs/internals/simulator.md#fault_state

The nemesis sets this state as faults start and stop; the host (host.py) asks it at each point a
fault can change what happens, and carries out the crash it calls for.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from reference_node.raft.api import Ready, Send
from reference_node.raft.messages import VoteResponse
from reference_node.sim.events import (
    Event,
    EventQueue,
    Flushed,
    SnapshotDurable,
    TickDue,
    VoteCrash,
)
from reference_node.sim.faults import ActiveFault
from reference_node.sim.node import SimNode


@dataclass(frozen=True, slots=True)
class VoteCrasher:
    """While `fault` (crash-after-vote) lasts, `node` crashes right after each vote it grants."""

    fault: ActiveFault
    node: int


@dataclass(frozen=True, slots=True)
class PersistCrasher:
    """While `fault` (crash-after-persist) lasts, each of `nodes` crashes between persisting a
    Ready and sending its messages: always after writing its quorum-state file, and with the
    chance `FLUSH_CRASH_P` (drawn from `rng`, the nemesis stream) after handling a completed flush,
    the commonest persist, so that a victim also lives to reach a vote."""

    fault: ActiveFault
    nodes: tuple[int, ...]
    rng: random.Random


FLUSH_CRASH_P = 0.3
"""crash-after-persist: the chance that a victim dies after a completed flush's step."""


class HostFaults:
    """The hosts' fault state: which disks stall, which processes are paused, who crashes when."""

    def __init__(self, queue: EventQueue, nodes: dict[int, SimNode],
                 disk_time: Callable[[SimNode], int]) -> None:
        """`disk_time`: when a write started now on a node's disk is durable (the host's)."""
        self.queue = queue
        self.nodes = nodes
        self.disk_time = disk_time
        self.vote_crasher: VoteCrasher | None = None
        self.persist_crasher: PersistCrasher | None = None
        self.flushed_now: SimNode | None = None
        """crash-after-persist: the node whose completed flush the step being carried out
        handled."""
        self.stalled: dict[int, list[Flushed | SnapshotDurable]] = {}
        """fsync-stall: node -> the completions its stalled disk holds back, in arrival order
        (empty when no disk stalls)."""

    # --- pause and leader-stall ---------------------------------------------------------------

    def pause(self, node: SimNode) -> None:
        """Stop `node`'s process as SIGSTOP does: from now on what reaches it waits (`held`)."""
        if node.core is not None and node.held is None:
            node.held = []

    def resume(self, node: SimNode) -> None:
        """The paused process runs again, its clock jumped to now: a timer that came due while it
        was stopped fires first, then what waited, in the order it arrived, all before anything
        else queued for this millisecond (what arrives now comes after its backlog)."""
        held, node.held = node.held, None
        if held is None or node.core is None:
            return
        now = self.queue.now
        backlog: list[Event] = []
        if node.tick_at <= now:
            node.tick_at = now
            backlog.append(TickDue(node.id, node.inc))
        backlog += held
        self.queue.push_first(now, backlog)

    def resume_all(self) -> None:
        """Every paused process runs again (its fault stopped, or the heal)."""
        for node in self.nodes.values():
            if node.held is not None:
                self.resume(node)

    # --- crash-after-persist and crash-after-vote -----------------------------------------------

    def crashes_after_persist(self, node: SimNode, ready: Ready) -> bool:
        """crash-after-persist (armed): does `node` die now, its Ready persisted and its messages
        not sent? Yes if it is a victim and this Ready persisted something before messages or
        replies. (The host crashes it.)"""
        crasher = self.persist_crasher
        assert crasher is not None
        flushed, self.flushed_now = self.flushed_now, None
        if node.id not in crasher.nodes or not (ready.messages or ready.replies):
            return False
        return ready.quorum_state is not None or (
            flushed is node and crasher.rng.random() < FLUSH_CRASH_P
        )

    def crash_if_voted(self, node: SimNode, sends: Sequence[Send]) -> None:
        """crash-after-vote (armed): if `node` is the bridge and just granted a vote, queue its
        crash. The grant is already on the wire; the crash is queued for this millisecond, so the
        next incarnation knows of the vote only from its quorum-state file."""
        crasher = self.vote_crasher
        assert crasher is not None
        if crasher.node == node.id and any(
            isinstance(m, VoteResponse) and m.vote_granted and not m.pre_vote
            for m in (send.message for send in sends)
        ):
            self.queue.push(self.queue.now, VoteCrash(crasher.fault, node.id, node.inc))

    # --- fsync-stall ----------------------------------------------------------------------------

    def stall_disks(self, node_ids: Sequence[int]) -> None:
        """From now on these nodes' disks complete nothing: a flush or snapshot write that comes
        due is held (not seen by the core, not durable) until `release_disks`."""
        self.stalled = {n: [] for n in node_ids}

    def release_disks(self) -> None:
        """The stall ends: each held completion of a still-running incarnation completes after
        the disk's normal latency from now (one a crash made stale is gone with its data)."""
        stalled, self.stalled = self.stalled, {}
        for n, held in stalled.items():
            node = self.nodes[n]
            for event in held:
                if node.core is not None and node.inc == event.inc:
                    self.queue.push(self.disk_time(node), event)

    def hold_completion(self, node: SimNode, event: Flushed | SnapshotDurable) -> bool:
        """Hold `event` back if `node`'s disk is stalled."""
        held = self.stalled.get(node.id)
        if held is None:
            return False
        held.append(event)
        return True
