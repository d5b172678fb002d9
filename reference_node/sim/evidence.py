"""What the invariants read off the hosts once a Ready is carried out: the evidence of each step.

Theory of operation: after every step the host (host.py) hands the stepped node to `Evidence`,
which compares what the core now says with what its node last said (`SimNode.last_epoch`,
`last_hw`, `led`, `voters`) and reports the changes to the invariants (invariants.py) in a fixed
order: the epoch, the high watermark (and, when a leader moved it, whether a majority holds it on
disk), the broker's serving deadline (sim/brokers.py), KIP-853's voter sets, the snapshot the step
wrote. A disk is judged by what it holds (`SimNode.durable_entry`, or below its log start the
snapshot it starts at), a wiped replica's by what it held when it was wiped (`DepartedReplica`).

With KIP-853 on (the `membership` fault), the set that judges a high watermark is the leader's set
in effect when it moved (a voter's disk counts only if its directory id is the voter's), the
leader's log holds at most one uncommitted voter change and its committed and latest sets overlap,
and every replica's set is the one its log ends with; a changed set re-judges who is cut off (the
zombie watch, `on_voters_changed`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reference_node.raft.api import Ready
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import Entry, EntryKind
from reference_node.raft.voters import VoterSet
from reference_node.sim.brokers import BrokerWatch
from reference_node.sim.events import EventQueue
from reference_node.sim.invariants import Invariants
from reference_node.sim.node import SimNode


@dataclass(frozen=True, slots=True)
class DepartedReplica:
    """What a wiped replica's disk held when it was wiped: what it had acknowledged to a leader
    was durable then (a leader may count it toward a high watermark it sets later)."""

    log_start: int
    entries: list[Entry]

    def entry(self, offset: int) -> Entry | None:
        index = offset - self.log_start
        return self.entries[index] if 0 <= index < len(self.entries) else None


class Evidence:
    """The checks of each carried-out step, and what they need beyond the running nodes."""

    def __init__(self, inv: Invariants, nodes: dict[int, SimNode], queue: EventQueue,
                 static_voters: VoterSet, dynamic: bool, brokers: BrokerWatch | None) -> None:
        """`dynamic`: KIP-853's voters in the log; else `static_voters` judge every high
        watermark."""
        self.inv = inv
        self.nodes = nodes
        self.queue = queue
        self.static_voters = static_voters
        self.dynamic = dynamic
        self.brokers = brokers
        self.departed: dict[tuple[int, uuid.UUID | None], DepartedReplica] = {}
        """The wiped replicas' disks, by (node id, directory id)."""
        self.on_voters_changed: Callable[[int], None] | None = None
        """Called (with the time) when a core's voter set changed: the zombie watch's."""

    def wiped(self, node: SimNode) -> None:
        """`node`'s disk (it is down) is about to be wiped: keep what it held."""
        self.departed[(node.id, node.directory_id)] = DepartedReplica(node.log_start,
                                                                      node.saved_log)

    def after_ready(self, node: SimNode, core: RaftCore, ready: Ready) -> None:
        """The invariants the step carried out on `node` (its `ready`, maybe empty) may have
        broken: the epoch's, the high watermark's, the broker's, the voter sets', then the new
        snapshot's against the committed log."""
        inv = self.inv
        epoch = core.epoch
        if epoch != node.last_epoch:
            inv.epoch(node.id, node.last_epoch, epoch)
            node.last_epoch = epoch
        hw = core.high_watermark
        if hw != node.last_hw:
            inv.high_watermark(node.id, node.last_hw, hw, core.log_view.get,
                               core.log_view.start_offset, core.image)
            if hw > node.last_hw and (core.is_leader or node.led):
                # (`led`: a leader whose own removal just committed resigned in this very step.)
                self.check_majority(node, hw, self._set_at_hw(node, ready))
            node.last_hw = hw
        node.led = core.is_leader
        if node.is_broker and self.brokers is not None:
            self.brokers.stepped(node)
        if self.dynamic:
            self._check_voter_sets(node, ready)
        write = ready.snapshot_write
        if write is not None:
            # After the HW's check: the committed log now reaches what the snapshot claims.
            inv.snapshot_taken(node.id, write.snapshot_id, write.image,
                               min(write.high_watermark, hw))

    def check_majority(self, leader: SimNode, hw: int, voters: VoterSet) -> None:
        """MajorityReachedHighWatermark: a majority of `voters` (the set in effect at the leader
        when its HW moved) holds entry `hw - 1` on disk, in its log or in the snapshot its log
        starts at. A voter counts only as the replica the
        set names: a re-formatted disk (another directory id) does not, and neither does the
        leader's own log when the leader is not in the set. (A replica whose disk was wiped since
        counts with what its disk held then: it acknowledged that, and losing a disk is a voter
        lost for good, as a crash is one lost for a while.)"""
        core = leader.core
        assert core is not None
        offset = hw - 1
        mine = core.log_view.get(offset)
        holders = 0
        nodes = self.nodes
        for v in voters:
            node = nodes.get(v.id)
            if node is None:
                continue
            if node.counts_as(v):
                entry = node.durable_entry(offset)
                if entry is None and offset < node.log_start:
                    entry = self._in_snapshot(offset)
            else:
                gone = self.departed.get((v.id, v.directory_id))
                entry = None
                if gone is not None:
                    entry = gone.entry(offset)
                    if entry is None and offset < gone.log_start:
                        entry = self._in_snapshot(offset)
            if entry is not None and mine is not None and (
                entry is mine or (entry.epoch == mine.epoch and entry.payload == mine.payload)
            ):
                holders += 1
        self.inv.majority_flushed(leader.id, hw, holders, voters.ids, self.dynamic)

    def _in_snapshot(self, offset: int) -> Entry | None:
        """The entry at `offset` as a disk whose log starts past it holds it: in the durable
        snapshot its log starts at, an image of the committed log (SnapshotMatchesLog), so the
        committed entry there; None while nothing is committed there yet. (Seed 93 of issue 41:
        two voters that had fetched entry 120 from a stalled leader snapshotted past it under the
        next leader before the stalled one, resumed, counted their fetches.)"""
        committed = self.inv.committed
        return committed[offset] if offset < len(committed) else None

    # --- KIP-853's checks -----------------------------------------------------------------------

    def _set_at_hw(self, node: SimNode, ready: Ready) -> VoterSet:
        """The voter set in effect when the leader's high watermark last moved in this step: the
        set it had before the step, or the one a `voters` event of the step announced before the
        last `high-watermark` event."""
        if not self.dynamic:
            return self.static_voters
        core = node.core
        assert core is not None
        current = node.voters if node.voters is not None else core.voters
        at_hw = current
        for ev in ready.events:
            kind = ev["type"]
            if kind == "voters":
                current = _announced(core, ev)
            elif kind == "high-watermark":
                at_hw = current
        return at_hw

    def _check_voter_sets(self, node: SimNode, ready: Ready) -> None:
        """KIP-853's invariants for what this step did: a leader elected or appending a voter
        change (SingleVoterChange, VoterSetsOverlap); a log whose voter entries changed
        (VoterSetAtLogEnd); a changed set re-judges who is cut off (the zombie watch)."""
        core = node.core
        assert core is not None
        inv = self.inv
        for ev in ready.events:
            kind = ev["type"]
            if kind == "voter-change" or (kind == "state" and ev["state"] == "leader"):
                if core.is_leader:
                    floor = min(max(core.high_watermark, len(inv.committed)),
                                core.log_view.end_offset)
                    history = core.voter_history
                    inv.single_voter_change(node.id, core.epoch, history.uncommitted(floor),
                                            floor)
                    inv.voter_sets_overlap(node.id, core.epoch, history.at(floor), core.voters)
                break
        if (ready.voters is not None or ready.truncate_to is not None
                or ready.log_reset is not None
                or any(e.kind is EntryKind.VOTERS for e in ready.entries)):
            inv.voters_at_log_end(node.id, core.voters, _voters_at_log_end(core))
        if ready.voters is not None and self.on_voters_changed is not None:
            self.on_voters_changed(self.queue.now)
        node.voters = core.voters


def _announced(core: RaftCore, event: dict[str, Any]) -> VoterSet:
    """The set a `voters` event announced: the VotersRecord at its offset, or the base set."""
    offset = event["offset"]
    if offset is None:
        return core.voter_history.base
    entry = core.log_view.get(offset)
    if entry is None or entry.kind is not EntryKind.VOTERS:
        return core.voters
    return VoterSet.decode(entry.payload)


def _voters_at_log_end(core: RaftCore) -> VoterSet:
    """The voter set `core`'s log ends with, read from the log itself: its last VotersRecord,
    else the one of the image it holds (a snapshot's, or the bootstrap checkpoint's), else none
    (a disk formatted without the checkpoint that has not learnt the voters yet)."""
    log = core.log_view
    for offset in range(log.end_offset - 1, log.start_offset - 1, -1):
        entry = log.get(offset)
        if entry is not None and entry.kind is EntryKind.VOTERS:
            return VoterSet.decode(entry.payload)
    return core.image.voters if core.image.voters is not None else VoterSet()
