"""The `membership` nemesis: which change it draws, that it keeps a majority of the initial voters,
that it removes the leader, and what the history says; against a fake quorum that changes its
voters as a KIP-853 leader would."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from contracts.history import History
from contracts.target import CanChangeMembership
from nemesis.base import Env, NoEffect
from nemesis.membership import Membership, Plan, min_voters, plan
from nemesis.registry import DEFAULT_KINDS, KINDS, available, build
from nemesis.schedule import Schedule

INITIAL = ["n1", "n2", "n3", "n4", "n5"]
NODES = [*INITIAL, "n6", "n7"]


class Hosts:
    """The backend: which nodes run."""

    name = "fake"

    def __init__(self, nodes: list[str]) -> None:
        self.running = set(nodes)

    def is_running(self, node: str) -> bool:
        return node in self.running


class Quorum:
    """A target whose voters change as the leader answers: one change at a time, the leader
    resigns after removing itself (the next voter in name order leads)."""

    def __init__(self, hosts: Hosts, voters: list[str], leader: str) -> None:
        self.hosts = hosts
        self.voters = list(voters)
        self.leader: str | None = leader
        self.epoch = 1
        self.calls: list[tuple[str, str]] = []
        self.refuse: str | None = None  # an error name every change gets, when set
        self.directory_ids = {n: f"dir-{n}" for n in NODES}

    def use_spares(self, spares: list[str], directory_ids: dict[str, str]) -> None:
        self.calls.append(("use_spares", ",".join(spares)))

    def quorum(self, backend: Any, nodes: list[str]) -> dict[str, Any] | None:
        return {"leader": self.leader, "epoch": self.epoch, "voters": sorted(self.voters),
                "observers": sorted(n for n in nodes if n not in self.voters),
                "directory_ids": {n: f"dir-{n}" for n in nodes}}

    def add_voter(self, backend: Any, nodes: list[str], node: str) -> str:
        self.calls.append(("add", node))
        if self.refuse:
            return self.refuse
        if node in self.voters:
            return "duplicate-voter"
        self.voters.append(node)
        return "ok"

    def remove_voter(self, backend: Any, nodes: list[str], node: str) -> str:
        self.calls.append(("remove", node))
        if self.refuse:
            return self.refuse
        if node not in self.voters:
            return "voter-not-found"
        self.voters.remove(node)
        if node == self.leader:  # the removed leader resigns once the change commits
            self.epoch += 1
            self.leader = sorted(self.voters)[0]
        return "ok"

    # the DB's start and stop, for `restart`
    def stop(self, backend: Any, node: str) -> None:
        self.calls.append(("stop", node))
        self.hosts.running.discard(node)

    def start(self, backend: Any, node: str) -> None:
        self.calls.append(("start", node))
        self.hosts.running.add(node)


def _fault(leader: str = "n2") -> tuple[Membership, Quorum, Hosts]:
    hosts = Hosts(NODES)
    quorum = Quorum(hosts, INITIAL, leader)
    fault = Membership(Env(hosts, quorum, list(NODES)), initial_voters=len(INITIAL))  # type: ignore[arg-type]
    return fault, quorum, hosts


def test_the_floor_is_a_majority_of_the_initial_voters() -> None:
    assert [min_voters(n) for n in (1, 2, 3, 4, 5, 7)] == [1, 2, 2, 3, 3, 4]


@pytest.mark.parametrize("seed", range(30))
def test_a_long_run_of_changes_never_leaves_fewer_than_three_of_five(seed: int) -> None:
    fault, quorum, _ = _fault()
    rng = random.Random(seed)
    ops = []
    for _ in range(60):
        done = fault.start(fault.choose(rng))
        ops.append(done["op"])
        assert done["result"] == "ok"
        assert len(quorum.voters) >= 3
        assert set(quorum.voters) <= set(NODES)
        fault.stop()
    # every kind of change is drawn in a long run
    assert set(ops) == {"add", "remove", "restart"}


def test_at_the_floor_only_an_add_or_a_restart_is_drawn() -> None:
    state = Plan(floor=3)
    quorum = {"leader": "n1", "voters": ["n1", "n2", "n3"]}
    for seed in range(50):
        choice = plan(quorum, NODES, set(NODES), state, random.Random(seed))
        assert choice is not None and choice["op"] == "add"
        assert choice["node"] in {"n4", "n5", "n6", "n7"}


def test_only_running_non_voters_are_added() -> None:
    quorum = {"leader": "n1", "voters": ["n1", "n2", "n3"]}
    running = {"n1", "n2", "n3", "n6"}
    chosen = {plan(quorum, NODES, running, Plan(floor=3), random.Random(s))["node"]  # type: ignore[index]
              for s in range(50)}
    assert chosen == {"n6"}


def test_nothing_to_do_without_voters_or_when_every_node_is_needed() -> None:
    assert plan({"leader": None, "voters": []}, NODES, set(NODES), Plan(3), random.Random(0)) \
        is None
    three = {"leader": "n1", "voters": ["n1", "n2", "n3"]}
    assert plan(three, ["n1", "n2", "n3"], {"n1", "n2", "n3"}, Plan(3), random.Random(0)) is None


def test_the_leader_is_removed_first_then_it_is_one_choice_among_others() -> None:
    quorum = {"leader": "n4", "voters": ["n1", "n2", "n3", "n4"]}
    state = Plan(floor=3)
    state.removed.add("n5")  # an add and a restart are possible too
    for seed in range(100):
        # until a leader's removal succeeded: every change is the leader's removal
        choice = plan(quorum, INITIAL, set(INITIAL), state, random.Random(seed))
        assert choice is not None and (choice["op"], choice["node"]) == ("remove", "n4")
    # ... unless the voters are at the floor, or no leader is known
    at_floor = {"leader": "n1", "voters": ["n1", "n2", "n3"]}
    assert plan(at_floor, INITIAL, set(INITIAL), state, random.Random(0))["op"] != "remove"  # type: ignore[index]
    leaderless = [plan({"leader": None, "voters": INITIAL[:4]}, INITIAL, set(INITIAL), state,
                       random.Random(s)) for s in range(30)]
    assert {c["op"] for c in leaderless if c is not None} == {"add", "remove", "restart"}
    quorum = {"leader": "n4", "voters": INITIAL}
    state.leader_removed = True
    later = [plan(quorum, INITIAL, set(INITIAL), state, random.Random(s)) for s in range(300)]
    removed = [c["node"] for c in later if c is not None and c["op"] == "remove"]
    assert "n4" in removed and set(removed) - {"n4"}
    assert 0.15 < removed.count("n4") / len(removed) < 0.55


def test_removing_the_leader_is_recorded_and_counted() -> None:
    fault, _, _ = _fault(leader="n3")
    rng = random.Random(1)
    while True:
        choice = fault.choose(rng)
        if choice["op"] == "remove":
            break
    assert choice["node"] == "n3" and choice["leader"] == "n3"
    assert choice["voters"] == INITIAL and choice["directory_id"] == "dir-n3"
    done = fault.start(choice)
    assert done["result"] == "ok" and fault.leader_removals == 1
    assert fault.state.leader_removed and "n3" in fault.state.removed
    after = fault.stop()
    assert "n3" not in after["voters"] and after["leader"] == "n1"


def test_a_refused_change_is_no_effect_with_the_answer_and_changes_nothing(
        tmp_path: Path) -> None:
    fault, quorum, _ = _fault()
    quorum.refuse = "request-timed-out"
    choice = {"op": "remove", "node": "n2", "nodes": ["n2"], "leader": "n2", "voters": INITIAL}
    with pytest.raises(NoEffect) as refused:
        fault.start(choice)
    assert refused.value.seen["result"] == "request-timed-out"
    assert refused.value.evidence == {"n2": "request-timed-out; a voter in the quorum after"}
    assert fault.leader_removals == 0 and not fault.state.removed
    assert quorum.voters == INITIAL
    # the history: info, no-effect, with the answer the membership checker reads
    history = History(tmp_path / "history.jsonl")
    schedule = Schedule([fault], interval=0.01, seed=3, history=history)
    schedule._do(fault, "start")
    [_invoke, done] = history.ops()
    assert (done["type"], done["error"]) == ("info", "no-effect")
    assert done["value"]["result"] == "request-timed-out"
    assert "did not make the change" in done["detail"]
    assert fault.kind not in schedule.active  # nothing to stop


def test_a_change_answered_badly_that_the_quorum_shows_took_effect() -> None:
    fault, quorum, _ = _fault()
    answered = quorum.add_voter

    def timed_out(backend: Any, nodes: list[str], node: str) -> str:
        answered(backend, nodes, node)  # committed, but the answer was lost
        return "timeout"

    quorum.add_voter = timed_out  # type: ignore[method-assign]
    done = fault.start({"op": "add", "node": "n6", "nodes": ["n6"], "leader": "n1",
                        "voters": INITIAL})
    assert done["result"] == "timeout"
    assert done["evidence"] == {"n6": "timeout; a voter in the quorum after"}
    assert "n6" in done["quorum"]["voters"]


def test_a_change_is_proved_by_the_quorum_after_it() -> None:
    fault, _, _ = _fault()
    done = fault.start({"op": "remove", "node": "n3", "nodes": ["n3"], "leader": "n1",
                        "voters": INITIAL})
    assert done["result"] == "ok" and done["evidence"] == {"n3": "ok; not a voter in the "
                                                                 "quorum after"}
    assert done["quorum"]["voters"] == ["n1", "n2", "n4", "n5"]


def test_a_removed_node_is_restarted_as_an_observer_once() -> None:
    fault, quorum, hosts = _fault()
    fault.state.leader_removed = True  # else a removal of the leader comes first
    fault.start({"op": "remove", "node": "n5", "nodes": ["n5"], "leader": "n2",
                 "voters": INITIAL})
    choices = [plan(quorum.quorum(None, NODES) or {}, NODES, hosts.running, fault.state,
                    random.Random(s)) for s in range(40)]
    restarts = {c["node"] for c in choices if c is not None and c["op"] == "restart"}
    assert restarts == {"n5"}
    done = fault.start({"op": "restart", "node": "n5", "nodes": ["n5"], "leader": "n2",
                        "voters": quorum.voters})
    assert done["result"] == "ok"
    assert quorum.calls[-2:] == [("stop", "n5"), ("start", "n5")]
    assert "n5" in hosts.running and "n5" not in fault.state.removed


def test_heal_starts_every_node_that_is_down() -> None:
    fault, quorum, hosts = _fault()
    hosts.running -= {"n2", "n7"}
    fault.heal()
    assert hosts.running == set(NODES)
    assert sorted(c for c in quorum.calls if c[0] == "start") == [("start", "n2"),
                                                                   ("start", "n7")]


def test_the_schedule_records_each_change_and_the_quorum_after_it(tmp_path: Path) -> None:
    fault, quorum, _ = _fault()
    history = History(tmp_path / "history.jsonl")
    schedule = Schedule([fault], interval=0.01, seed=3, history=history)
    for _ in range(6):
        schedule._do(fault, "stop" if fault.kind in schedule.active else "start")
    ops = history.ops()
    assert [op["f"] for op in ops] == ["start-membership"] * 2 + ["stop-membership"] * 2 \
        + ["start-membership"] * 2 + ["stop-membership"] * 2 \
        + ["start-membership"] * 2 + ["stop-membership"] * 2
    starts = [op for op in ops if op["f"] == "start-membership" and op["type"] == "ok"]
    assert all(op["value"]["result"] == "ok" and op["value"]["nodes"] == [op["value"]["node"]]
               for op in starts)
    assert all("wall" in op for op in ops)
    stops = [op for op in ops if op["f"] == "stop-membership" and op["type"] == "ok"]
    assert stops[-1]["value"]["voters"] == sorted(quorum.voters)


def test_a_step_without_a_quorum_or_a_possible_change_is_no_effect() -> None:
    fault, quorum, _ = _fault()
    described = quorum.quorum
    quorum.quorum = lambda backend, nodes: None  # type: ignore[method-assign]
    choice = fault.choose(random.Random(0))
    assert choice["op"] == "none" and "describe the quorum" in choice["reason"]
    with pytest.raises(NoEffect, match="no node could describe the quorum"):
        fault.start(choice)
    assert quorum.calls == []  # nothing was asked of the quorum
    # every node votes, none may go (a floor of 7): nothing to do
    quorum.quorum = described  # type: ignore[method-assign]
    quorum.voters = list(NODES)
    fault.state.floor = 7
    choice = fault.choose(random.Random(0))
    assert choice["op"] == "none"
    with pytest.raises(NoEffect, match="no change possible"):
        fault.start(choice)


def test_registry_offers_membership_only_to_a_target_that_can_change_voters() -> None:
    hosts = Hosts(NODES)
    assert "membership" in KINDS and "membership" not in DEFAULT_KINDS
    assert available(hosts, Quorum(hosts, INITIAL, "n1"))["membership"] is None  # type: ignore[arg-type]
    assert "cannot change its voters" in str(available(hosts, object())["membership"])  # type: ignore[arg-type]
    assert isinstance(Quorum(hosts, INITIAL, "n1"), CanChangeMembership)
    env = Env(hosts, Quorum(hosts, INITIAL, "n1"), list(NODES))  # type: ignore[arg-type]
    [fault] = build(["membership"], env, initial_voters=5)
    assert isinstance(fault, Membership) and fault.state.floor == 3


def test_the_schedule_stops_each_change_in_the_turn_it_starts(tmp_path: Path) -> None:
    fault, _, _ = _fault()
    history = History(tmp_path / "history.jsonl")
    schedule = Schedule([fault], interval=0.02, seed=5, history=history)
    schedule.start()
    deadline = time.monotonic() + 5
    while len([op for op in history.ops() if op["f"] == "stop-membership"]) < 6 \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    schedule.stop()
    done = [op["f"] for op in history.ops() if op["type"] == "ok"]
    pairs = len(done) // 2
    assert pairs >= 3 and done[:2 * pairs] == ["start-membership", "stop-membership"] * pairs
    assert not schedule.active  # nothing left to stop at the end
    changes = [op["value"]["op"] for op in history.ops()
               if op["f"] == "start-membership" and op["type"] == "ok"]
    assert changes[0] == "remove" and len(changes) == pairs


def test_an_add_sometimes_goes_with_a_concurrent_removal_of_a_follower() -> None:
    state = Plan(3)
    quorum = {"leader": "n2", "voters": INITIAL}
    state.leader_removed = True  # removals are then drawn freely
    pairs = []
    rng = random.Random(7)
    for _ in range(400):
        choice = plan(quorum, NODES, set(NODES), state, rng)
        assert choice is not None
        if "also" in choice:
            pairs.append(choice)
    assert pairs, "no add was ever paired with a removal"
    for choice in pairs:
        assert choice["op"] == "add" and choice["also"]["op"] == "remove"
        assert choice["also"]["node"] in INITIAL and choice["also"]["node"] != "n2"
        assert choice["nodes"] == [choice["node"], choice["also"]["node"]]
    # at the floor no removal may go with an add
    at_floor = {"leader": "n1", "voters": ["n1", "n2", "n3"]}
    for _ in range(200):
        choice = plan(at_floor, NODES, set(NODES), state, rng)
        assert choice is not None and "also" not in choice


def test_a_paired_change_sends_both_and_records_each_result() -> None:
    fault, quorum, _ = _fault(leader="n1")
    done = fault.start({"op": "add", "node": "n6", "nodes": ["n6", "n4"], "leader": "n1",
                        "voters": INITIAL, "also": {"op": "remove", "node": "n4"}})
    assert sorted(quorum.calls) == [("add", "n6"), ("remove", "n4")]
    assert done["result"] == "ok" and done["also"] == {"op": "remove", "node": "n4",
                                                       "result": "ok"}
    assert "n4" in fault.state.removed and sorted(quorum.voters) == ["n1", "n2", "n3", "n5", "n6"]
