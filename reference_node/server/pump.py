"""`Pump`: feeds the `RaftCore` its inputs and carries out its output, on the event loop.

Every input reaches the core through `step` on the event loop thread, with the host's clock
(`now_ms`). No clock ticks on a period: after each Ready the pump arms one timer for the core's
next deadline (`RaftCore.next_deadline_ms`), so an idle node sleeps and a timer fires when it is
due, not up to a tick late. The pump takes a `Ready`, calls `advance` at once (so no input is ever
stepped between `ready()` and `advance()`), then carries it out in the order `Ready` prescribes:
the quorum state is written and fsynced (awaited: nothing of this Ready is sent before it is
durable), then the disk jobs (the log's reset, truncation, appends and flush as one job, the
snapshot jobs, the deletion), the voters peers learn, the messages, the client replies and the
events, each handed to its part through `Outputs`; a Ready whose core halted (`fatal`) stops the
node through the supervisor. Readies are carried out one after the other, so
the messages of a later Ready never overtake the durable state of an earlier one.

The pump is a plain callback, not a task. A `step` schedules it for when the loop's current
callbacks have run, so that inputs stepped together (a read's worth of requests) make one Ready;
an input that comes alone on the commit path, a flush's end or the answer to our own request (a
follower's Fetch), is carried out at once (`step_now`), a loop iteration sooner. Only a Ready with
a quorum state waits, in a task, for its fsync, and the pump stands still meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from reference_node.raft import messages as m
from reference_node.raft.api import ClientReply, Input, Ready, Send, SnapshotWrite, Tick
from reference_node.raft.states import NEVER
from reference_node.raft.voters import VoterSet
from reference_node.server.storage_adapter import Disk
from reference_node.server.supervisor import FatalError, Supervisor

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore

log = logging.getLogger(__name__)


def now_ms() -> int:
    """The host's clock for the core: monotonic milliseconds."""
    return int(time.monotonic() * 1000)


@dataclass(frozen=True, slots=True)
class Outputs:
    """Where each part of a Ready goes, called in the order `Pump` carries a Ready out."""

    write_log: Callable[[Ready], None]
    """The Ready's log reset, truncation, appends and flush (one disk job)."""
    write_snapshot: Callable[[SnapshotWrite], None]
    keep_snapshot: Callable[[m.SnapshotId, bytes], None]
    delete_before: Callable[[m.SnapshotId], None]
    learn_voters: Callable[[VoterSet], None]
    send: Callable[[Send], None]
    answer: Callable[[ClientReply], None]
    event: Callable[[dict[str, Any]], None]


