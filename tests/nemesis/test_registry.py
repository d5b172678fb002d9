"""The registry is the list of the fault modules' specs (nemesis/registry.py, nemesis/spec.py):
its kinds are theirs, and `available` says why not as the table it replaced did."""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from typing import Any

import pytest

import nemesis
from contracts.backend import Backend, CanPartition
from contracts.target import (
    DB,
    CanChangeMembership,
    CanKill,
    CanPause,
    CanReplayRegistration,
    HasDataDir,
    HasLeader,
)
from nemesis import registry
from nemesis.base import Env, Fault

NO_FUSE = "no /dev/fuse (apt-get install fuse3)"


def test_the_kinds_are_those_of_the_specs_of_every_fault_module() -> None:
    exported = []
    for info in pkgutil.iter_modules(nemesis.__path__):
        if info.name == "registry":
            continue
        module = importlib.import_module(f"nemesis.{info.name}")
        exported += list(getattr(module, "SPECS", ()))
    assert sorted(s.kind for s in exported) == sorted(registry.KINDS)
    assert all(s in registry.SPECS for s in exported)
    assert tuple(s.kind for s in registry.SPECS) == registry.KINDS
    assert len(set(registry.KINDS)) == len(registry.KINDS)
    # as `--nemesis` lists them, and as the table before the specs had them
    assert registry.KINDS == ("partition", "pause", "kill", "lagging-follower", "membership",
                              "fsync-stall", "power-loss", "corrupt", "stale-incarnation",
                              "targeted")
    assert registry.DEFAULT_KINDS == ("partition", "pause", "kill")
    assert registry.DISK_KINDS == ("fsync-stall", "power-loss", "corrupt")


def test_option_names_are_unique_and_their_defaults_are_what_a_run_gets() -> None:
    names = [o.name for o in registry.OPTIONS]
    assert len(set(names)) == len(names)
    assert registry.default_options() == {"partition_shapes": [], "lagging_duration": 15.0,
                                          "spares": 2}
    # a fresh list each time: a run's value is never the spec's
    registry.default_options()["partition_shapes"].append("one")
    assert registry.default_options()["partition_shapes"] == []


def test_an_unknown_kind_or_option_is_refused() -> None:
    env = Env(backend_with(True), db_with(set()), ["n1"])
    with pytest.raises(ValueError, match="unknown nemesis 'meteor'"):
        registry.build(["meteor"], env)
    with pytest.raises(ValueError, match="unknown nemesis options shapes"):
        registry.build(["partition"], env, {"shapes": ["one"]})


# -- which faults a backend and target can do: the table before the specs, as the oracle ---------

def old_available(backend: Backend, db: DB, disk: str | None) -> dict[str, str | None]:
    """nemesis.registry.available as it stood before the faults were specs."""
    killable = None if isinstance(db, CanKill) else "the target cannot kill nodes"
    partition = (None if isinstance(backend, CanPartition)
                 else f"the {backend.name} backend cannot partition")
    return {
        "partition": partition,
        "pause": None if isinstance(db, CanPause) else "the target cannot pause nodes",
        "kill": killable,
        "lagging-follower": partition,
        "membership": None if isinstance(db, CanChangeMembership)
        else "the target cannot change its voters",
        "fsync-stall": disk,
        "power-loss": disk or killable,
        "corrupt": disk or killable,
        "stale-incarnation": killable or (None if isinstance(db, CanReplayRegistration)
                                          else "the target cannot replay a broker registration"),
        "targeted": partition or killable or (
            None if isinstance(db, HasLeader) and isinstance(db, HasDataDir)
            else "the target cannot name its leader or say where its data is"),
    }


class Toy:
    name = "toy"

    # every backend here can tell a process's state: the pause's power is the target's alone,
    # as in the table before the specs (a backend that cannot: see the test after it)
    def process_state(self, node: str) -> str:
        return "running"


class Cuts(Toy):
    def partition(self, blocked: Any) -> None: ...

    def heal(self) -> None: ...


def backend_with(partition: bool) -> Any:
    return Cuts() if partition else Toy()


class Kill:
    def kill(self, backend: Any, node: str) -> None: ...


class Pause:
    def pause(self, backend: Any, node: str) -> None: ...

    def resume(self, backend: Any, node: str) -> None: ...


class Leader:
    def leaders(self, backend: Any, nodes: list[str]) -> dict[str, str | None]:
        return {n: nodes[0] for n in nodes}


class DataDir:
    def data_dir(self, backend: Any, node: str) -> str:
        return f"/nowhere/{node}"

    def data_files(self) -> dict[str, list[str]]:
        return {"quorum-state": ["quorum-state"]}


