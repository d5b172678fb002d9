"""Disk faults: fsync stalls, power loss that drops unsynced writes, and corrupted files.

They work on any target that says where its data lives (`contracts.target.HasDataDir`): the
runner mounts the fault-injecting filesystem (`nemesis.faultfs`) over each node's data directory
before the node first starts, and hands the faults its levers (`contracts.disk.CanFaultDisk`,
the runner's `harness.disk.Disks`). Everything each start does is in its completion in the
history, the seeds of its random parts included, so a run can be replayed from it.

The faults: `fsync-stall` (fsyncs on the chosen disks block until the stop), `power-loss` (SIGKILL,
then what the disks had not fsynced is lost, often after a brownout of fsyncs) and `corrupt` (a
file of a kind the target names has bits flipped or its end cut off, on never more than a
minority). A node must not serve wrong data, and no acknowledged write may be lost.

Details (targets of each fault, the brownout, refusals and the operator's repair):
docs/internals/nemesis.md#disk
"""

from __future__ import annotations

import random
import time
from typing import Any

from contracts.backend import BackendError
from contracts.disk import CanFaultDisk
from contracts.target import CanKill
from nemesis.base import Env, Fault, choose_nodes, on_each, pick_nodes
from nemesis.powers import FAULT_FS, KILL
from nemesis.spec import FaultSpec

FSYNC_STALL = "fsync-stall"
POWER_LOSS = "power-loss"
CORRUPT = "corrupt"
STALL_TARGETS = ("one", "leader", "minority", "all")
POWER_TARGETS = ("one", "minority", "majority", "all")
CORRUPT_TARGETS = ("one", "minority")
CORRUPT_MODES = ("bitflip", "truncate")
# seconds a brownout (fsync stalled, the node still running) lasts before the power goes
BROWNOUT = (0.5, 2.0)


def _disk(env: Env) -> CanFaultDisk:
    if not isinstance(env.disk, CanFaultDisk):
        raise TypeError("disk faults need the fault filesystem mounted (Env.disk)")
    return env.disk


class FsyncStall(Fault):
    kind = FSYNC_STALL

    def __init__(self, env: Env, targets: list[str]) -> None:
        self.env = env
        self.disk = _disk(env)
        self.targets = targets
        self.affected: list[str] = []

    def choose(self, rng: random.Random) -> dict[str, Any]:
        return choose_nodes(self.env, self.targets, rng)

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.affected = list(choice["nodes"])
        on_each(self.affected, self.disk.stall)
        return choice

    def stop(self) -> dict[str, Any]:
        healed, self.affected = self.affected, []
        statuses = on_each(healed, self._heal)
        return {"nodes": healed,
                "fsyncs_stalled": {n: s.get("fsyncs_stalled") for n, s in statuses.items()}}

    def _heal(self, node: str) -> dict[str, Any]:
        self.disk.heal(node)
        return self.disk.status(node)

    def heal(self) -> None:
        self.affected = []
        on_each(list(self.env.nodes), self.disk.heal)


