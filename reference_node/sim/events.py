"""The simulator's events, and the queue they wait in.

Theory of operation: an event is a small frozen value saying what happens (a message reaches a
node, a node's timer fires, a flush or a snapshot write completes, a client acts, the nemesis
acts); the queue says when. The queue is a heap of `(time, sequence number, event)`: the sequence
number, taken at push, orders events of the same millisecond first pushed, first run, and keeps the
heap from ever comparing two events. An event bound to a node carries the incarnation (`inc`) it
was meant for, so that once the node crashes or restarts the event finds a newer incarnation and
is stale.

Each event formats its own line of the trace, `<ms> <kind> <fields>`; a seed's trace is compared
byte for byte across runs and across refactors, so these formats are part of the contract.

The events are typed named tuples rather than frozen dataclasses: as immutable, and far cheaper to
build, which matters because one is built for nearly every event handled. Measured over whole runs,
frozen dataclasses (an `object.__setattr__` per field) cost about 7% more work than the plain tuples
the loop used before; named tuples about 3%. Events are never compared (the sequence number settles
every tie in the heap), so tuple equality does not matter.
"""

from __future__ import annotations

import enum
import heapq
from typing import NamedTuple

from reference_node.raft.api import AddVoter, ClientReply, RemoveVoter, VoterChangeReply
from reference_node.raft.image import Image
from reference_node.raft.messages import Message, SnapshotId
from reference_node.sim.faults import ActiveFault


class Deliver(NamedTuple):
    """Message `msg` from `src` reaches incarnation `inc` of `dst`; `rid` is its correlation id."""

    dst: int
    inc: int
    src: int
    msg: Message
    rid: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} deliver {self.src}->{self.dst} {self.msg!r}"


class TickDue(NamedTuple):
    """The core of `node` asked for a Tick now (stale if a newer deadline replaced this one)."""

    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} tick {self.node}"


class Flushed(NamedTuple):
    """The flush `node` started has reached the disk."""

    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} flushed {self.node} {self.inc}"


class SnapshotDurable(NamedTuple):
    """A snapshot `node` wrote (`data` None: its own `image`; the core hears `SnapshotWritten`)
    or downloaded and checked (`data`, the bytes received; the core hears `SnapshotLoaded`) has
    reached the disk."""

    node: int
    inc: int
    snapshot_id: SnapshotId
    image: Image
    data: bytes | None

    def trace_line(self, at_ms: int) -> str:
        sid = f"{self.snapshot_id.end_offset}-{self.snapshot_id.epoch}"
        if self.data is None:
            return f"{at_ms} snapshot-written {self.node} {self.inc} {sid}"
        return f"{at_ms} snapshot-loaded {self.node} {self.inc} {sid} {len(self.data)}"


class SnapshotRefusal(NamedTuple):
    """The snapshot `node` downloaded failed the host's checks: step `SnapshotRefused`."""

    node: int
    inc: int
    snapshot_id: SnapshotId
    reason: str

    def trace_line(self, at_ms: int) -> str:
        return (f"{at_ms} snapshot-refused {self.node} {self.inc} "
                f"{self.snapshot_id.end_offset}-{self.snapshot_id.epoch} {self.reason}")


class ClientNext(NamedTuple):
    """`client` invokes its next operation."""

    client: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} client-next {self.client}"


class ClientRequest(NamedTuple):
    """The current operation of `client` reaches `node`."""

    node: int
    inc: int
    client: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} client-request {self.node} {self.inc} {self.client}"


class ClientReplyDue(NamedTuple):
    """`node`'s reply reaches `client` (ignored unless it answers the client's current op)."""

    client: int
    reply: ClientReply
    node: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} client-reply {self.client} {self.reply} {self.node}"


class ClientTimeout(NamedTuple):
    """`client` gives up on operation `request_id` if it is still waiting for it."""

    client: int
    request_id: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} client-timeout {self.client} {self.request_id}"


class FaultStart(NamedTuple):
    """The nemesis starts its next fault (before the heal time only)."""

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis start"


class FaultStop(NamedTuple):
    """The nemesis stops `fault`, if it is still the active one."""

    fault: ActiveFault

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis stop {self.fault!r}"


class Heal(NamedTuple):
    """Every fault stops for good and every stopped node restarts: the liveness window opens."""

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis heal"


class Rejoin(NamedTuple):
    """Under lagging-follower or corrupt-snapshot, the cut-off `node` is let back in (if that
    fault is still the active one)."""

    node: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis rejoin {self.node}"


class VoteCrash(NamedTuple):
    """Under `fault` (crash-after-vote), `node` just granted a vote: it dies before anything else
    reaches it."""

    fault: ActiveFault
    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis vote-crash ({self.fault!r}, {self.node}, {self.inc})"