class Voters:
    directory_ids: dict[str, str] = {}

    def use_spares(self, spares: list[str], directory_ids: dict[str, str]) -> None: ...

    def quorum(self, backend: Any, nodes: list[str]) -> dict[str, Any] | None:
        return None

    def add_voter(self, backend: Any, nodes: list[str], node: str) -> str:
        return "ok"

    def remove_voter(self, backend: Any, nodes: list[str], node: str) -> str:
        return "ok"


class Replay:
    def registration(self, backend: Any, nodes: list[str], broker: str) -> dict[str, Any] | None:
        return None

    def register(self, backend: Any, nodes: list[str], broker: str,
                 registration: dict[str, Any]) -> dict[str, Any]:
        return {}


class Base:
    def start(self, backend: Any, node: str) -> None: ...


POWERS = (Kill, Pause, Leader, DataDir, Voters, Replay)


def db_with(powers: set[type]) -> Any:
    return type("DB", (*[p for p in POWERS if p in powers], Base), {})()


COMBINATIONS = [(partition, frozenset(powers), disk)
                for partition in (False, True)
                for n in range(len(POWERS) + 1)
                for powers in itertools.combinations(POWERS, n)
                for disk in (None, NO_FUSE)]


@pytest.mark.parametrize(("partition", "powers", "disk"), COMBINATIONS)
def test_available_says_why_not_as_the_table_before_the_specs(
        partition: bool, powers: frozenset[type], disk: str | None) -> None:
    backend, db = backend_with(partition), db_with(set(powers))
    assert registry.available(backend, db, disk) == old_available(backend, db, disk)


def test_a_pause_needs_a_backend_that_can_tell_a_process_is_stopped() -> None:
    class Blind:
        name = "blind"

    assert registry.available(Blind(), db_with({Pause}), None)["pause"] == (  # type: ignore[arg-type]
        "the blind backend cannot tell whether a process is stopped")
    # the target's lack comes first
    assert registry.available(Blind(), db_with(set()), None)["pause"] == (  # type: ignore[arg-type]
        "the target cannot pause nodes")
    with pytest.raises(TypeError, match="cannot tell whether a process is stopped"):
        registry.build(["pause"], Env(Blind(), db_with({Pause}), ["n1"]))  # type: ignore[arg-type]


def test_a_backend_and_target_with_no_power_are_told_each_reason() -> None:
    assert registry.available(backend_with(False), db_with(set()), NO_FUSE) == {
        "partition": "the toy backend cannot partition",
        "pause": "the target cannot pause nodes",
        "kill": "the target cannot kill nodes",
        "lagging-follower": "the toy backend cannot partition",
        "membership": "the target cannot change its voters",
        "fsync-stall": NO_FUSE,
        "power-loss": NO_FUSE,
        "corrupt": NO_FUSE,
        "stale-incarnation": "the target cannot kill nodes",
        "targeted": "the toy backend cannot partition",
    }
    # the disk's reason is the runner's: unchecked, the faults that need it are not offered
    assert registry.available(backend_with(True), db_with(set(POWERS)))["corrupt"] == (
        "the disk faults' filesystem was not checked")


class Disk:
    def stall(self, node: str) -> dict[str, Any]:
        return {}

    heal = status = repair = stall

    def lose_unsynced(self, node: str, torn: bool, seed: int) -> dict[str, Any]:
        return {}

    def corrupt(self, node: str, kind: str, mode: str, seed: int) -> dict[str, Any]:
        return {}

    def file_kinds(self) -> list[str]:
        return ["segment"]


def test_where_every_power_is_there_each_spec_builds_its_kind_and_network_faults_share_links(
) -> None:
    backend, db = backend_with(True), db_with(set(POWERS))
    assert all(why is None for why in registry.available(backend, db, None).values())
    env = Env(backend, db, ["n1", "n2", "n3", "n4"], disk=Disk(),
              brokers=["n4"])
    faults = registry.build(list(registry.KINDS), env, initial_voters=3)
    assert all(isinstance(f, Fault) for f in faults)
    assert [f.kind for f in faults] == list(registry.KINDS)
    links = {id(f.links) for f in faults if hasattr(f, "links")}
    assert len(links) == 1  # partition, lagging-follower and targeted cut through one Links


def test_options_reach_the_faults_that_read_them() -> None:
    env = Env(backend_with(True), db_with({Kill}), ["n1", "n2", "n3"])
    faults: list[Any] = registry.build(["partition", "lagging-follower"], env,
                                       {"partition_shapes": ["leader", "halves"],
                                        "lagging_duration": 2.5})
    partition, lagging = faults
    # no leader known to this target: the leader shape is dropped, as before
    assert partition.shapes == ["halves"]
    assert lagging.duration == 2.5
    every: Any = registry.build(["partition"], env)[0]
    assert every.shapes == ["halves", "one", "majorities-ring", "bridge"]
