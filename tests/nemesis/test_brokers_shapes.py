"""With brokers: the `broker` partition shape, and the quorum's shapes and targets over the
controllers alone (nemesis/partition.py, nemesis/base.py, nemesis/registry.py)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from nemesis.base import Env, pick_nodes
from nemesis.partition import SHAPES, Partition, cuts_for
from nemesis.process import Kill
from nemesis.registry import build

CONTROLLERS = ["n1", "n2", "n3"]
BROKERS = ["n4", "n5"]
NODES = CONTROLLERS + BROKERS


def test_the_broker_shape_cuts_one_broker_off_every_controller_and_nothing_else() -> None:
    seen = set()
    for seed in range(20):
        cuts, info = cuts_for("broker", NODES, random.Random(seed), "n1", BROKERS)
        broker = info["broker"]
        assert broker in BROKERS and info["isolated"] == broker
        assert cuts == {(broker, c) for c in CONTROLLERS} | {(c, broker) for c in CONTROLLERS}
        assert info["groups"] == [[broker], CONTROLLERS]
        seen.add(broker)
    assert seen == set(BROKERS)  # either broker may be drawn


@pytest.mark.parametrize("shape", [s for s in SHAPES if s not in ("one", "broker")])
def test_the_quorum_shapes_leave_the_brokers_links_whole(shape: str) -> None:
    for seed in range(10):
        cuts, _ = cuts_for(shape, NODES, random.Random(seed), "n2", BROKERS)
        assert cuts and all(a in CONTROLLERS and b in CONTROLLERS for a, b in cuts)


def test_without_brokers_the_shapes_draw_as_before() -> None:
    for shape in SHAPES:
        assert cuts_for(shape, NODES, random.Random(3), "n2") == \
            cuts_for(shape, NODES, random.Random(3), "n2", ())


def test_one_may_isolate_a_broker() -> None:
    isolated = {cuts_for("one", NODES, random.Random(s), None, BROKERS)[1]["isolated"]
                for s in range(40)}
    assert isolated & set(BROKERS) and isolated & set(CONTROLLERS)


def test_minority_majority_and_an_unknown_leader_are_drawn_over_the_controllers() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        assert set(pick_nodes("minority", NODES, rng, None, CONTROLLERS)) <= set(CONTROLLERS)
        majority = pick_nodes("majority", NODES, rng, None, CONTROLLERS)
        assert len(majority) == 2 and set(majority) <= set(CONTROLLERS)
        assert pick_nodes("leader", NODES, rng, None, CONTROLLERS)[0] in CONTROLLERS
    assert pick_nodes("all", NODES, random.Random(1), None, CONTROLLERS) == NODES
    ones = {pick_nodes("one", NODES, random.Random(s), None, CONTROLLERS)[0] for s in range(40)}
    assert ones & set(BROKERS)


class Net:
    name = "fake"

    def __init__(self) -> None:
        self.cut: list[tuple[str, str]] = []

    def partition(self, blocked: Any) -> None:
        self.cut = sorted(blocked)

    def heal(self) -> None:
        self.cut = []

    def is_running(self, node: str) -> bool:
        return True


class Leading:
    """A DB whose controllers all name n1 and that can kill."""

    def leaders(self, backend: Any, nodes: list[str]) -> dict[str, str | None]:
        return {n: "n1" for n in nodes if n in CONTROLLERS}

    def kill(self, backend: Any, node: str) -> None: ...


def test_the_partition_nemesis_draws_the_broker_shape_only_when_there_are_brokers() -> None:
    with_brokers = build(["partition"], Env(Net(), Leading(), NODES,  # type: ignore[arg-type]
                                            brokers=BROKERS))
    assert isinstance(with_brokers[0], Partition) and "broker" in with_brokers[0].shapes
    without = build(["partition"], Env(Net(), Leading(), CONTROLLERS))  # type: ignore[arg-type]
    assert isinstance(without[0], Partition) and "broker" not in without[0].shapes


def test_a_drawn_broker_partition_cuts_the_backend_links() -> None:
    net = Net()
    fault = Partition(Env(net, Leading(), NODES, brokers=BROKERS),  # type: ignore[arg-type]
                      ["broker"])
    choice = fault.choose(random.Random(4))
    fault.start(choice)
    broker = choice["broker"]
    assert set(net.cut) == {(broker, c) for c in CONTROLLERS} | {(c, broker) for c in CONTROLLERS}
    fault.stop()
    assert net.cut == []


def test_kill_minority_never_takes_a_broker_for_the_quorum() -> None:
    fault = Kill(Env(Net(), Leading(), NODES, brokers=BROKERS),  # type: ignore[arg-type]
                 ["minority", "leader"])
    for seed in range(20):
        choice = fault.choose(random.Random(seed))
        assert set(choice["nodes"]) <= set(CONTROLLERS)
        if choice["target"] == "leader":
            assert choice["nodes"] == ["n1"]
