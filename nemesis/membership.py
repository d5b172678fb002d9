"""`membership`: voters added and removed while the cluster runs (KIP-853).

Theory of operation. A target that keeps its voters in the log
(`contracts.target.CanChangeMembership`) is deployed with spare nodes (the `spares` option)
beside its initial voters: formatted without voters, they start as observers that fetch from the
quorum. Each start of this fault asks the quorum who votes and who leads (DescribeQuorum), then
makes one change, drawn by `plan`: `add` a node that is not a voter, `remove` a voter (the leader
itself often: KAFKA-16530), sometimes both at once (one must be refused), or `restart` a removed
node. The voters never fall below a majority of the initial ones, nor grow past every node deployed.

The fault is `instant`: the schedule stops it in the turn it starts it, so that every turn makes
a change and its window is the change itself. The stop changes nothing back (membership is not
undone): it records the quorum as it then is, so that the history shows each change's effect.
`heal` starts every node that is not running, so that the final reads find them all; it does not
add removed nodes back.

Details (how `plan` draws, what the history records): docs/internals/nemesis.md#membership
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from contracts.target import CanChangeMembership
from nemesis.base import Env, Fault, NoEffect
from nemesis.powers import CHANGE_VOTERS
from nemesis.spec import Count, FaultContext, FaultSpec, Option

KIND = "membership"
OPS = ("add", "remove", "restart")
NONE = "none"  # a step that found no quorum to change, or nothing it could do
# after the first removal of a leader, the leader is chosen this often among the voters
LEADER_SHARE = 1 / 3
# how often an add goes with a concurrent removal (a second change while the first is uncommitted)
PAIR_SHARE = 1 / 4


def min_voters(initial: int) -> int:
    """The fewest voters the fault leaves: a majority of the initial set (3 of 5, 2 of 3)."""
    return max(1, initial // 2 + 1)


@dataclass
class Plan:
    """What the fault knows between steps: the nodes it removed and has not restarted, and
    whether a removal of the leader succeeded yet."""

    floor: int
    removed: set[str] = field(default_factory=set)
    leader_removed: bool = False


def plan(quorum: dict[str, Any], nodes: list[str], running: set[str], state: Plan,
         rng: random.Random) -> dict[str, Any] | None:
    """The next change, or None when none can be made (the quorum names no voters).

    Pure: the quorum (who votes, who leads), the nodes deployed and running, and what the fault
    did before; the draws come from `rng`, so a seed replays the same choices on the same
    quorum."""
    voters = [n for n in nodes if n in set(quorum.get("voters") or ())]
    if not voters:
        return None
    leader = quorum.get("leader") if quorum.get("leader") in voters else None
    addable = [n for n in nodes if n not in voters and n in running]
    restartable = sorted(n for n in state.removed if n not in voters)
    possible = []
    if addable:
        possible.append("add")
    if len(voters) > state.floor:
        possible.append("remove")
    if restartable:
        possible.append("restart")
    if not possible:
        return None
    # until a leader's removal has succeeded, removing the leader comes first, so that a run
    # with few membership steps (every third turn of a three-fault schedule) still makes one
    eager = leader is not None and not state.leader_removed and "remove" in possible
    op = "remove" if eager else rng.choice(possible)
    also: dict[str, Any] = {}
    if op == "add":
        node = rng.choice(addable)
        if len(voters) > state.floor and rng.random() < PAIR_SHARE:
            others = [v for v in voters if v != leader] or voters
            also = {"also": {"op": "remove", "node": rng.choice(others)}}
    elif op == "restart":
        node = rng.choice(restartable)
    else:
        node = _removal(voters, leader, state, rng)
    nodes_changed = [node, *([also["also"]["node"]] if also else [])]
    return {"op": op, "node": node, "nodes": nodes_changed, "leader": leader, "voters": voters,
            **also}


def _removal(voters: list[str], leader: str | None, state: Plan, rng: random.Random) -> str:
    """The leader until a leader's removal has succeeded, then one time in LEADER_SHARE."""
    if leader is not None and (not state.leader_removed or rng.random() < LEADER_SHARE):
        return leader
    others = [v for v in voters if v != leader] or voters
    return rng.choice(others)


