"""Which faults exist, which a backend and target can do, and how to build them."""

from __future__ import annotations

from contracts.backend import Backend, CanPartition
from contracts.target import DB, CanKill, CanPause, HasDataDir, HasLeader
from nemesis.base import Env, Fault
from nemesis.brokers import KIND as STALE_INCARNATION
from nemesis.brokers import CanReplayRegistration, StaleIncarnation
from nemesis.disk import (
    CORRUPT,
    CORRUPT_TARGETS,
    FSYNC_STALL,
    POWER_LOSS,
    POWER_TARGETS,
    STALL_TARGETS,
    Corrupt,
    FsyncStall,
    PowerLoss,
)
from nemesis.disk import KINDS as DISK_KINDS
from nemesis.lagging import DURATION, LaggingFollower
from nemesis.lagging import KIND as LAGGING
from nemesis.links import Links
from nemesis.membership import KIND as MEMBERSHIP
from nemesis.membership import CanChangeMembership, Membership
from nemesis.partition import BROKER_SHAPES, NEEDS_LEADER, SHAPES, Partition
from nemesis.process import KILL_TARGETS, PAUSE_TARGETS, Kill, Pause
from nemesis.targeted import KIND as TARGETED
from nemesis.targeted import Targeted

KINDS = ("partition", "pause", "kill", LAGGING, MEMBERSHIP, *DISK_KINDS, STALE_INCARNATION,
         TARGETED)
# what `kraft test` runs when no --nemesis is given: the lagging follower is asked for by name,
# since it holds a node away for its whole duration, whatever the interval; membership too, since
# it changes how the nodes are deployed (spares, voters in the log); the disk faults too, since
# they mount a filesystem under every node; stale-incarnation too, since it needs brokers; the
# targeted shapes too, since they kill the leader and crash voters on purpose, every turn
DEFAULT_KINDS = ("partition", "pause", "kill")


def available(backend: Backend, db: DB,
              disk: str | None = "the disk faults' filesystem was not checked"
              ) -> dict[str, str | None]:
    """Each kind -> None if it can run here, else why not. `disk`: why the fault filesystem
    cannot be mounted here (None: it can), as the runner found out."""
    killable = None if isinstance(db, CanKill) else "the target cannot kill nodes"
    partition = (None if isinstance(backend, CanPartition)
                 else f"the {backend.name} backend cannot partition")
    return {
        "partition": partition,
        "pause": None if isinstance(db, CanPause) else "the target cannot pause nodes",
        "kill": killable,
        LAGGING: partition,
        MEMBERSHIP: None if isinstance(db, CanChangeMembership)
        else "the target cannot change its voters",
        FSYNC_STALL: disk,
        POWER_LOSS: disk or killable,
        CORRUPT: disk or killable,
        STALE_INCARNATION: killable or (None if isinstance(db, CanReplayRegistration)
                                        else "the target cannot replay a broker registration"),
        TARGETED: partition or killable or (
            None if isinstance(db, HasLeader) and isinstance(db, HasDataDir)
            else "the target cannot name its leader or say where its data is"),
    }


def build(kinds: list[str], env: Env, shapes: list[str],
          lagging_duration: float = DURATION, initial_voters: int | None = None) -> list[Fault]:
    """The faults of `kinds`. `initial_voters` is how many of `env.nodes` were deployed as voters
    (the rest are the membership nemesis's spares, and `env.brokers`); all of them, when None."""
    leader_known = isinstance(env.db, HasLeader)

    def usable(options: tuple[str, ...] | list[str]) -> list[str]:
        # a leader-targeted fault needs a target that can say who leads, a broker shape brokers
        return [o for o in options if (o not in NEEDS_LEADER or leader_known)
                and (o not in BROKER_SHAPES or env.brokers)] or ["one"]

    # the network faults share one set of cut links, so that one's stop keeps the other's cuts
    links = Links(env.backend) if isinstance(env.backend, CanPartition) else None
    faults: list[Fault] = []
    for kind in kinds:
        if kind == "partition":
            faults.append(Partition(env, usable(shapes or list(SHAPES)), links))
        elif kind == "pause":
            faults.append(Pause(env, usable(PAUSE_TARGETS)))
        elif kind == "kill":
            faults.append(Kill(env, usable(KILL_TARGETS)))
        elif kind == LAGGING:
            faults.append(LaggingFollower(env, lagging_duration, links))
        elif kind == MEMBERSHIP:
            faults.append(Membership(env, initial_voters))
        elif kind == FSYNC_STALL:
            faults.append(FsyncStall(env, usable(STALL_TARGETS)))
        elif kind == POWER_LOSS:
            faults.append(PowerLoss(env, list(POWER_TARGETS)))
        elif kind == CORRUPT:
            faults.append(Corrupt(env, list(CORRUPT_TARGETS)))
        elif kind == STALE_INCARNATION:
            faults.append(StaleIncarnation(env))
        elif kind == TARGETED:
            faults.append(Targeted(env, links))
        else:
            raise ValueError(f"unknown nemesis {kind!r}")
    return faults
