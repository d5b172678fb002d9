"""Which faults exist, which a backend and target can do, and how to build them."""

from __future__ import annotations

from contracts.backend import Backend, CanPartition
from contracts.target import DB, CanKill, CanPause, HasLeader
from nemesis.base import Env, Fault
from nemesis.partition import SHAPES, Partition
from nemesis.process import KILL_TARGETS, PAUSE_TARGETS, Kill, Pause

KINDS = ("partition", "pause", "kill")


def available(backend: Backend, db: DB) -> dict[str, str | None]:
    """Each kind -> None if it can run here, else why not."""
    return {
        "partition": None if isinstance(backend, CanPartition)
        else f"the {backend.name} backend cannot partition",
        "pause": None if isinstance(db, CanPause) else "the target cannot pause nodes",
        "kill": None if isinstance(db, CanKill) else "the target cannot kill nodes",
    }


def build(kinds: list[str], env: Env, shapes: list[str]) -> list[Fault]:
    leader_known = isinstance(env.db, HasLeader)

    def usable(options: tuple[str, ...] | list[str]) -> list[str]:
        # a leader-targeted fault needs a target that can say who leads
        return [o for o in options if o != "leader" or leader_known] or ["one"]

    faults: list[Fault] = []
    for kind in kinds:
        if kind == "partition":
            faults.append(Partition(env, usable(shapes or list(SHAPES))))
        elif kind == "pause":
            faults.append(Pause(env, usable(PAUSE_TARGETS)))
        elif kind == "kill":
            faults.append(Kill(env, usable(KILL_TARGETS)))
        else:
            raise ValueError(f"unknown nemesis {kind!r}")
    return faults
