"""Disk faults: fsync stalls, power loss that drops unsynced writes, and corrupted files.

They work on any target that says where its data lives (`contracts.target.HasDataDir`): the
runner mounts the fault-injecting filesystem (`nemesis.faultfs`) over each node's data directory
before the node first starts, and hands the faults its levers (`contracts.disk.CanFaultDisk`,
the runner's `harness.disk.Disks`). Everything each start does is in its completion in the
history, the seeds of its random parts included, so a run can be replayed from it, with its
`evidence` per node from the filesystem's own status (stalled, fsyncs waiting, bytes dropped,
bits flipped); a start that touched nothing is `NoEffect`, a heal the status denies fails.

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
from nemesis.base import Env, Fault, NoEffect, choose_nodes, on_each, pick_nodes
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
DRAIN_WAIT_S = 5.0
"""At most this long, after a heal, for the fsyncs a stall held to go on (each then does a real
fsync of what it wrote back)."""


def _disk(env: Env) -> CanFaultDisk:
    if not isinstance(env.disk, CanFaultDisk):
        raise TypeError("disk faults need the fault filesystem mounted (Env.disk)")
    return env.disk


def _said(evidence: dict[str, str]) -> str:
    return "; ".join(f"{node} {seen}" for node, seen in evidence.items())


def _stalled(status: dict[str, Any]) -> bool:
    """Whether a filesystem's status says fsync is stalled (one built before it said `stalled`,
    e.g. in an older node image, still tells the stall's `stall_remaining`)."""
    if "stalled" in status:
        return bool(status["stalled"])
    return status.get("stall_remaining") is not None


class FsyncStall(Fault):
    kind = FSYNC_STALL

    def __init__(self, env: Env, targets: list[str]) -> None:
        self.env = env
        self.disk = _disk(env)
        self.targets = targets
        self.affected: list[str] = []
        self._held_before: dict[str, int] = {}  # node -> fsyncs_stalled when its stall began

    def choose(self, rng: random.Random) -> dict[str, Any]:
        return choose_nodes(self.env, self.targets, rng)

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        """Each chosen disk is stalled, and its filesystem's status proves it (`stalled`, with
        the fsyncs already waiting); a disk whose status says otherwise fails the step."""
        self.affected = list(choice["nodes"])
        statuses = on_each(self.affected, self._stall)
        # those waiting already are this stall's: the count before it is without them
        self._held_before = {n: int(s.get("fsyncs_stalled") or 0) - int(s.get("fsyncs_waiting")
                                                                       or 0)
                             for n, s in statuses.items()}
        evidence = {n: (("stalled, " + (f"{s['fsyncs_waiting']} fsyncs waiting"
                                        if "fsyncs_waiting" in s else "fsyncs waiting not told"))
                        if _stalled(s) else "not stalled") for n, s in statuses.items()}
        loose = [n for n, seen in evidence.items() if seen == "not stalled"]
        if loose:
            raise RuntimeError(f"{', '.join(loose)} not stalled after the stall ({_said(evidence)})")
        return {**choice, "evidence": evidence}

    def _stall(self, node: str) -> dict[str, Any]:
        self.disk.stall(node)
        return self.disk.status(node)

    def stop(self) -> dict[str, Any]:
        """Each disk is healed and its status proves it: not stalled, and the fsyncs that
        waited drained (they went on); `fsyncs_stalled` counts those this stall held."""
        healed, self.affected = self.affected, []
        statuses = on_each(healed, self._heal)
        held = {n: int(s.get("fsyncs_stalled") or 0) - self._held_before.get(n, 0)
                for n, s in statuses.items()}
        evidence = {n: ("still stalled" if _stalled(s)
                        else f"{s.get('fsyncs_waiting')} fsyncs still waiting"
                        if s.get("fsyncs_waiting") else f"healed, {held[n]} fsyncs held")
                    for n, s in statuses.items()}
        stuck = [n for n, seen in evidence.items() if not seen.startswith("healed")]
        if stuck:
            raise RuntimeError(f"{', '.join(stuck)} not healed ({_said(evidence)})")
        return {"nodes": healed, "fsyncs_stalled": held, "evidence": evidence}

    def _heal(self, node: str) -> dict[str, Any]:
        """The status once the heal took and the waiting fsyncs drained, or after DRAIN_WAIT_S."""
        self.disk.heal(node)
        deadline = time.monotonic() + DRAIN_WAIT_S
        while True:
            status = self.disk.status(node)
            drained = not _stalled(status) and not status.get("fsyncs_waiting")
            if drained or time.monotonic() >= deadline:
                return status
            time.sleep(0.05)

    def heal(self) -> None:
        self.affected = []
        on_each(list(self.env.nodes), self.disk.heal)


