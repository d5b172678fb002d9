"""The fault schedule: every interval, one fault kind takes its next step; all in the history.

As in Jepsen's combined nemesis, each kind alternates start and stop on its own, and the kinds are
interleaved, so faults of different kinds overlap (a node is killed while another is cut off) as
they do in real outages. The kind that steps is drawn in a seeded, shuffled round robin, so that
every kind gets its turns in a short run. A fault with a `hold` (seconds: `lagging-follower`'s
duration) is not stopped before it has been in effect that long: its turns pass to the next kind
that may step, so the others go on meanwhile. An `instant` fault (`membership`: a change that
is not undone) is stopped in the turn it starts, so that each of its turns makes a change. The schedule runs in a thread of its own until `stop()`,
which stops every active fault (recorded like any other stop); `heal_all` afterwards undoes every
kind unconditionally, so that the final reads see a whole cluster even if a step failed half-way.
A step that fails is recorded (`info`, `fault-failed`); a start that could take effect on none of
what it chose (`NoEffect`: a pause of a node that is down) is `info`, `no-effect`, with the
reason, and leaves its kind inactive, so that its next turn starts it again. Should the thread
itself die, `error` says why, and the runner does not pass the run off as tested under faults.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from contracts.history import FAULT_FAILED, NO_EFFECT, History
from nemesis.base import Fault, NoEffect


class Schedule:
    def __init__(self, faults: list[Fault], interval: float, seed: int, history: History,
                 log: Callable[[str], None] = lambda _m: None) -> None:
        self.faults = faults
        self.interval = interval
        self.rng = random.Random(seed)
        self.history = history
        self.log = log
        self.active: dict[str, dict[str, Any]] = {}  # kind -> what its start did
        self._since: dict[str, float] = {}  # kind -> when its active start began (monotonic)
        self.started = 0  # starts that took effect
        # why the schedule's thread died, if it did: the faults after that were never made, so
        # the run did not test what it says (the runner fails it)
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> None:
        if self.faults:
            self._thread.start()

    def stop(self, timeout: float = 120.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._steps()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.log(f"nemesis: the schedule died: {traceback.format_exc()}")

    def _steps(self) -> None:
        order: list[Fault] = []
        while not self._stop.wait(self.interval):
            fault = self._next(order)
            if fault is None:
                continue  # every kind is held: nothing steps this interval
            order.remove(fault)
            self._do(fault, "stop" if fault.kind in self.active else "start")
            if getattr(fault, "instant", False) and fault.kind in self.active:
                self._do(fault, "stop")  # nothing to hold: its window is the change itself
        for fault in self.faults:
            if fault.kind in self.active:
                self._do(fault, "stop")

    def _next(self, order: list[Fault]) -> Fault | None:
        """The first fault of this round that may step; a new round is drawn when the round is
        spent, or when all that is left of it is held."""
        for fresh in (False, True):
            if fresh or not order:
                order[:] = self.rng.sample(self.faults, len(self.faults))
            ready = next((f for f in order if self._may_step(f)), None)
            if ready is not None:
                return ready
        return None

    def _may_step(self, fault: Fault) -> bool:
        since = self._since.get(fault.kind)
        if fault.kind not in self.active or since is None:
            return True
        return time.monotonic() - since >= float(getattr(fault, "hold", 0.0))

    def _do(self, fault: Fault, phase: str) -> None:
        f = f"{phase}-{fault.kind}"
        choice: dict[str, Any] | None = None
        try:
            if phase == "start":
                choice = fault.choose(self.rng)
        except Exception as exc:
            self.log(f"nemesis: {f}: cannot choose: {exc}")
            return
        self.history.record({"process": "nemesis", "type": "invoke", "f": f, "value": choice})
        try:
            if phase == "start":
                assert choice is not None
                self.active[fault.kind] = choice  # before it is done: a half-done start is undone
                self._since[fault.kind] = time.monotonic()
                done = fault.start(choice)
                self.started += 1
            else:
                self.active.pop(fault.kind, None)
                self._since.pop(fault.kind, None)
                done = fault.stop()
        except NoEffect as exc:
            self.log(f"nemesis: {f} had no effect: {exc.reason}")
            self.active.pop(fault.kind, None)  # nothing was done: nothing to stop
            self._since.pop(fault.kind, None)
            self.history.record({"process": "nemesis", "type": "info", "f": f,
                                 "value": {**(choice or {}), **exc.seen,
                                           "evidence": exc.evidence},
                                 "error": NO_EFFECT, "detail": exc.reason[:200]})
            return
        except Exception as exc:
            self.log(f"nemesis: {f} failed: {exc!r}")
            self.history.record({"process": "nemesis", "type": "info", "f": f, "value": choice,
                                 "error": FAULT_FAILED,
                                 "detail": f"{type(exc).__name__}: {exc}"[:200]})
            return
        self.history.record({"process": "nemesis", "type": "ok", "f": f, "value": done})

    def heal_all(self) -> None:
        for fault in self.faults:
            try:
                fault.heal()
            except Exception as exc:
                self.log(f"nemesis: heal {fault.kind} failed: {exc!r}")
