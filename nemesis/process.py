"""Process faults: pause (SIGSTOP, then SIGCONT) and kill (SIGKILL, then restart).

Targets name which nodes: `one`, `leader` (needs HasLeader; a random node when no leader is
known, and the history says so), `minority`, and for kill also `all` (every node down at once:
only what reached the disk survives).

A signal to a process that is gone is sent quietly and does nothing, so each step proves what it
did, node by node, in its completion's `evidence`: a kill that the process is `gone` after it, a
pause that it is `stopped` (`contracts.backend.CanInspectProcess`), their stops that it is
`running` again. A node that was down already is left alone (`already gone`); the completion's
`nodes` are those the step took effect on, and a start that took effect on none is `NoEffect`.
A node still running after SIGKILL or SIGSTOP, or still stopped after SIGCONT, fails the step.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from contracts.backend import CanInspectProcess, ProcessState
from contracts.target import CanKill, CanPause
from nemesis.base import Env, Fault, NoEffect, choose_nodes, on_each
from nemesis.powers import KILL, PAUSE
from nemesis.spec import FaultSpec

PAUSE_TARGETS = ("one", "leader", "minority")
KILL_TARGETS = ("one", "leader", "minority", "all")
PROOF_WAIT_S = 2.0
"""At most this long for a signalled process to show its new state: a signal is delivered when
the kernel next schedules the process's threads, not when kill() returns."""


class _NodeFault(Fault):
    def __init__(self, env: Env, targets: list[str]) -> None:
        self.env = env
        self.targets = targets
        self.affected: list[str] = []

    def choose(self, rng: random.Random) -> dict[str, Any]:
        return choose_nodes(self.env, self.targets, rng)


def _done(kind: str, choice: dict[str, Any], evidence: dict[str, str], took: str,
          failed: str) -> dict[str, Any]:
    """The completion of a start: what it chose, `nodes` narrowed to those whose evidence is
    `took`; a RuntimeError when one is `failed`, NoEffect when none took."""
    stuck = [node for node, seen in evidence.items() if seen == failed]
    if stuck:
        raise RuntimeError(f"{', '.join(stuck)} {failed} after the {kind} "
                           f"({_said(evidence)})")
    affected = [node for node, seen in evidence.items() if seen == took]
    if not affected:
        raise NoEffect(f"no node could be {took}: {_said(evidence)}", evidence)
    return {**choice, "nodes": affected, "evidence": evidence}


def _said(evidence: dict[str, str]) -> str:
    return ", ".join(f"{node} {seen}" for node, seen in evidence.items())


class Pause(_NodeFault):
    kind = "pause"

    def __init__(self, env: Env, targets: list[str]) -> None:
        if not isinstance(env.db, CanPause):
            raise TypeError("target cannot pause nodes")
        if not isinstance(env.backend, CanInspectProcess):
            raise TypeError("backend cannot tell whether a process is stopped")
        super().__init__(env, targets)
        self.ops: CanPause = env.db
        self.processes: CanInspectProcess = env.backend

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        """Each chosen node that runs is stopped; one that is down or stopped already is left
        alone (`already gone`, `already stopped`), and so is one that dies before it stops."""
        self.affected = []
        evidence: dict[str, str] = {}
        for node in choice["nodes"]:
            before = self.processes.process_state(node)
            if before != "running":
                evidence[node] = f"already {before}"
                continue
            self.affected.append(node)  # before the signal: a half-done start is undone
            self.ops.pause(self.env.backend, node)
            after = self._await(node, lambda state: state != "running")
            evidence[node] = "still running" if after == "running" else after
        return _done(self.kind, choice, evidence, took="stopped", failed="still running")

    def stop(self) -> dict[str, Any]:
        """Every node the start stopped runs again, or is gone (killed while paused)."""
        resumed, self.affected = self.affected, []
        for node in resumed:
            self.ops.resume(self.env.backend, node)
        evidence: dict[str, str] = {}
        for node in resumed:
            after = self._await(node, lambda state: state != "stopped")
            evidence[node] = "still stopped" if after == "stopped" else after
        stuck = [node for node, seen in evidence.items() if seen == "still stopped"]
        if stuck:
            raise RuntimeError(f"{', '.join(stuck)} still stopped after SIGCONT")
        return {"nodes": resumed, "evidence": evidence}

    def heal(self) -> None:
        self.affected = []
        for node in self.env.nodes:
            self.ops.resume(self.env.backend, node)

    def _await(self, node: str, reached: Callable[[ProcessState], bool]) -> ProcessState:
        """The node's process state once `reached` holds of it, or after PROOF_WAIT_S."""
        deadline = time.monotonic() + PROOF_WAIT_S
        while True:
            state = self.processes.process_state(node)
            if reached(state) or time.monotonic() >= deadline:
                return state
            time.sleep(0.01)


class Kill(_NodeFault):
    kind = "kill"

    def __init__(self, env: Env, targets: list[str]) -> None:
        if not isinstance(env.db, CanKill):
            raise TypeError("target cannot kill nodes")
        super().__init__(env, targets)
        self.ops: CanKill = env.db

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        """Each chosen node that runs is killed; one that is down already is left alone
        (`already gone`), and its stop does not start it."""
        self.affected = []
        evidence: dict[str, str] = {}
        backend = self.env.backend
        for node in choice["nodes"]:
            if not backend.is_running(node):
                evidence[node] = "already gone"
                continue
            self.affected.append(node)
            self.ops.kill(backend, node)  # returns once the process is reaped
            evidence[node] = "still running" if backend.is_running(node) else "gone"
        return _done(self.kind, choice, evidence, took="gone", failed="still running")

    def stop(self) -> dict[str, Any]:
        """Every node the start killed runs again; one whose disk would not let it start
        (`Env.broken`) is left down."""
        restarted, self.affected = self.affected, []
        backend = self.env.backend
        self._start_all([n for n in restarted if not backend.is_running(n)])
        evidence = {node: "broken: left down" if node in self.env.broken
                    else "running" if backend.is_running(node) else "gone"
                    for node in restarted}
        down = [node for node, seen in evidence.items() if seen == "gone"]
        if down:
            raise RuntimeError(f"{', '.join(down)} not running after the restart")
        return {"nodes": restarted, "evidence": evidence}

    def heal(self) -> None:
        self.affected = []
        self._start_all([n for n in self.env.nodes if not self.env.backend.is_running(n)])

    def _start_all(self, nodes: list[str]) -> None:
        # together, as after a power cut: one slow start must not stagger the others
        on_each([n for n in nodes if n not in self.env.broken],
                lambda node: self.env.db.start(self.env.backend, node))


SPECS = (
    FaultSpec(Pause.kind, (PAUSE,),
              lambda context: Pause(context.env, context.usable(PAUSE_TARGETS)), default=True),
    FaultSpec(Kill.kind, (KILL,),
              lambda context: Kill(context.env, context.usable(KILL_TARGETS)), default=True),
)