class VoterRestart(NamedTuple):
    """Under `fault` (crash-after-vote, crash-after-persist), the crashed `node` comes back."""

    fault: ActiveFault
    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis restart ({self.fault!r}, {self.node}, {self.inc})"


class PersistCrash(NamedTuple):
    """Under `fault` (crash-after-persist), incarnation `inc` of `node` just died between persisting
    a Ready and sending its messages (the host crashed it then): the nemesis notes it and queues
    its restart."""

    fault: ActiveFault
    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis persist-crash ({self.fault!r}, {self.node}, {self.inc})"


class Resume(NamedTuple):
    """Under `fault` (pause, leader-stall), incarnation `inc` of the paused `node` resumes: it
    handles what reached it meanwhile, with its clock jumped."""

    fault: ActiveFault
    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis resume ({self.fault!r}, {self.node}, {self.inc})"


class MembershipAct(NamedTuple):
    """The membership nemesis picks its next action (a voter change, a restart, a wipe)."""

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} membership act"


class AdminRequest(NamedTuple):
    """An AddRaftVoter or RemoveRaftVoter of the membership nemesis reaches incarnation `inc` of
    `node` (the leader, as the nemesis saw it)."""

    node: int
    inc: int
    request: AddVoter | RemoveVoter

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} membership request {self.node} {self.inc} {self.request!r}"


class AdminReply(NamedTuple):
    """`node`'s answer to a voter change reaches the membership nemesis."""

    node: int
    reply: VoterChangeReply

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} membership reply {self.node} {self.reply!r}"


class MembershipStop(NamedTuple):
    """The membership nemesis stops incarnation `inc` of `node`: `how` is crash or shutdown (it
    restarts later, with the same disk and directory id), or wipe (it restarts at once on a new
    disk with a new directory id: another replica)."""

    node: int
    inc: int
    how: str

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} membership {self.how} {self.node} {self.inc}"


class MembershipStart(NamedTuple):
    """The node the membership nemesis stopped starts again (as the log it holds says: an
    observer once its removal is in it)."""

    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} membership start {self.node} {self.inc}"


class BrokerRestart(NamedTuple):
    """Under `fault` (broker-stale-registration), the broker `node` killed by its start comes back
    (a new incarnation), if it is still down in incarnation `inc`."""

    fault: ActiveFault
    node: int
    inc: int

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis broker-restart ({self.fault!r}, {self.node}, {self.inc})"


class BrokerReplay(NamedTuple):
    """Under `fault` (broker-stale-registration), `request`, the registration an earlier
    incarnation of broker `node` sent, reaches the leader again: a late duplicate."""

    fault: ActiveFault
    node: int
    request: Message

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis broker-replay {self.node} {self.request!r}"


class ShapeStep(NamedTuple):
    """Under `fault` (a targeted shape: zombie-rejoin, diverge, observer-lag, chain), the nemesis
    takes the shape's next step `step` (or looks again whether the cluster reached the state the
    step waits for), if that fault is still the active one."""

    fault: ActiveFault
    step: str

    def trace_line(self, at_ms: int) -> str:
        return f"{at_ms} nemesis step {self.step} {self.fault!r}"


Event = (
    Deliver | TickDue | Flushed | SnapshotDurable | SnapshotRefusal | ClientNext | ClientRequest
    | ClientReplyDue | ClientTimeout | FaultStart | FaultStop | Heal | Rejoin | VoteCrash
    | VoterRestart | PersistCrash | Resume | MembershipAct | AdminRequest | AdminReply
    | MembershipStop | MembershipStart | BrokerRestart | BrokerReplay | ShapeStep
)


class EventQueue:
    """The pending events by (time, push order), and the simulated clock: `now` is the time of the
    event being handled."""

    __slots__ = ("front", "heap", "now", "seq")

    def __init__(self) -> None:
        self.heap: list[tuple[int, int, Event]] = []
        self.seq = 0
        self.now = 0
        self.front = 0
        """The lowest sequence number `push_first` gave (0 or negative)."""

    def push(self, at_ms: int, event: Event) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at_ms, self.seq, event))

    def push_first(self, at_ms: int, events: list[Event]) -> None:
        """Queue `events`, in this order, ahead of every event already queued for `at_ms`: a
        resumed process handles what waited for it before what arrives in the same millisecond.
        (Sequence numbers below every `push`'s; each batch below the previous one.)"""
        first = self.front - len(events)
        self.front = first
        for i, event in enumerate(events):
            heapq.heappush(self.heap, (at_ms, first + i, event))


class Dropped(enum.Enum):
    """What a handler returns for an event that no longer applies (a superseded tick, a message to
    a dead incarnation, across a cut link, or answering nothing): it leaves no trace line and
    counts as no event."""

    DROPPED = "dropped"


DROPPED = Dropped.DROPPED
