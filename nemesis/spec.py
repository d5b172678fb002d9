"""What a fault module registers: one `FaultSpec` per kind of fault it makes.

A spec says the kind's name, the powers it needs (`nemesis.powers`: the first one lacking is why
it cannot run here), how to build the fault for a run, its options, and whether `kraft test` runs
it when no `--nemesis` is given. The registry (`nemesis.registry`) is the list of the specs;
`kraft test` makes one flag of each option (`--` and its name with dashes), and the run's
`TestConfig.nemesis_options` carries their values by name, which test.json records as keys of
their own. An option's type is declared, not parsed here: the command line owns the parsing and
its messages.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contracts.backend import Backend
from contracts.target import DB, HasLeader
from nemesis.base import Env, Fault
from nemesis.links import Links
from nemesis.powers import Power


@dataclass(frozen=True)
class Seconds:
    """A positive finite number of seconds."""


@dataclass(frozen=True)
class Count:
    """A whole number from `low` to `high`."""

    low: int
    high: int


@dataclass(frozen=True)
class Choices:
    """A comma list of some of `allowed` (the default, empty: every one)."""

    allowed: tuple[str, ...]


OptionType = Seconds | Count | Choices


@dataclass(frozen=True)
class Option:
    name: str  # TestConfig.nemesis_options' key and test.json's; the flag is it with dashes
    type: OptionType
    default: Any  # a Choices option's is a tuple; its value in a run, a list
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def initial(self) -> Any:
        """The value of a run that does not set it (a fresh list for a Choices option)."""
        return list(self.default) if isinstance(self.type, Choices) else self.default


@dataclass(frozen=True)
class FaultContext:
    """What a spec's `build` is given: the fault's world, every option of the run (each one's
    default when unset), what the run's network faults share, and how many of `env.nodes` were
    deployed as voters (the rest are spares and brokers; all of them, when None)."""

    env: Env
    options: Mapping[str, Any]
    # one set of cut links for every network fault, so that one's stop keeps the other's cuts
    links: Links | None
    initial_voters: int | None = None

    def usable(self, choices: Sequence[str], needs_leader: Collection[str] = ("leader",),
               needs_brokers: Collection[str] = ()) -> list[str]:
        """The `choices` (targets, shapes) this run can have: one drawn with the leader's name
        needs a target that can tell it, one that cuts a broker off needs brokers; `one` when
        none is left."""
        leader_known = isinstance(self.env.db, HasLeader)
        return [c for c in choices if (c not in needs_leader or leader_known)
                and (c not in needs_brokers or self.env.brokers)] or ["one"]


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    needs: tuple[Power, ...]
    build: Callable[[FaultContext], Fault]
    options: tuple[Option, ...] = ()
    default: bool = False  # run when no --nemesis is given

    def why_not(self, backend: Backend, db: DB, disk: str | None) -> str | None:
        """Why this fault cannot run with `backend` and `db` (`disk`: why the fault filesystem
        cannot be mounted, None when it can): the first power it needs that is lacking, or
        None when it can run."""
        for power in self.needs:
            why = power.lacking(backend, db, disk)
            if why:
                return why
        return None
