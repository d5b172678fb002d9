"""Which faults exist, which a backend and target can do, and how to build them.

The list of every fault module's specs (`nemesis.spec.FaultSpec`); all else is derived from it:
the kinds, the default ones, the options `kraft test` makes flags of, and the kinds that need the
disk faults' filesystem. A new fault is one entry here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contracts.backend import Backend, CanPartition
from contracts.target import DB
from nemesis import brokers, disk, lagging, membership, partition, process, targeted
from nemesis.base import Env, Fault
from nemesis.links import Links
from nemesis.powers import FAULT_FS
from nemesis.spec import FaultContext, FaultSpec, Option

# in the order `--nemesis` lists them; those not run by default are asked for by name (each
# module says why)
SPECS: tuple[FaultSpec, ...] = (*partition.SPECS, *process.SPECS, *lagging.SPECS,
                                *membership.SPECS, *disk.SPECS, *brokers.SPECS, *targeted.SPECS)
KINDS = tuple(spec.kind for spec in SPECS)
# what `kraft test` runs when no --nemesis is given
DEFAULT_KINDS = tuple(spec.kind for spec in SPECS if spec.default)
OPTIONS: tuple[Option, ...] = tuple(option for spec in SPECS for option in spec.options)
# the kinds that need the fault filesystem mounted under every node before it starts
DISK_KINDS = tuple(spec.kind for spec in SPECS if FAULT_FS in spec.needs)


def spec(kind: str) -> FaultSpec:
    for candidate in SPECS:
        if candidate.kind == kind:
            return candidate
    raise ValueError(f"unknown nemesis {kind!r}")


def default_options() -> dict[str, Any]:
    """Every option's value in a run that sets none, by name."""
    return {option.name: option.initial() for option in OPTIONS}


def available(backend: Backend, db: DB,
              disk: str | None = "the disk faults' filesystem was not checked"
              ) -> dict[str, str | None]:
    """Each kind -> None if it can run here, else why not. `disk`: why the fault filesystem
    cannot be mounted here (None: it can), as the runner found out."""
    return {spec.kind: spec.why_not(backend, db, disk) for spec in SPECS}


def build(kinds: list[str], env: Env, options: Mapping[str, Any] | None = None,
          initial_voters: int | None = None) -> list[Fault]:
    """The faults of `kinds`, with `options` (by name; each unset one at its default).
    `initial_voters` is how many of `env.nodes` were deployed as voters (the rest are the
    membership nemesis's spares, and `env.brokers`); all of them, when None."""
    unknown = sorted(set(options or {}) - {option.name for option in OPTIONS})
    if unknown:
        raise ValueError(f"unknown nemesis options {', '.join(unknown)}")
    context = FaultContext(
        env, {**default_options(), **(options or {})},
        Links(env.backend) if isinstance(env.backend, CanPartition) else None, initial_voters)
    specs = [spec(kind) for kind in kinds]
    return [each.build(context) for each in specs]
