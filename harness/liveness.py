"""The nodes' liveness as part of the history: an exit the harness did not cause is a fact of the run.

`Watch` polls each node's daemon from deployment to teardown. When a daemon it knows is gone and
the harness delivered it no ending signal (`Backend.signals_sent`), it records a lone `info` op
of the nemesis, `node-exit`: the exit status, the signal that ended it, the signals the harness
had sent, the last lines of the node's log and those near its end that say what went wrong. At the heal, `revive` starts again every node
that should run and does not (`revive`: what each start came to), and before the final reads
`settle` records which nodes run (`node-states`). checkers/liveness.py judges these ops: a crash,
an exit by design, a kill from outside, a node down at the end.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from contracts.backend import TERMINATING, Backend, BackendError
from contracts.history import NEMESIS, NODE_EXIT, NODE_STATES, REVIVE, History
from contracts.target import DB

LOG_LINES = 10  # the last lines of the node's log, in a `node-exit` op
SEARCHED_LINES = 400  # the end of the log searched for the lines that say what went wrong
ERROR_LINES = 5
LINE_CHARS = 300
# what marks a line that says what went wrong, besides the target's own patterns: a Go panic
# comes before a goroutine dump longer than the last lines, a traceback before its frames
ERROR_MARKS = r"(?i)\b(error|fatal|panic|exception|traceback)\b|\[(ERR|FTL)\]"
SETTLE_S = 1.0


class Watch:
    def __init__(self, backend: Backend, nodes: list[str], history: History,
                 log_file: str | None = None, log: Callable[[str], None] = lambda _m: None,
                 interval: float | None = None, patterns: Iterable[str] = ()) -> None:
        self.backend = backend
        self.nodes = nodes
        self.history = history
        self.log_file = log_file
        self.log = log
        # the target's crash and designed-exit patterns: the lines that match are kept
        self.marks = [re.compile(ERROR_MARKS)] + [re.compile(p) for p in patterns]
        # a local poll is a waitpid; a remote one a command over SSH, every node each time
        self.interval = interval if interval is not None else (
            0.2 if backend.name == "local" else 1.0)
        self._judged: dict[str, int] = {}  # node -> the last incarnation whose exit was judged
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveness", daemon=True)
        self.error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception as exc:  # a watch that stops seeing must say so, not pass quietly
                self.error = f"{type(exc).__name__}: {exc}"
                self.log(f"liveness: the watch died: {self.error}")
                return

    def poll(self) -> list[str]:
        """One look at every node: the nodes whose exit it recorded."""
        recorded = []
        for node in self.nodes:
            if self._look(node):
                recorded.append(node)
        return recorded

    def _look(self, node: str) -> bool:
        backend = self.backend
        incarnation = backend.incarnation(node)
        if incarnation == 0 or self._judged.get(node) == incarnation:
            return False
        try:
            running = backend.is_running(node)
        except BackendError as exc:
            self.log(f"liveness: cannot tell whether {node} runs: {exc}")
            return False
        if running or backend.incarnation(node) != incarnation:
            return False  # runs, or was started again meanwhile: judged at the next look
        self._judged[node] = incarnation
        sent = backend.signals_sent(node, incarnation)
        if TERMINATING.intersection(sent):
            return False  # the harness ended it (a kill, a power cut, a stop)
        status = _exit_status(backend, node)
        if backend.incarnation(node) != incarnation:
            status = None  # the status read may be the new daemon's
        lines = self._last_lines(node)
        errors = [line for line in lines if any(mark.search(line) for mark in self.marks)]
        value: dict[str, Any] = {"node": node, "status": status, "incarnation": incarnation,
                                 "signal": _signal_name(status), "sent": list(sent),
                                 "errors": errors[-ERROR_LINES:], "log": lines[-LOG_LINES:]}
        self.log(f"liveness: {node} exited on its own (status {status})")
        self.history.record({"process": NEMESIS, "type": "info", "f": NODE_EXIT, "value": value})
        return True

    def _last_lines(self, node: str) -> list[str]:
        if self.log_file is None:
            return []
        path = f"{self.backend.node_dir(node)}/{self.log_file}"
        try:
            done = self.backend.exec(node, ["tail", "-n", str(SEARCHED_LINES), path], check=False,
                                     timeout=10)
        except BackendError:
            return []
        return [line[:LINE_CHARS] for line in done.stdout.splitlines()]

    def revive(self, db: DB, broken: Iterable[str]) -> dict[str, str]:
        """Every node that ran once, is down now and is not down for good (`broken`: it refused
        to start on a damaged disk) is started again, as Jepsen's final heal does; records
        `revive` when it started any: node -> `running`, or why not."""
        left_down = set(broken)
        down = [n for n in self.nodes if self.backend.incarnation(n) > 0
                and n not in left_down and not self.backend.is_running(n)]
        came: dict[str, str] = {}
        for node in down:
            try:
                db.start(self.backend, node)
            except Exception as exc:
                came[node] = f"failed: {type(exc).__name__}: {exc}"[:LINE_CHARS]
                continue
            came[node] = "running" if self.backend.is_running(node) else "exited at once"
        if came:
            self.log(f"liveness: revived {came}")
            self.history.record({"process": NEMESIS, "type": "info", "f": REVIVE,
                                 "value": {"nodes": came}})
        return came

    def settle(self, broken: Iterable[str]) -> dict[str, list[str]]:
        """Which nodes run now, as `node-states` (`running`, `down`, and `broken`: down for good
        by the disk nemesis's design); a node never started is not named. A node restarted
        by the heal is given `SETTLE_S` first: a refusal to start takes a moment to show."""
        time.sleep(SETTLE_S)
        self.poll()  # an exit since the last look is recorded before it
        left_down = set(broken)
        states: dict[str, list[str]] = {"running": [], "down": [], "broken": []}
        for node in self.nodes:
            if self.backend.incarnation(node) == 0:
                continue
            key = ("running" if self.backend.is_running(node)
                   else "broken" if node in left_down else "down")
            states[key].append(node)
        self.history.record({"process": NEMESIS, "type": "info", "f": NODE_STATES,
                             "value": states})
        return states


def _exit_status(backend: Backend, node: str) -> int | None:
    with contextlib.suppress(BackendError):
        return backend.wait_exit(node, 0)
    return None


def _signal_name(status: int | None) -> str | None:
    """The signal that ended a daemon (a negative status, as Python's subprocess gives it)."""
    if status is None or status >= 0:
        return None
    try:
        return signal.Signals(-status).name
    except ValueError:
        return f"signal {-status}"