class Membership(Fault):
    kind = KIND
    instant = True  # the schedule stops it at once (nemesis/schedule.py)

    def __init__(self, env: Env, initial_voters: int | None = None) -> None:
        if not isinstance(env.db, CanChangeMembership):
            raise TypeError("the target cannot change its voters")
        self.env = env
        self.ops: CanChangeMembership = env.db
        self.state = Plan(min_voters(initial_voters if initial_voters is not None
                                     else len(env.nodes)))
        self.leader_removals = 0

    def choose(self, rng: random.Random) -> dict[str, Any]:
        quorum = self.ops.quorum(self.env.backend, self.env.nodes)
        if quorum is None:
            return {"op": NONE, "nodes": [], "reason": "no node could describe the quorum"}
        running = {n for n in self.env.nodes if self.env.backend.is_running(n)}
        choice = plan(quorum, self.env.nodes, running, self.state, rng)
        if choice is None:
            return {"op": NONE, "nodes": [], "voters": quorum.get("voters"),
                    "reason": "no change possible"}
        directory = (quorum.get("directory_ids") or {}).get(choice["node"])
        return {**choice, "epoch": quorum.get("epoch"),
                **({"directory_id": directory} if directory else {})}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        """The change, and its proof: the quorum DescribeQuorum shows after it (`quorum`). A
        change the target did not make (refused, or not answered ok and not seen in the quorum
        after), or a step that found nothing to change, is `NoEffect` with the answer."""
        node, op = choice.get("node"), choice["op"]
        if op == NONE:
            raise NoEffect(str(choice.get("reason") or "no change possible"))
        assert isinstance(node, str)
        if op == "add" and isinstance(choice.get("also"), dict):
            done = self._pair(choice, node, choice["also"])
        elif op == "add":
            done = {**choice, "result": self._add(node)}
        elif op == "remove":
            done = {**choice, "result": self._remove(node, choice.get("leader"))}
        elif op == "restart":
            self.env.db.stop(self.env.backend, node)
            self.env.db.start(self.env.backend, node)
            self.state.removed.discard(node)
            if not self.env.backend.is_running(node):
                raise RuntimeError(f"{node} not running after its restart")
            return {**choice, "result": "ok", "evidence": {node: "running"}}
        else:
            raise ValueError(f"unknown membership op {op!r}; one of {', '.join(OPS)}")
        return self._proved(done)

    def _proved(self, done: dict[str, Any]) -> dict[str, Any]:
        """`done` with the quorum after it and what each change shows there; NoEffect when no
        change was answered ok nor shows."""
        quorum = self.ops.quorum(self.env.backend, self.env.nodes)
        voters = None if quorum is None else set(quorum.get("voters") or ())
        before = set(done.get("voters") or ())
        changes = [done, *([done["also"]] if isinstance(done.get("also"), dict) else [])]
        evidence: dict[str, str] = {}
        took = False
        for change in changes:
            node, result = str(change["node"]), str(change.get("result"))
            # made, though not answered ok (a timeout): the node's vote changed since the choice
            shows = voters is not None and (node in voters) != (node in before) \
                and (node in voters) == (change["op"] == "add")
            took = took or result == "ok" or shows
            evidence[node] = (f"{result}; " + ("no node could describe the quorum after"
                                               if voters is None else
                                               f"{'a voter' if node in voters else 'not a voter'}"
                                               " in the quorum after"))
        after = None if quorum is None else {k: quorum.get(k) for k in
                                             ("voters", "observers", "leader", "epoch")}
        if not took:
            answers = ", ".join(f"{c['op']} {c['node']}: {c.get('result')}" for c in changes)
            raise NoEffect(f"the target did not make the change ({answers})", evidence,
                           {"result": done.get("result"),
                            **({"also": done["also"]} if "also" in done else {}),
                            "quorum": after})
        return {**done, "quorum": after, "evidence": evidence}

    def _add(self, node: str) -> str:
        result = self.ops.add_voter(self.env.backend, self.env.nodes, node)
        if result == "ok":
            self.state.removed.discard(node)
        return result

    def _remove(self, node: str, leader: object) -> str:
        result = self.ops.remove_voter(self.env.backend, self.env.nodes, node)
        if result == "ok":
            self.state.removed.add(node)
            if node == leader:
                self.state.leader_removed = True
                self.leader_removals += 1
        return result

    def _pair(self, choice: dict[str, Any], node: str, also: dict[str, Any]) -> dict[str, Any]:
        """The add and the removal at once, each on its own thread; their answers."""
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="membership") as pool:
            added = pool.submit(self._add, node)
            removed = pool.submit(self._remove, str(also["node"]), choice.get("leader"))
            result, also_result = added.result(), removed.result()
        return {**choice, "result": result, "also": {**also, "result": also_result}}

    def stop(self) -> dict[str, Any]:
        """Nothing is undone; the quorum as it now stands goes in the history."""
        quorum = self.ops.quorum(self.env.backend, self.env.nodes)
        if quorum is None:
            return {"voters": None, "leader": None}
        return {"voters": quorum.get("voters"), "observers": quorum.get("observers"),
                "leader": quorum.get("leader"), "epoch": quorum.get("epoch")}

    def heal(self) -> None:
        for node in self.env.nodes:
            if not self.env.backend.is_running(node):
                self.env.db.start(self.env.backend, node)


SPARES = 2  # nodes deployed beside the initial voters, for the fault to add
MAX_SPARES = 8
SPARES_OPTION = Option("spares", Count(0, MAX_SPARES), SPARES,
                       "with the membership nemesis: nodes deployed as observers beside --nodes, "
                       f"for it to add as voters (default {SPARES})")


def _build(context: FaultContext) -> Fault:
    return Membership(context.env, context.initial_voters)


# asked for by name: it changes how the nodes are deployed (spares, voters in the log)
SPECS = (FaultSpec(KIND, (CHANGE_VOTERS,), _build, (SPARES_OPTION,)),)
