"""The `lagging-follower` nemesis: which node it cuts, for how long, what the history says, and how
it shares the network with the partition nemesis."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import Any

import pytest

from contracts.history import History
from nemesis.base import Env, Fault
from nemesis.lagging import DURATION, LaggingFollower
from nemesis.links import Links
from nemesis.partition import Partition, cuts_for
from nemesis.probes import UNPROVEN
from nemesis.registry import DEFAULT_KINDS, KINDS, available, build
from nemesis.schedule import Schedule

NODES = ["n1", "n2", "n3", "n4", "n5"]


class Net:
    """A backend's network lever: what is cut now, and every call made."""

    name = "fake"

    def __init__(self) -> None:
        self.blocked: set[tuple[str, str]] = set()
        self.calls: list[str] = []

    def partition(self, blocked: Iterable[tuple[str, str]]) -> None:
        self.blocked = set(blocked)  # replaces, as CanPartition says
        self.calls.append("partition")

    def heal(self) -> None:
        self.blocked = set()
        self.calls.append("heal")


class Leading:
    """A target that names `leader` as the leader (HasLeader)."""

    def __init__(self, leader: str) -> None:
        self.leader = leader

    def leaders(self, backend: object, nodes: list[str]) -> dict[str, Any]:
        return {n: self.leader for n in nodes}


def _env(net: Net, leader: str = "n2") -> Env:
    return Env(net, Leading(leader), list(NODES))  # type: ignore[arg-type]


def _hears(cuts: Iterable[tuple[str, str]], node: str) -> set[str]:
    cut = set(cuts)
    return {src for src in NODES if (src, node) not in cut}


@pytest.mark.parametrize("seed", range(20))
def test_the_follower_shape_isolates_a_node_that_is_not_the_leader(seed: int) -> None:
    cuts, info = cuts_for("follower", NODES, random.Random(seed), "n3")
    lagging = info["isolated"]
    assert lagging != "n3" and info["leader"] == "n3"
    assert _hears(cuts, lagging) == {lagging}
    assert all(lagging not in _hears(cuts, n) for n in NODES if n != lagging)
    # the rest keep a quorum among themselves
    assert all(_hears(cuts, n) == set(NODES) - {lagging} for n in NODES if n != lagging)


def test_without_a_known_leader_any_node_may_lag() -> None:
    chosen = {cuts_for("follower", NODES, random.Random(s), None)[1]["isolated"]
              for s in range(50)}
    assert chosen == set(NODES)


def test_start_and_stop_record_the_node_the_leader_and_the_duration() -> None:
    net = Net()
    fault = LaggingFollower(_env(net, leader="n1"), duration=7.5)
    choice = fault.choose(random.Random(4))
    assert choice["node"] != "n1" and choice["leader"] == "n1"
    assert choice["duration"] == 7.5 and choice["shape"] == "follower"
    assert fault.hold == 7.5
    # a backend that cannot probe leaves the cuts unproven (nemesis/probes.py)
    assert fault.start(choice) == {**choice, "evidence": UNPROVEN}
    assert net.blocked == {(a, b) for a, b in choice["cut"]} and net.blocked
    stopped = fault.stop()
    assert stopped["node"] == choice["node"] and stopped["away"] >= 0
    assert net.blocked == set()


def test_a_duration_that_is_not_positive_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="lagging-follower: the duration must be a positive"):
        LaggingFollower(_env(Net()), duration=0)


def test_the_partition_stop_keeps_the_lagging_followers_cuts() -> None:
    net = Net()
    env = _env(net)
    links = Links(net)
    partition = Partition(env, ["halves"], links)
    lagging = LaggingFollower(env, 10.0, links)
    lag = lagging.choose(random.Random(1))
    lagging.start(lag)
    part = partition.choose(random.Random(2))
    partition.start(part)
    both = {(a, b) for a, b in lag["cut"]} | {(a, b) for a, b in part["cut"]}
    assert net.blocked == both
    assert partition.stop() == {"healed": "partition", "evidence": UNPROVEN}
    assert net.blocked == {(a, b) for a, b in lag["cut"]}  # the follower is still away
    lagging.heal()
    assert net.blocked == set() and net.calls[-1] == "heal"
    partition.heal()  # idempotent
    assert net.blocked == set()


def test_the_registry_knows_it_but_runs_it_only_when_asked() -> None:
    assert "lagging-follower" in KINDS and "lagging-follower" not in DEFAULT_KINDS
    assert available(Net(), Leading("n1"))["lagging-follower"] is None  # type: ignore[arg-type]
    faults = build(["partition", "lagging-follower"], _env(Net()), {"lagging_duration": 3.0})
    lagging = faults[1]
    assert isinstance(lagging, LaggingFollower) and lagging.duration == 3.0
    partition = faults[0]
    assert isinstance(partition, Partition) and partition.links is lagging.links
    assert build(["lagging-follower"], _env(Net()))[0].hold == DURATION  # type: ignore[attr-defined]


class Step(Fault):
    """A fault that only records its steps."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def choose(self, rng: random.Random) -> dict[str, Any]:
        return {"nodes": ["n1"]}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        return choice

    def stop(self) -> dict[str, Any]:
        return {}

    def heal(self) -> None:
        pass


def _run(faults: list[Fault], seconds: float) -> list[dict[str, Any]]:
    history = History()
    schedule = Schedule(faults, 0.05, seed=3, history=history)
    schedule.start()
    time.sleep(seconds)
    schedule.stop()
    schedule.heal_all()
    return history.ops()


def test_the_schedule_holds_it_for_its_duration_while_other_kinds_step() -> None:
    net = Net()
    lagging = LaggingFollower(_env(net), duration=0.6)
    ops = _run([lagging, Step("pause")], 1.0)
    starts = [op for op in ops if op["f"] == "start-lagging-follower"]
    stops = [op for op in ops if op["f"] == "stop-lagging-follower"]
    assert starts and [op["type"] for op in starts] == ["invoke", "ok"] * (len(starts) // 2)
    first_start = next(op for op in starts if op["type"] == "ok")
    first_stop = next(op for op in stops if op["type"] == "invoke")
    assert first_stop["time"] - first_start["time"] >= 0.6e9
    # the pause kind went on stepping meanwhile (at 0.05 s, several times)
    during = [op for op in ops if op["f"].endswith("-pause") and op["type"] == "ok"
              and first_start["time"] < op["time"] < first_stop["time"]]
    assert len(during) >= 3
    invoke = next(op for op in starts if op["type"] == "invoke")
    assert invoke["process"] == "nemesis" and "wall" in invoke
    assert invoke["value"]["duration"] == 0.6 and invoke["value"]["node"] != "n2"
    done = next(op for op in stops if op["type"] == "ok")
    assert done["value"]["node"] == invoke["value"]["node"] and done["value"]["away"] >= 0.6
    assert net.blocked == set()  # healed at the end


def test_the_end_of_the_run_stops_it_before_its_duration() -> None:
    net = Net()
    ops = _run([LaggingFollower(_env(net), duration=60.0)], 0.3)
    fs = [op["f"] for op in ops if op["type"] == "ok"]
    assert fs == ["start-lagging-follower", "stop-lagging-follower"]
    assert net.blocked == set()
