"""The powers a fault may need, each with the one line that says it is lacking here.

A power is asked of the backend (cut links, tell a process's state), of the target's DB (kill,
pause, name the leader, change its voters, replay a broker's registration), or of the machine
(mount the disk faults' filesystem: the runner found out why not before, and passes its reason on
as `disk`). A fault's spec (`nemesis.spec.FaultSpec`) lists the powers it needs; the first one
lacking is why the fault cannot run here (`nemesis.registry.available`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from contracts.backend import Backend, CanInspectProcess, CanPartition
from contracts.target import (
    DB,
    CanChangeMembership,
    CanKill,
    CanPause,
    CanReplayRegistration,
    HasDataDir,
    HasLeader,
)

Lacking = Callable[[Backend, DB, str | None], str | None]
"""(backend, db, why the fault filesystem cannot be mounted or None) -> why the power is
lacking, or None when it is there."""


@dataclass(frozen=True)
class Power:
    name: str
    lacking: Lacking


def _target_can(protocol: type, why: str) -> Lacking:
    return lambda _backend, db, _disk: None if isinstance(db, protocol) else why


PARTITION = Power("partition", lambda backend, _db, _disk: (
    None if isinstance(backend, CanPartition) else f"the {backend.name} backend cannot partition"))
KILL = Power("kill", _target_can(CanKill, "the target cannot kill nodes"))
# a pause proves itself by the process's state (nemesis.process), which the backend tells
PAUSE = Power("pause", lambda backend, db, _disk: (
    "the target cannot pause nodes" if not isinstance(db, CanPause)
    else None if isinstance(backend, CanInspectProcess)
    else f"the {backend.name} backend cannot tell whether a process is stopped"))
CHANGE_VOTERS = Power("change-voters", _target_can(CanChangeMembership,
                                                   "the target cannot change its voters"))
REPLAY_REGISTRATION = Power("replay-registration", _target_can(
    CanReplayRegistration, "the target cannot replay a broker registration"))
LEADER_AND_DATA = Power("leader-and-data", lambda _backend, db, _disk: (
    None if isinstance(db, HasLeader) and isinstance(db, HasDataDir)
    else "the target cannot name its leader or say where its data is"))
FAULT_FS = Power("fault-filesystem", lambda _backend, _db, disk: disk)
