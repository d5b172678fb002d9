"""Partition shapes as pure functions of the nodes, the seed and the leader."""

from __future__ import annotations

import random

import pytest

from nemesis.partition import SHAPES, cuts_for

NODES = ["n1", "n2", "n3", "n4", "n5"]


def reach(cuts: set[tuple[str, str]], nodes: list[str]) -> dict[str, set[str]]:
    """Who hears from whom (including itself)."""
    return {dst: {src for src in nodes if (src, dst) not in cuts} for dst in nodes}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("n", [3, 5])
def test_every_shape_is_deterministic_and_cuts_only_real_links(shape: str, n: int) -> None:
    nodes = NODES[:n]
    one = cuts_for(shape, nodes, random.Random(7), "n2")
    two = cuts_for(shape, nodes, random.Random(7), "n2")
    assert one == two
    assert one[0] and all(a != b and a in nodes and b in nodes for a, b in one[0])


def test_halves_split_into_two_groups_that_hear_only_themselves() -> None:
    cuts, info = cuts_for("halves", NODES, random.Random(1), None)
    small, large = info["groups"]
    assert len(small) == 2 and len(large) == 3
    hears = reach(cuts, NODES)
    for group in (small, large):
        for node in group:
            assert hears[node] == set(group)


def test_leader_shape_isolates_the_leader_both_ways() -> None:
    cuts, info = cuts_for("leader", NODES, random.Random(1), "n4")
    assert info["leader"] == "n4"
    hears = reach(cuts, NODES)
    assert hears["n4"] == {"n4"}
    assert all("n4" not in hears[n] for n in NODES if n != "n4")


@pytest.mark.parametrize("n", [3, 4, 5, 7])
def test_majorities_ring_every_node_hears_a_distinct_majority(n: int) -> None:
    nodes = [f"n{i}" for i in range(1, n + 1)]
    cuts, _ = cuts_for("majorities-ring", nodes, random.Random(3), None)
    hears = reach(cuts, nodes)
    majorities = [frozenset(h) for h in hears.values()]
    assert all(len(m) == n // 2 + 1 for m in majorities)
    assert len(set(majorities)) == n


def test_bridge_one_node_hears_both_sides_which_do_not_hear_each_other() -> None:
    cuts, info = cuts_for("bridge", NODES, random.Random(5), None)
    left, right = info["groups"]
    bridge = info["bridge"]
    hears = reach(cuts, NODES)
    assert hears[bridge] == set(NODES)
    for node in left:
        assert hears[node] == {*left, bridge}
    for node in right:
        assert hears[node] == {*right, bridge}