class _DownAndBack(Fault):
    """A disk fault done while its nodes are down (killed first), undone by restarting them.
    A chosen node that is down already (another fault's) is left alone (`already gone`): its
    disk is not touched, and its restart is not this fault's to make."""

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

    def _running(self, nodes: list[str]) -> tuple[list[str], dict[str, str]]:
        """Those of `nodes` that run (to be taken down), and the evidence of the others."""
        up = [n for n in nodes if self.env.backend.is_running(n)]
        return up, {n: "already gone" for n in nodes if n not in up}

    def _kill(self, node: str) -> None:
        """SIGKILL; RuntimeError when the process still runs after it."""
        self.killer.kill(self.env.backend, node)
        if self.env.backend.is_running(node):
            raise RuntimeError(f"{node} still running after the kill")

    def stop(self) -> dict[str, Any]:
        """The nodes taken down run again (`evidence`: `running`); a node that refused its
        damaged disk is repaired and started again, or left down (`broken: left down`)."""
        restarted, self.affected = self.affected, []
        refused = self._restart(restarted)
        done: dict[str, Any] = {"nodes": restarted}
        if refused:
            # The node said no to its damaged disk, as it should rather than serve from it. The
            # operator restores the damaged files, and the run goes on with a whole cluster.
            repaired = on_each(list(refused), self.disk.repair)
            still = self._restart(list(refused))
            done.update(refused=refused, repaired=repaired,
                        **({"still_refused": still} if still else {}))
        evidence = {n: self._after(n, n in refused) for n in restarted}
        done["evidence"] = evidence
        down = [n for n, seen in evidence.items() if seen == "gone"]
        if down:
            raise RuntimeError(f"{', '.join(down)} not running after the restart "
                               f"({_said(evidence)})")
        return done

    def _after(self, node: str, refused: bool) -> str:
        if node in self.env.broken:
            return "broken: left down"
        if not self.env.backend.is_running(node):
            return "gone"
        if not refused:
            return "running"
        left = self.disk.status(node).get("damaged")
        return f"running after the repair ({len(left or ())} damaged files left)"

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
        """The running chosen nodes lose their power: killed, then their disks drop what they
        had not fsynced (`lost`, per node; none dropped is still a power cut). NoEffect when no
        chosen node was running."""
        self.affected, evidence = self._running(list(choice["nodes"]))
        if not self.affected:
            raise NoEffect(f"no node could be taken down: {_said(evidence)}", evidence)
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

        lost = on_each(self.affected, cut)
        evidence.update({n: f"killed, {done['dropped_bytes']} unsynced bytes of "
                            f"{done['files']} files dropped" for n, done in lost.items()})
        return {**choice, "nodes": list(self.affected), "lost": lost,
                "evidence": {n: evidence[n] for n in choice["nodes"]}}


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
        """The running chosen nodes are killed and a file of each damaged (`damage`, per node).
        NoEffect when no chosen node was running, or none had a file to damage (the nodes it
        killed are started again first: nothing of the fault remains)."""
        self.affected, evidence = self._running(list(choice["nodes"]))
        if not self.affected:
            raise NoEffect(f"no node could be taken down: {_said(evidence)}", evidence)

        def damage(node: str) -> dict[str, Any]:
            self._kill(node)
            done = self.disk.corrupt(node, choice["file"][node], choice["mode"][node],
                                     choice["seeds"][node])
            return {k: done.get(k) for k in ("file", "mode", "size_before", "size_after",
                                             "flipped")}

        damaged = on_each(self.affected, damage)
        evidence.update({n: _damage_said(done) for n, done in damaged.items()})
        evidence = {n: evidence[n] for n in choice["nodes"]}
        if not any(_harmed(done) for done in damaged.values()):
            killed, self.affected = self.affected, []
            self._restart(killed)
            raise NoEffect(f"no file to damage: {_said(evidence)}", evidence)
        return {**choice, "nodes": list(self.affected), "damage": damaged, "evidence": evidence}


def _harmed(done: dict[str, Any]) -> bool:
    """Whether a corruption changed a byte (an empty file has no bit to flip nor end to cut)."""
    if done.get("mode") == "truncate":
        return bool(done.get("file")) and done.get("size_after") != done.get("size_before")
    return bool(done.get("file")) and bool(done.get("flipped"))


def _damage_said(done: dict[str, Any]) -> str:
    if not done.get("file"):
        return "killed, no file to damage"
    if not _harmed(done):
        return f"killed, {done['file']} empty: nothing to damage"
    if done.get("mode") == "truncate":
        return (f"killed, {done['file']} cut from {done.get('size_before')} to "
                f"{done.get('size_after')} bytes")
    return f"killed, {len(done.get('flipped') or ())} bits of {done['file']} flipped"


# asked for by name: they mount a filesystem under every node
SPECS = (
    FaultSpec(FSYNC_STALL, (FAULT_FS,),
              lambda context: FsyncStall(context.env, context.usable(STALL_TARGETS))),
    FaultSpec(POWER_LOSS, (FAULT_FS, KILL),
              lambda context: PowerLoss(context.env, list(POWER_TARGETS))),
    FaultSpec(CORRUPT, (FAULT_FS, KILL),
              lambda context: Corrupt(context.env, list(CORRUPT_TARGETS))),
)
