"""Targeted nemesis shapes: faults that watch the cluster and act in steps, to steer it into the rare
states where the core decides (issue 21).

Theory of operation: a shape sees and acts on the cluster only through the powers the nemesis
grants it (powers.py: `ShapePowers`). It starts like any fault (its start, in nemesis.FAULT_STARTS,
cuts links and stops no victims) and returns a `Shape`. A step (`ShapeStep`, handled by
`Nemesis.on_step` while its fault is the active one and before the heal) either waits, looking
again later, or acts: it heals, cuts again, or kills a leader. What a step waits for is a new
leader that has committed an entry of its own epoch (a leader change with appends).

The shapes: zombie-rejoin (a deposed leader with a longer, older log campaigns), diverge (a
follower whose log ends in an epoch left behind must truncate across epochs), observer-lag (an
observer must find a new leader and catch up) and chain (partitions and kills with no heal
between). Details (what a step waits for, casualties and churn, each shape step by step):
docs/internals/simulator.md#shapes
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reference_node.raft.states import Leader
from reference_node.sim.network import Network
from reference_node.sim.node import SimNode
from reference_node.sim.powers import ShapePowers

POLL_MS = 100
"""How often a waiting step looks at the cluster again."""


@dataclass(slots=True)
class Shape:
    """What a running shape knows between its steps."""

    first: tuple[str, int]
    """The first step and how long after the start it comes."""
    target: int | None
    """The node the shape is about: the zombie leader, the diverging follower, the lagging
    observer; None when the cluster had none to pick."""
    cut: tuple[int, ...]
    """The nodes kept away from the majority now: a new leader is looked for elsewhere."""
    epoch: int
    """A leader of this epoch or an older one is not new."""
    changes_wanted: int = 0
    """How many leader changes churn forces before the target is let back (chain: how many new
    leaders it kills)."""
    changes: int = 0
    seen: tuple[int, int] | None = None
    """churn: the leader (node, epoch) it has seen commit and lets append a while before the
    kill; chain's third way: (the leader, when it started looking)."""


ShapeStart = Callable[[ShapePowers], Shape | None]
"""A shape's start: it cuts what it cuts and returns its `Shape` (None: nothing to aim at)."""


# --- the starts -----------------------------------------------------------------------------------


def start_zombie_rejoin(n: ShapePowers) -> Shape:
    cluster, rng = n.cluster, n.rng
    voters = cluster.current_voters()
    zombie = cluster.leader_id() or rng.choice(voters)
    side = [zombie]
    if len(voters) >= 5 and rng.random() < 0.5:
        side.append(rng.choice([v for v in voters if v != zombie]))
    _cut_off(n, side)
    return Shape(("zombie-wait", POLL_MS), zombie, tuple(side), _top_epoch(n))


def start_diverge(n: ShapePowers) -> Shape:
    """With fewer than 5 voters no follower can stay in X's minority: X itself diverges."""
    cluster, rng = n.cluster, n.rng
    voters = cluster.current_voters()
    leader = cluster.leader_id() or rng.choice(voters)
    followers = [v for v in voters if v != leader and cluster.nodes[v].alive]
    follower = rng.choice(followers) if len(voters) >= 5 and followers else leader
    side = sorted({leader, follower})
    _cut_off(n, side)
    return Shape(("diverge-wait", POLL_MS), follower, tuple(side), _top_epoch(n),
                 changes_wanted=2)


def start_observer_lag(n: ShapePowers) -> Shape | None:
    cluster, rng = n.cluster, n.rng
    observers = [node.id for node in cluster.nodes.values()
                 if node.alive and not cluster.is_voter_now(node)]
    leader = cluster.leader_id()
    if not observers:
        observers = [v for v in cluster.current_voters()
                     if v != leader and cluster.nodes[v].alive]
    if not observers:
        return None
    lagging = rng.choice(observers)
    _cut_off(n, [lagging])
    return Shape(("churn", rng.randrange(300, 1000)), lagging, (lagging,), _top_epoch(n) - 1,
                 changes_wanted=rng.randrange(1, 3))