class _DownAndBack(Fault):
    """A disk fault done while its nodes are down (killed first), undone by restarting them."""

    def __init__(self, env: Env, targets: list[str]) -> None:
        if not isinstance(env.db, CanKill):
            raise TypeError("target cannot kill nodes")
        self.env = env
        self.disk = _disk(env)
        self.killer: CanKill = env.db
        self.targets = targets
        self.affected: list[str] = []

    def _pick(self, rng: random.Random) -> tuple[str, list[str]]:
        """A target drawn from `targets`, and its nodes but those down for good."""
        target = rng.choice(self.targets)
        nodes = pick_nodes(target, self.env.nodes, rng, None)
        return target, [n for n in nodes if n not in self.env.broken]

    def _kill(self, node: str) -> None:
        self.killer.kill(self.env.backend, node)

    def stop(self) -> dict[str, Any]:
        restarted, self.affected = self.affected, []
        refused = self._restart(restarted)
        if not refused:
            return {"nodes": restarted}
        # The node said no to its damaged disk, as it should rather than serve from it. The
        # operator restores the damaged files, and the run goes on with a whole cluster.
        repaired = on_each(list(refused), self.disk.repair)
        still = self._restart(list(refused))
        return {"nodes": restarted, "refused": refused, "repaired": repaired,
                **({"still_refused": still} if still else {})}

    def heal(self) -> None:
        self.affected = []
        self._restart([n for n in self.env.nodes
                       if n not in self.env.broken and not self.env.backend.is_running(n)])

    def _restart(self, nodes: list[str]) -> dict[str, str]:
        """Start `nodes` together; those that refuse (a target that will not start on a damaged
        disk) are returned with the reason, and stay down (`Env.broken`) unless a repair brings
        them back. Any other failure raises."""
        refused: dict[str, str] = {}

        def start(node: str) -> None:
            try:
                self.env.db.start(self.env.backend, node)
            except BackendError as exc:
                if self.kind != CORRUPT:
                    raise
                refused[node] = str(exc)
                self.env.broken.add(node)
                return
            self.env.broken.discard(node)

        on_each(nodes, start)
        return refused


class PowerLoss(_DownAndBack):
    kind = POWER_LOSS

    def choose(self, rng: random.Random) -> dict[str, Any]:
        target, nodes = self._pick(rng)
        # a torn prefix of the unsynced writes survives in half the cuts; two in three cuts
        # come after a brownout
        brownout = 0.0 if rng.random() < 1 / 3 else round(rng.uniform(*BROWNOUT), 2)
        return {"target": target, "nodes": nodes, "brownout": brownout,
                "torn": {n: rng.random() < 0.5 for n in nodes},
                "seeds": {n: rng.getrandbits(31) for n in nodes}}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.affected = list(choice["nodes"])
        if choice.get("brownout"):
            on_each(self.affected, self.disk.stall)
            time.sleep(choice["brownout"])

        def cut(node: str) -> dict[str, Any]:
            self._kill(node)
            lost = self.disk.lose_unsynced(node, choice["torn"][node], choice["seeds"][node])
            if choice.get("brownout"):
                self.disk.heal(node)  # the power comes back with a working disk
            return {"dropped_bytes": lost.get("dropped_bytes"),
                    "kept_bytes": lost.get("kept_bytes"),
                    "files": len(lost.get("files") or {})}

        return {**choice, "lost": on_each(self.affected, cut)}


class Corrupt(_DownAndBack):
    kind = CORRUPT

    def choose(self, rng: random.Random) -> dict[str, Any]:
        target, nodes = self._pick(rng)
        kinds = self.disk.file_kinds()
        return {"target": target, "nodes": nodes,
                "file": {n: rng.choice(kinds) for n in nodes},
                "mode": {n: rng.choice(CORRUPT_MODES) for n in nodes},
                "seeds": {n: rng.getrandbits(31) for n in nodes}}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.affected = list(choice["nodes"])

        def damage(node: str) -> dict[str, Any]:
            self._kill(node)
            done = self.disk.corrupt(node, choice["file"][node], choice["mode"][node],
                                     choice["seeds"][node])
            return {k: done.get(k) for k in ("file", "mode", "size_before", "size_after",
                                             "flipped")}

        return {**choice, "damage": on_each(self.affected, damage)}


# asked for by name: they mount a filesystem under every node
SPECS = (
    FaultSpec(FSYNC_STALL, (FAULT_FS,),
              lambda context: FsyncStall(context.env, context.usable(STALL_TARGETS))),
    FaultSpec(POWER_LOSS, (FAULT_FS, KILL),
              lambda context: PowerLoss(context.env, list(POWER_TARGETS))),
    FaultSpec(CORRUPT, (FAULT_FS, KILL),
              lambda context: Corrupt(context.env, list(CORRUPT_TARGETS))),
)
