"""One simulated node as its host sees it (`SimNode`): the running core, if any, and what its disk
holds, the fields a crash, a restart, a pause or a wipe change, and the replica's identity
(KIP-853's directory id, its CONTROLLER endpoint).

The host (host.py) carries out the core's Readys on it; the fault state (fault_state.py), the
invariants' evidence (evidence.py), the clients, the nemeses and the watches read it. It sits
below all of them, so that each imports it without importing the host.
"""

from __future__ import annotations

import random
import uuid

from reference_node.raft.api import QuorumState
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import Entry, SnapshotId
from reference_node.raft.states import NEVER
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.sim.disk import SnapshotDir
from reference_node.sim.events import Event
from reference_node.sim.rpc import Rpc


def new_directory_id(rng: random.Random) -> uuid.UUID:
    """A directory id (`directory.id` of meta.properties) drawn from the seed's membership
    stream."""
    return uuid.UUID(int=rng.getrandbits(128), version=4)


LISTENER = "CONTROLLER"
"""The controller listener every simulated node has (`RaftConfig.controller_listener`)."""


def endpoint(node: int) -> VoterEndpoint:
    """A voter's CONTROLLER listener: never dialled (the simulated network routes by node id)."""
    return VoterEndpoint(LISTENER, f"node{node}", 9093)


class SimNode:
    """One node as its host sees it: the running core, if any, and what its disk holds."""

    __slots__ = ("alive", "core", "directory_id", "durable", "flush_again", "flush_target",
                 "flushing", "held", "id", "inc", "incarnation", "is_broker", "is_voter",
                 "last_epoch", "last_hw", "led", "log_start", "pending", "qs", "rpc", "saved_log",
                 "snapshots", "stop_by", "tick_at", "voters")

    def __init__(self, node_id: int, is_voter: bool, rpc: Rpc, snapshots: SnapshotDir,
                 is_broker: bool = False) -> None:
        self.id = node_id
        self.is_voter = is_voter
        self.is_broker = is_broker
        """A broker: an observer that registers and heartbeats (`--brokers`)."""
        self.incarnation: uuid.UUID | None = None
        """A broker's incarnation: new at every start of its process."""
        self.alive = False
        """Serving: started and not stopping (a stopping node still runs its core)."""
        self.inc = 0
        """The incarnation: one more at every start and every stop."""
        self.stop_by = NEVER
        """While a graceful shutdown is under way: when it ends even if the core is not done."""
        self.core: RaftCore | None = None
        self.qs: QuorumState | None = None
        """The quorum-state file."""
        self.log_start = 0
        """The log start offset on disk: 0, or the end offset of a durable snapshot."""
        self.saved_log: list[Entry] = []
        """The log on disk (from `log_start`) while the node is down (the core holds it while it
        runs)."""
        self.snapshots = snapshots
        """The durable snapshot files: they outlive every incarnation."""
        self.durable = 0
        """The log is flushed below this offset: what a crash keeps."""
        self.flushing = False
        self.flush_again = False
        """The log grew during the flush in progress: flush again when it completes."""
        self.flush_target = 0
        self.tick_at = NEVER
        """When the queued tick fires (one at a time: an earlier deadline supersedes it)."""
        self.last_hw = 0
        self.last_epoch = 0
        self.pending: dict[int, int] = {}
        """Client request id -> client, for the requests this incarnation has not answered."""
        self.rpc = rpc
        self.directory_id: uuid.UUID | None = None
        """The replica's directory id (KIP-853; None with static voters): a wipe changes it."""
        self.led = False
        """The core was leader when its last Ready was carried out."""
        self.voters: VoterSet | None = None
        """KIP-853: the core's voter set when its last Ready was carried out."""
        self.held: list[Event] | None = None
        """While the process is paused (pause, leader-stall): the events that reached it, in
        arrival order, handled once it resumes; None while it runs."""

    def hold(self, event: Event) -> bool:
        """Keep `event` for later if the process is paused (True), else let it be handled."""
        held = self.held
        if held is None:
            return False
        held.append(event)
        return True

    def voter(self) -> Voter:
        """This replica as a VotersRecord (and an AddRaftVoter) names it."""
        return Voter(self.id, self.directory_id, (endpoint(self.id),))

    def counts_as(self, voter: Voter) -> bool:
        """Is this node's disk the replica `voter` names (its directory, when one is named)?"""
        return voter.directory_id is None or voter.directory_id == self.directory_id

    def boot(self, core: RaftCore, rpc: Rpc, log_start: int, log_end: int) -> None:
        """`core` starts from the disk, whose log now spans [log_start, log_end); the in-memory
        host state starts afresh."""
        self.core = core
        self.alive = True
        self.log_start = log_start
        self.durable = log_end
        self.saved_log = []
        self.flushing = self.flush_again = False
        self.flush_target = self.durable
        self.last_hw = core.high_watermark
        self.tick_at = NEVER
        self.stop_by = NEVER
        self.pending = {}
        self.rpc = rpc
        self.led = False
        self.voters = core.voters
        self.held = None

    def halt(self, saved_log: list[Entry]) -> None:
        """The process is gone; `saved_log` (from `log_start`) is what its disk holds."""
        self.saved_log = saved_log
        self.alive = False
        self.inc += 1
        self.core = None
        self.pending = {}
        self.held = None  # a paused process killed: what waited for it is gone with it

    def durable_entry(self, offset: int) -> Entry | None:
        """The entry at `offset` as the disk holds it (flushed), or None."""
        if offset >= self.durable or offset < self.log_start:
            return None
        if self.core is not None:
            return self.core.log_view.get(offset)
        index = offset - self.log_start
        return self.saved_log[index] if index < len(self.saved_log) else None

    def wipe(self, snapshots: SnapshotDir, directory_id: uuid.UUID) -> None:
        """A new, empty disk (the node is down): another replica from now on. Its epoch starts
        over, as a new replica's does."""
        self.qs = None
        self.log_start = 0
        self.saved_log = []
        self.durable = 0
        self.snapshots = snapshots
        self.directory_id = directory_id
        self.last_epoch = 0

    def delete_snapshots_before(self, snapshot_id: SnapshotId) -> None:
        """Delete every durable snapshot older than `snapshot_id` (Kafka's
        `deleteBeforeSnapshot`: the log no longer reaches below it)."""
        for sid in [s for s in self.snapshots if s.end_offset < snapshot_id.end_offset]:
            del self.snapshots[sid]