def start_chain(n: ShapePowers) -> Shape:
    cluster, rng = n.cluster, n.rng
    voters = cluster.current_voters()
    leader = cluster.leader_id()
    if leader is not None and len(voters) >= 3 and rng.random() < 0.3:
        return _start_left_behind(n, leader, voters)
    if leader is not None and rng.random() < 0.5:
        side = [leader]
    else:
        shuffled = list(voters)
        rng.shuffle(shuffled)
        side = shuffled[: rng.randrange(1, max(2, (len(voters) + 1) // 2))]
    _cut_off(n, side)
    epoch = _top_epoch(n)
    roll = rng.random()
    first = ("chain-repartition", rng.randrange(500, 3000)) if roll < 0.35 else \
        ("chain-wait", POLL_MS)
    return Shape(first, leader, tuple(side), epoch, changes_wanted=1 + (roll > 0.8))


def _start_left_behind(n: ShapePowers, leader: int, voters: list[int]) -> Shape:
    """chain's third way: the largest minority of followers cut off, left behind while the others
    commit; then the leader killed the instant it has committed past what any follower knows, and
    the partition lifted (`chain_behind`)."""
    rng = n.rng
    followers = [v for v in voters if v != leader]
    side = sorted(rng.sample(followers, (len(voters) - 1) // 2))
    _cut_off(n, side)
    return Shape(("chain-behind", rng.randrange(1500, 4000)), leader, tuple(side),
                 _top_epoch(n))


# --- the steps ------------------------------------------------------------------------------------


def zombie_wait(n: ShapePowers, shape: Shape) -> bool:
    """Once the majority's leader has committed in its epoch: heal, and kill it."""
    leader = _new_leader(n, shape)
    if leader is None:
        return False
    n.net.heal()
    n.kill(leader.id)
    shape.cut = ()
    n.recompute_zombies()
    return True


def diverge_wait(n: ShapePowers, shape: Shape) -> bool:
    """Once the majority's leader has committed in its epoch: only the follower stays cut off,
    and churn starts."""
    leader = _new_leader(n, shape)
    if leader is None:
        return False
    assert shape.target is not None and leader.core is not None
    _cut_off(n, [shape.target])
    shape.cut = (shape.target,)
    shape.epoch = leader.core.epoch - 1  # this leader is the first to be killed
    n.step_in(n.rng.randrange(200, 800), "churn")
    return True


def churn(n: ShapePowers, shape: Shape) -> bool:
    """Kill each new leader a while after it committed in its own epoch (it comes back soon),
    until enough leader changes happened; then let the cut-off nodes back."""
    leader = _new_leader(n, shape)
    if leader is None:
        return False
    core = leader.core
    assert core is not None
    if shape.changes >= shape.changes_wanted:
        n.net.heal()
        shape.cut = ()
        n.recompute_zombies()
        return True
    if shape.seen != (leader.id, core.epoch):
        shape.seen = (leader.id, core.epoch)  # let it take appends first
        n.step_in(n.rng.randrange(200, 800), "churn")
        return False
    shape.changes += 1
    shape.epoch = core.epoch
    n.bounce(leader.id, n.rng.randrange(100, 400))
    n.step_in(POLL_MS, "churn")
    return True


def chain_wait(n: ShapePowers, shape: Shape) -> bool:
    """The partition holds and the majority elected: kill its new leader (back at the stop), and
    now and then cut the network differently after it."""
    leader = _new_leader(n, shape)
    if leader is None:
        return False
    assert leader.core is not None
    shape.epoch = leader.core.epoch
    n.kill(leader.id)
    shape.changes += 1
    if shape.changes < shape.changes_wanted:
        n.step_in(n.rng.randrange(500, 2000), "chain-repartition")
    n.recompute_zombies()
    return True


def chain_behind(n: ShapePowers, shape: Shape) -> bool:
    """Kill the leader the moment its high watermark is past every other voter's (it acknowledged
    appends its followers have not heard are committed yet: a successor starts from a lower high
    watermark, and the followers left behind hold it there while they catch up), and let them back.
    Looks every millisecond for up to `BEHIND_LOOK_MS`, then kills it anyway."""
    cluster = n.cluster
    leader = cluster.nodes[shape.target] if shape.target is not None else None
    core = leader.core if leader is not None else None
    if leader is None or core is None or not leader.alive or not core.is_leader:
        n.net.heal()
        shape.cut = ()
        n.recompute_zombies()
        return True
    if shape.seen is None:
        shape.seen = (leader.id, n.now)
    known = max((other.core.high_watermark for other in cluster.nodes.values()
                 if other is not leader and other.core is not None
                 and cluster.is_voter_now(other)), default=0)
    if core.high_watermark <= known and n.now - shape.seen[1] < BEHIND_LOOK_MS:
        n.step_in(1, "chain-behind")
        return False
    n.kill(leader.id)
    n.net.heal()
    shape.cut = ()
    n.recompute_zombies()
    return True


BEHIND_LOOK_MS = 2000


def chain_repartition(n: ShapePowers, shape: Shape) -> bool:
    """A different partition, with no heal before it: random halves, an isolated node, or a ring."""
    cluster, rng = n.cluster, n.rng
    nodes = list(cluster.node_ids)
    rng.shuffle(nodes)
    roll = rng.random()
    if roll < 0.4:
        cut = rng.randrange(1, len(nodes)) if len(nodes) > 1 else 1
        n.net.partition([nodes[:cut], nodes[cut:]], cluster.node_ids)
    elif roll < 0.7:
        _cut_off(n, nodes[:1])
    else:
        k = len(nodes)
        n.net.connect_only([(nodes[i], nodes[(i + 1) % k]) for i in range(k)], cluster.node_ids)
    shape.cut = ()
    if shape.changes < shape.changes_wanted:
        n.step_in(POLL_MS, "chain-wait")
    n.recompute_zombies()
    return True


STEPS: dict[str, Callable[[ShapePowers, Shape], bool]] = {
    "zombie-wait": zombie_wait,
    "diverge-wait": diverge_wait,
    "churn": churn,
    "chain-wait": chain_wait,
    "chain-repartition": chain_repartition,
    "chain-behind": chain_behind,
}
"""Each step: True when it acted (a trace line), False when it only looked (looking again
`POLL_MS` later unless it queued its own next step)."""


# --- what the steps look at -----------------------------------------------------------------------


def _cut_off(n: ShapePowers, side: list[int]) -> None:
    """`side` cut off from every other node (the clients still reach it)."""
    cluster = n.cluster
    net: Network = n.net
    others = [x for x in cluster.node_ids if x not in side]
    net.partition([side, others], cluster.node_ids)


def _epoch(n: ShapePowers, node_id: int) -> int:
    node = n.cluster.nodes[node_id]
    if node.core is not None:
        return node.core.epoch
    return node.qs.leader_epoch if node.qs is not None else 0


def _top_epoch(n: ShapePowers) -> int:
    """The highest epoch a voter has reached: the epoch a new leader must pass."""
    return max((_epoch(n, v) for v in n.cluster.current_voters()), default=0)


def _new_leader(n: ShapePowers, shape: Shape) -> SimNode | None:
    """The running leader outside `shape.cut` of an epoch above `shape.epoch` that has committed an
    entry of its own epoch (its high watermark passed the start of its epoch), if any."""
    best: SimNode | None = None
    for node in n.cluster.nodes.values():
        core = node.core
        if core is None or not node.alive or node.id in shape.cut or core.epoch <= shape.epoch:
            continue
        state = core.state
        if isinstance(state, Leader) and core.high_watermark > state.epoch_start and (
                best is None or best.core is None or core.epoch > best.core.epoch):
            best = node
    return best