class Pump:
    _busy = False
    """A Ready waits for its quorum state to be durable: nothing after it is carried out yet
    (stop waits for it to finish)."""
    _due = False
    """A pass of the pump is scheduled on the loop."""
    _running = False
    """Between `start` and `halt`: steps are carried out."""
    _outputs: Outputs

    def __init__(self, core: RaftCore, disk: Disk, supervisor: Supervisor,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.core = core
        self._disk = disk
        self._supervisor = supervisor
        self._loop = loop
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = NEVER

    def connect(self, outputs: Outputs) -> None:
        """Where the Readies go (the parts that carry them out step inputs into this pump, so
        they are built after it)."""
        self._outputs = outputs

    def start(self) -> None:
        self._running = True
        self.kick()

    def cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def halt(self) -> None:
        """Carry out nothing more (the node stops)."""
        self._running = False

    def busy(self) -> bool:
        """A Ready is waiting for its fsync, a pass is due, or the core has output not taken."""
        return self._busy or self._due or self.core.has_ready()

    # --- inputs -------------------------------------------------------------------------------

    def step(self, inp: Input) -> None:
        # The core's clock moves with every input, not only with ticks: ticks come only when a
        # timer is due, and a deadline set from a stale clock would fire early.
        self.core.step(inp, now_ms())
        self.kick()

    def step_all(self, inputs: Iterable[Input]) -> None:
        """Inputs stepped together at one clock reading (a linger window's appends): one
        Ready, one write, one flush."""
        now = now_ms()
        for inp in inputs:
            self.core.step(inp, now)
        self.kick()

    def step_now(self, inp: Input) -> None:
        """Step and carry out the Ready at once, not on the next loop iteration: for an input
        that comes alone (a flush's end, the answer to our own request), with nothing to batch
        with, and on the path of a commit (a follower appends a Fetch's records, fetches again
        once they are flushed)."""
        self.core.step(inp, now_ms())
        self._pump()

    def kick(self) -> None:
        """Run the pump once the callbacks of this loop iteration have run, so that the inputs
        stepped together (a read's worth of requests) come out as one Ready."""
        if not self._due:
            self._due = True
            self._loop.call_soon(self._pump)

    def _arm_timer(self) -> None:
        """Tick when the core's next deadline is due (`RaftCore.next_deadline_ms`), not on a fixed
        period: an idle node sleeps. Called after every Ready, since any input may move it."""
        due = self.core.next_deadline_ms()
        if self._timer is not None:
            if self._timer_due <= due:
                return  # an earlier tick is armed; it re-arms for this one
            self._timer.cancel()
            self._timer = None
        if due >= NEVER:
            return
        self._timer_due = due
        delay = max(due - now_ms(), 0) / 1000.0
        self._timer = self._loop.call_later(delay, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        self.step(Tick(now_ms()))

    # --- the output ---------------------------------------------------------------------------

    def _pump(self) -> None:
        """Carry out every Ready, in order, on the loop: a plain callback, not a task, as no
        Ready waits for anything but one with a quorum state, whose fsync `_carry_out_durably`
        awaits while the pump stands still."""
        self._due = False
        if self._busy or not self._running:
            return
        try:
            while self.core.has_ready():
                ready = self.core.ready()
                self.core.advance(ready)
                if ready.quorum_state is not None:
                    self._busy = True
                    self._supervisor.spawn(self._carry_out_durably(ready))
                    return
                self._carry_out(ready)
                if not self._running:
                    return  # the core halted (Ready.fatal)
            self._arm_timer()
        except Exception as exc:  # the node cannot go on: nothing after this Ready goes out
            self._running = False
            log.error("carrying out the core's output failed: %r", exc, exc_info=exc)
            self._supervisor.die(exc)

    async def _carry_out_durably(self, ready: Ready) -> None:
        """A Ready with a quorum state: nothing of it happens before that state is durable. If
        the write fails the pump stays stopped (the task's failure stops the node): no later
        Ready may go out over a state that is not durable."""
        assert ready.quorum_state is not None
        await self._disk.write_quorum_state(ready.quorum_state, tuple(self.core.voters.sorted()))
        try:
            self._carry_out(ready)
        except Exception:
            self._running = False
            raise
        self._busy = False
        self._pump()

    def _carry_out(self, ready: Ready) -> None:
        out = self._outputs
        if ready.log_reset is not None or ready.truncate_to is not None or ready.entries or \
                ready.flush:
            out.write_log(ready)
        if ready.snapshot_write is not None:
            out.write_snapshot(ready.snapshot_write)
        if ready.snapshot_received is not None:
            out.keep_snapshot(*ready.snapshot_received)
        if ready.delete_before is not None:
            out.delete_before(ready.delete_before)
        if ready.voters is not None:
            out.learn_voters(ready.voters)
        for send in ready.messages:
            out.send(send)
        for reply in ready.replies:
            out.answer(reply)
        for event in ready.events:
            out.event(dict(event))
        if ready.fatal is not None:
            # The core cannot go on (it refused to truncate committed entries): nothing more is
            # carried out, and the node stops with the core's named error (process.serve).
            self._running = False
            log.error("the core halted: %s", ready.fatal)
            self._supervisor.die(FatalError(str(ready.fatal)))
