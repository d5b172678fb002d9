"""The `targeted` nemesis: each shape's steps, in order, against a fake cluster (network, kill and
start, quorum-state files), what its choice and steps record, and its place in the registry."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from nemesis.base import Env
from nemesis.probes import UNPROVEN
from nemesis.registry import DEFAULT_KINDS, KINDS, available, build
from nemesis.targeted import KIND, SHAPES, STALE_FOLLOWER, VOTE_CRASH, Targeted, Timing

NODES = ["n1", "n2", "n3"]
Call = tuple[Any, ...]


class Cluster:
    """A fake backend and target in one: every lever pulled lands in `calls`, in order, and each
    node's quorum-state is a file under `root` (as the reference node lays it out)."""

    name = "fake"

    def __init__(self, root: Path, leader: str = "n1") -> None:
        self.root = root
        self.leader = leader
        self.calls: list[Call] = []
        self.running = set(NODES)
        # what a (re)start of a node makes the cluster do next: node -> action
        self.on_start: dict[str, Callable[[], None]] = {}

    # backend: CanPartition and the host's view
    def partition(self, blocked: Iterable[tuple[str, str]]) -> None:
        self.calls.append(("cut", frozenset(blocked)))

    def heal(self) -> None:
        self.calls.append(("heal",))

    def is_running(self, node: str) -> bool:
        return node in self.running

    def node_dir(self, node: str) -> str:
        return str(self.root / node)

    # target: CanKill, HasLeader, HasDataDir
    def kill(self, backend: object, node: str) -> None:
        self.running.discard(node)
        self.calls.append(("kill", node))

    def start(self, backend: object, node: str) -> None:
        self.running.add(node)
        self.calls.append(("start", node))
        action = self.on_start.pop(node, None)
        if action is not None:
            action()

    def leaders(self, backend: object, nodes: list[str]) -> dict[str, Any]:
        return {n: self.leader for n in nodes}

    def data_dir(self, backend: object, node: str) -> str:
        return str(self.root / node / "data")

    def data_files(self) -> dict[str, list[str]]:
        return {"quorum-state": ["**/quorum-state"]}

    def state(self, node: str, epoch: int, leader: int = -1, voted: int = -1) -> None:
        path = self.root / node / "data" / "__cluster_metadata-0" / "quorum-state"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"leaderId": leader, "leaderEpoch": epoch, "votedId": voted,
                                    "data_version": 1}) + "\n")


