"""Process faults: pause (SIGSTOP, then SIGCONT) and kill (SIGKILL, then restart).

Targets name which nodes: `one`, `leader` (needs HasLeader; a random node when no leader is
known, and the history says so), `minority`, and for kill also `all` (every node down at once:
only what reached the disk survives).
"""

from __future__ import annotations

import random
from typing import Any

from contracts.target import CanKill, CanPause
from nemesis.base import Env, Fault, choose_nodes, on_each
from nemesis.powers import KILL, PAUSE
from nemesis.spec import FaultSpec

PAUSE_TARGETS = ("one", "leader", "minority")
KILL_TARGETS = ("one", "leader", "minority", "all")


class _NodeFault(Fault):
    def __init__(self, env: Env, targets: list[str]) -> None:
        self.env = env
        self.targets = targets
        self.affected: list[str] = []

    def choose(self, rng: random.Random) -> dict[str, Any]:
        return choose_nodes(self.env, self.targets, rng)


class Pause(_NodeFault):
    kind = "pause"

    def __init__(self, env: Env, targets: list[str]) -> None:
        if not isinstance(env.db, CanPause):
            raise TypeError("target cannot pause nodes")
        super().__init__(env, targets)
        self.ops: CanPause = env.db

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.affected = list(choice["nodes"])
        for node in self.affected:
            self.ops.pause(self.env.backend, node)
        return choice

    def stop(self) -> dict[str, Any]:
        resumed, self.affected = self.affected, []
        for node in resumed:
            self.ops.resume(self.env.backend, node)
        return {"nodes": resumed}

    def heal(self) -> None:
        self.affected = []
        for node in self.env.nodes:
            self.ops.resume(self.env.backend, node)


class Kill(_NodeFault):
    kind = "kill"

    def __init__(self, env: Env, targets: list[str]) -> None:
        if not isinstance(env.db, CanKill):
            raise TypeError("target cannot kill nodes")
        super().__init__(env, targets)
        self.ops: CanKill = env.db

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.affected = list(choice["nodes"])
        for node in self.affected:
            self.ops.kill(self.env.backend, node)
        return choice

    def stop(self) -> dict[str, Any]:
        restarted, self.affected = self.affected, []
        self._start_all(restarted)
        return {"nodes": restarted}

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