class Clock:
    """Fake time: a sleep moves it on at once."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


TIMING = Timing(lag=(6.0, 6.0), settle=4.0, replicate=1.0, resign=3.5, watch=1.0, grant=0.1,
                poll=0.01)


def _fault(cluster: Cluster, clock: Clock, shapes: tuple[str, ...] = SHAPES) -> Targeted:
    env = Env(cluster, cluster, list(NODES))  # type: ignore[arg-type]
    return Targeted(env, shapes=shapes, timing=TIMING, sleep=clock.sleep, clock=clock)


def _between(a: list[str], b: list[str]) -> frozenset[tuple[str, str]]:
    return frozenset({(x, y) for x in a for y in b} | {(y, x) for x in a for y in b})


def test_stale_follower_cuts_one_follower_off_then_kills_the_leader_and_restarts_the_others(
        tmp_path: Path) -> None:
    cluster, clock = Cluster(tmp_path, leader="n1"), Clock()
    for node in NODES:
        cluster.state(node, 1, leader=1)
    fault = _fault(cluster, clock, shapes=(STALE_FOLLOWER,))
    choice = fault.choose(random.Random(3))
    stale, fresh = choice["stale"], choice["restarted"]
    assert choice["leader"] == "n1" and stale in ("n2", "n3") and fresh == [
        n for n in ("n2", "n3") if n != stale]
    # once back, the restarted follower campaigns and the stale one votes for it
    cluster.on_start[fresh[0]] = lambda: cluster.state(stale, 2, voted=NODES.index(fresh[0]) + 1)
    done = fault.start(choice)
    assert cluster.calls == [
        ("cut", _between([stale], [n for n in NODES if n != stale])),
        ("kill", "n1"), ("kill", fresh[0]), ("kill", stale),
        ("heal",),  # the stale follower's links back, with the leader already dead
        ("start", stale), ("start", fresh[0]),  # the stale one first: it campaigns first
        # the new leader's requests to its voter dropped for a while (BeginQuorumEpoch)
        ("cut", frozenset({(fresh[0], stale)})),
        ("heal",),
    ]
    assert clock.slept == [6.0, 1.0, 4.0]  # the lag, the hold, then the election's aftermath
    assert [s["do"] for s in done["steps"]] == ["cut-off", "kill", "heal", "restart", "hold",
                                                "release", "settled"]
    assert done["steps"][4] == {"at": 6.0, "do": "hold", "voter": stale,
                                "candidate": fresh[0], "epoch": 2}
    assert cluster.running == {stale, fresh[0]}  # the leader stays down until the stop
    assert fault.stop() == {"healed": "all", "restarted": ["n1"], "evidence": UNPROVEN}
    assert cluster.calls[-1] == ("start", "n1")


def test_stale_follower_holds_a_new_leader_whose_vote_was_forgotten(tmp_path: Path) -> None:
    cluster, clock = Cluster(tmp_path, leader="n1"), Clock()
    for node in NODES:
        cluster.state(node, 1, leader=1)
    fault = _fault(cluster, clock, shapes=(STALE_FOLLOWER,))
    choice = fault.choose(random.Random(3))
    stale, (fresh,) = choice["stale"], choice["restarted"]
    me = NODES.index(fresh) + 1

    def elected() -> None:  # forget-vote: the voter's file names nobody, the leader's itself
        cluster.state(stale, 2)
        cluster.state(fresh, 2, leader=me, voted=me)
    cluster.on_start[fresh] = elected
    done = fault.start(choice)
    assert cluster.calls[-2:] == [("cut", frozenset({(fresh, stale)})), ("heal",)]
    assert done["steps"][4] == {"at": 6.0, "do": "hold", "voter": stale, "candidate": fresh,
                                "epoch": 2}


def test_stale_follower_without_a_vote_holds_nothing(tmp_path: Path) -> None:
    cluster, clock = Cluster(tmp_path, leader="n1"), Clock()
    for node in NODES:
        cluster.state(node, 1, leader=1)
    fault = _fault(cluster, clock, shapes=(STALE_FOLLOWER,))
    done = fault.start(fault.choose(random.Random(3)))
    assert [s["do"] for s in done["steps"]] == ["cut-off", "kill", "heal", "restart", "no-vote",
                                                "settled"]
    assert cluster.calls[-1][0] == "start"


def _three_in_epoch_1(cluster: Cluster) -> None:
    for node in NODES:
        cluster.state(node, 1, leader=1)


def _campaign(cluster: Cluster, voted: int) -> None:
    """Once the voter n2 is back: n1 is first a candidate of epoch 2; once cut from n2, n2 votes
    for n3 (persisted, or forgotten), and n3 leads epoch 2."""
    partition = cluster.partition

    def cut(blocked: Iterable[tuple[str, str]]) -> None:
        partition(blocked)
        if ("n1", "n2") in set(blocked) and cluster.calls.count(("start", "n2")) == 1:
            cluster.state("n2", 2, voted=voted)
            cluster.state("n3", 2, leader=3, voted=3)
    cluster.on_start["n2"] = lambda: cluster.state("n1", 2, voted=1)
    cluster.partition = cut  # type: ignore[method-assign]


@pytest.mark.parametrize("voted", [3, -1])  # as persisted, and as forget-vote leaves it
def test_vote_crash_crashes_the_voter_after_its_vote_and_makes_the_loser_ask_again(
        tmp_path: Path, voted: int) -> None:
    cluster, clock = Cluster(tmp_path, leader="n1"), Clock()
    _three_in_epoch_1(cluster)
    fault = _fault(cluster, clock, shapes=(VOTE_CRASH,))
    choice = fault.choose(random.Random(1))
    assert choice["voter"] == "n2" and choice["sides"] == [["n1"], ["n3"]]
    _campaign(cluster, voted)
    done = fault.start(choice)
    apart = _between(["n1"], ["n3"])
    assert cluster.calls == [
        ("kill", "n2"),
        ("cut", apart),  # after a while, so that n3 holds more than n2
        ("start", "n2"),  # no recent fetch: it grants pre-votes at once
        ("cut", apart | {("n1", "n2")}),  # n1, a candidate first: its Vote never reaches n2
        # n2's new epoch seen: no candidate's traffic reaches it any more (n3's BeginQuorumEpoch)
        ("cut", apart | {("n1", "n2"), ("n3", "n2")}),
        ("kill", "n2"),
        ("cut", apart | _between(["n3"], ["n2"])),  # the loser reaches it again, the winner not
        ("start", "n2"),
        ("kill", "n1"), ("start", "n1"),  # a candidate of epoch 2, asking again when it is back
    ]
    assert clock.slept[:2] == [1.0, 3.5] and clock.slept[-1] == 4.0
    assert 0.1 in clock.slept  # the vote leaves before n2 dies
    steps = {s["do"]: s for s in done["steps"]}
    assert steps["hold"] == {"at": 4.5, "do": "hold", "candidate": "n1", "epoch": 2}
    assert steps["voted"]["state"]["leaderEpoch"] == 2
    assert steps["kill"]["winners"] == ["n3"] and steps["kill"]["losers"] == ["n1"]
    fault.stop()
    assert cluster.calls[-1] == ("heal",) and cluster.running == set(NODES)


class SlowCluster(Cluster):
    """A fake backend that can also delay links (CanDelay), as the local one can."""

    def delay(self, links: Iterable[tuple[str, str]], seconds: float) -> None:
        self.calls.append(("delay", frozenset(links), seconds))


def test_vote_crash_delays_the_candidates_to_the_voter_while_they_campaign(
        tmp_path: Path) -> None:
    """The first candidate's Vote leaves a few ms after the watch can see its candidacy: held on
    the way, it is still dropped by the cut that follows. Lifted once the voter is down."""
    cluster, clock = SlowCluster(tmp_path, leader="n1"), Clock()
    _three_in_epoch_1(cluster)
    fault = _fault(cluster, clock, shapes=(VOTE_CRASH,))
    choice = fault.choose(random.Random(1))
    _campaign(cluster, 3)
    done = fault.start(choice)
    late = ("delay", frozenset({("n1", "n2"), ("n3", "n2")}), TIMING.late)
    assert cluster.calls.index(late) == cluster.calls.index(("start", "n2")) - 1
    lifted = cluster.calls.index(("delay", frozenset(), 0))
    assert cluster.calls[lifted - 1] == ("kill", "n2")  # the voter's second crash, then lifted
    assert [c[0] for c in cluster.calls].count("delay") == 2
    assert [c for c in cluster.calls if c[0] != "delay"] == [
        ("kill", "n2"), ("cut", _between(["n1"], ["n3"])), ("start", "n2"),
        ("cut", _between(["n1"], ["n3"]) | {("n1", "n2")}),
        ("cut", _between(["n1"], ["n3"]) | {("n1", "n2"), ("n3", "n2")}),
        ("kill", "n2"), ("cut", _between(["n1"], ["n3"]) | _between(["n3"], ["n2"])),
        ("start", "n2"), ("kill", "n1"), ("start", "n1")]
    steps = {s["do"]: s for s in done["steps"]}
    assert steps["late"] == {"at": 4.5, "do": "late", "nodes": ["n1", "n3"], "to": "n2",
                             "seconds": TIMING.late}


@pytest.mark.parametrize("can_delay", [False, True])
def test_vote_crash_gives_up_when_only_the_voter_campaigns(tmp_path: Path, can_delay: bool) -> None:
    cluster, clock = (SlowCluster if can_delay else Cluster)(tmp_path, leader="n1"), Clock()
    _three_in_epoch_1(cluster)
    fault = _fault(cluster, clock, shapes=(VOTE_CRASH,))
    choice = fault.choose(random.Random(1))
    cluster.on_start["n2"] = lambda: cluster.state("n2", 2, voted=2)
    done = fault.start(choice)
    assert cluster.calls[-1] == ("start", "n2")  # no second crash: it voted for nobody else
    assert done["steps"][-1] == {"at": pytest.approx(5.5, abs=0.2), "do": "no-vote",
                                 "why": "no candidate past epoch 1"}
    fault.stop()
    # the early end leaves the delay in place: the stop lifts it
    lifted = [("delay", frozenset(), 0)] if can_delay else []
    assert cluster.calls[-1 - len(lifted):] == [("heal",), *lifted]


def test_vote_crash_gives_up_when_the_voter_never_moves_on(tmp_path: Path) -> None:
    cluster, clock = Cluster(tmp_path, leader="n1"), Clock()
    _three_in_epoch_1(cluster)
    fault = _fault(cluster, clock, shapes=(VOTE_CRASH,))
    cluster.on_start["n2"] = lambda: cluster.state("n1", 2, voted=1)
    done = fault.start(fault.choose(random.Random(1)))
    assert done["steps"][-1] == {"at": pytest.approx(5.5, abs=0.2), "do": "no-vote",
                                 "why": "n2's epoch stayed at 1"}
    assert clock.now == pytest.approx(1.0 + 3.5 + TIMING.watch, abs=0.2)
    assert fault.stop()["restarted"] == [] and cluster.calls[-1] == ("heal",)


def test_shapes_take_turns_in_a_seeded_round_and_a_run_without_leader_is_skipped(
        tmp_path: Path) -> None:
    def drawn(seed: int) -> list[dict[str, Any]]:
        fault = _fault(Cluster(tmp_path, leader="n2"), Clock())
        rng = random.Random(seed)
        return [fault.choose(rng) for _ in range(4)]
    first = drawn(7)
    assert first == drawn(7)  # every choice from the seed (and the leader the target names)
    assert sorted(c["shape"] for c in first[:2]) == sorted(SHAPES)
    assert sorted(c["shape"] for c in first[2:]) == sorted(SHAPES)
    cluster, clock = Cluster(tmp_path, leader="nobody"), Clock()
    fault = _fault(cluster, clock)
    done = fault.start(fault.choose(random.Random(1)))
    assert done["leader"] is None and done["steps"][0]["do"] == "skip" and cluster.calls == []


def test_registry_offers_it_by_name_only_where_the_levers_exist(tmp_path: Path) -> None:
    assert KIND in KINDS and KIND not in DEFAULT_KINDS
    cluster = Cluster(tmp_path)
    env = Env(cluster, cluster, list(NODES))  # type: ignore[arg-type]
    (fault,) = build([KIND], env)
    assert isinstance(fault, Targeted) and fault.instant

    class NoData(Cluster):
        data_dir = None  # type: ignore[assignment]
    assert available(cluster, cluster)[KIND] is None  # type: ignore[arg-type]
    assert "where its data is" in (available(cluster, NoData(tmp_path))[KIND] or "")  # type: ignore[arg-type]
