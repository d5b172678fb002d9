"""`targeted`: fault sequences that steer real nodes into the states where elections and
replication decide (issue 21).

The random faults (partition, pause, kill) rarely line up into the few states where a weak defect
does harm: a stale voter that wins an election, a new leader that answers before it knows its
high watermark, a voter asked twice in one epoch. Each shape here is one such sequence, run whole
in one turn of the schedule (`instant`: its stop, in the same turn, heals what is left):

- `stale-follower`: a follower whose log misses committed entries campaigns first after the
  leader is killed and the followers restarted (a voter that grants it without comparing logs,
  `no-log-check`, makes it leader); the leader that wins instead is kept out of its voters' reach
  a while, so that one exposing its high watermark early (`early-high-watermark`) is caught.
- `vote-crash`: a voter between two sides is asked for its vote by a candidate of each side in
  one epoch, and crashes right after granting one; one that forgets its vote (`forget-vote`)
  grants the other too: two leaders in one epoch.

Every random choice is drawn in `choose` and recorded; the shapes watch the nodes' `quorum-state`
files (local backend) and are built for three voters. Details (each step, the watches, the powers
needed, the timings): docs/internals/nemesis.md#targeted
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contracts.backend import CanDelay, CanPartition
from contracts.target import CanKill, HasDataDir
from nemesis.base import Env, Fault
from nemesis.links import Link, Links
from nemesis.powers import KILL, LEADER_AND_DATA, PARTITION
from nemesis.probes import prove_cut, prove_restored
from nemesis.spec import FaultSpec

KIND = "targeted"
STALE_FOLLOWER = "stale-follower"
VOTE_CRASH = "vote-crash"
SHAPES = (STALE_FOLLOWER, VOTE_CRASH)


@dataclass(frozen=True)
class Timing:
    """Seconds each step waits, from the reference node's defaults (election timeout 1 s, fetch
    timeout 2 s, check-quorum 3 s) and a quorum-state write of ~20 ms (two fsyncs)."""

    lag: tuple[float, float] = (5.0, 8.0)
    """How long the stale follower is cut off (drawn): the leader commits meanwhile."""
    settle: float = 4.0
    """After a shape's last fault: the election it steers, and the reads and fetches after it."""
    hold: float = 1.0
    """stale-follower: how long the new leader's requests to the voter that elected it are
    dropped (under the check-quorum timeout, 3 s, and near the clients' op timeout, 1.5 s)."""
    replicate: float = 1.0
    """vote-crash: after X is killed, before L and Y are cut apart: Y then holds more than X."""
    resign: float = 3.5
    """vote-crash: L without a quorum resigns after check-quorum (3 s), Y's fetches time out."""
    watch: float = 8.0
    """How long to wait for a vote or a candidacy (a restarted node campaigns after the fetch
    timeout, 2 s; a candidate may wait out a backoff of up to 1 s, then its pre-vote round)."""
    grant: float = 0.1
    """vote-crash: after X's new epoch is seen, until its vote has surely left (then X dies)."""
    late: float = 0.3
    """vote-crash, where the backend can delay links (CanDelay): how late the candidates' bytes
    reach X while they campaign. A candidate sends its Vote a few ms after its vote for itself
    is durable; a harness busy with clients (or beside other work on two cores) can take longer
    than that to see it and cut, and the Vote then got through. Held this long, it is dropped."""
    poll: float = 0.002
    """How often the vote watch reads quorum-state: well under one fsync."""


class Steps:
    """What a shape did, with the seconds since it began: the start's `steps`."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.began = clock()
        self.done: list[dict[str, Any]] = []

    def note(self, do: str, **detail: Any) -> None:
        self.done.append({"at": round(self.clock() - self.began, 3), "do": do, **detail})


class Targeted(Fault):
    kind = KIND
    instant = True  # a turn is a whole shape; its stop heals what the shape left

    def __init__(self, env: Env, links: Links | None = None, shapes: tuple[str, ...] = SHAPES,
                 timing: Timing | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not isinstance(env.backend, CanPartition):
            raise TypeError(f"backend {env.backend.name} cannot partition")
        if not isinstance(env.db, CanKill):
            raise TypeError("target cannot kill nodes")
        unknown = [s for s in shapes if s not in SHAPES]
        if unknown or not shapes:
            raise ValueError(f"{KIND}: unknown shapes {unknown}; one of {', '.join(SHAPES)}")
        self.env = env
        self.links = links if links is not None else Links(env.backend)
        self.shapes = tuple(shapes)
        self.timing = timing or Timing()
        self.sleep = sleep
        self.clock = clock
        self.killer: CanKill = env.db
        self.down: set[str] = set()  # nodes a shape killed and has not started again
        self._round: list[str] = []
        self._state_paths: dict[str, Path] = {}
        self._delayed = False  # whether a shape left links delayed
        self._ever_cut: set[Link] = set()  # every link cut since the last stop: what it proves

    # -- the Fault API -------------------------------------------------------------------------

    def choose(self, rng: random.Random) -> dict[str, Any]:
        if not self._round:  # a shuffled round, so that every shape has its turns
            self._round = rng.sample(self.shapes, len(self.shapes))
        shape = self._round.pop(0)
        leader = self.env.leader()
        choice: dict[str, Any] = {"shape": shape, "leader": leader}
        followers = [n for n in self.env.controllers if n != leader]
        if leader is None or not followers:
            return choice  # nothing to steer: the start says so
        if shape == STALE_FOLLOWER:
            stale = rng.choice(followers)
            lag = round(rng.uniform(*self.timing.lag), 3)
            return {**choice, "stale": stale, "restarted": [n for n in followers if n != stale],
                    "lag": lag}
        voter = rng.choice(followers)
        others = [n for n in followers if n != voter]
        rng.shuffle(others)
        # the sides X bridges: L with the first half of the other followers, Y with the rest
        half = (len(others) - 1) // 2
        return {**choice, "voter": voter, "sides": [sorted([leader, *others[:half]]),
                                                    sorted(others[half:])]}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        steps = Steps(self.clock)
        if "stale" not in choice and "voter" not in choice:
            steps.note("skip", why="no leader known, or no follower to steer")
        elif choice["shape"] == STALE_FOLLOWER:
            self._stale_follower(choice, steps)
        else:
            self._vote_crash(choice, steps)
        return {**choice, "steps": steps.done}

    def stop(self) -> dict[str, Any]:
        cut, self._ever_cut = self._ever_cut, set()
        restarted = self._restore()
        return {"healed": "all" if not self.links.held() else self.kind, "restarted": restarted,
                "evidence": prove_restored(self.env.backend, cut, self.links.now())}

    def heal(self) -> None:
        self._restore()
        self._start([n for n in self.env.nodes
                     if n not in self.env.broken and not self.env.backend.is_running(n)])

    # -- stale-follower ------------------------------------------------------------------------

    def _stale_follower(self, choice: dict[str, Any], steps: Steps) -> None:
        leader, stale = choice["leader"], choice["stale"]
        cut_at = self.clock()
        evidence = self._cut_proven(_isolating(stale, self.env.controllers))
        steps.note("cut-off", node=stale, evidence=evidence)
        self.sleep(max(0.0, choice["lag"] - (self.clock() - cut_at)))
        # The stale follower is killed too and started first: all restarted, each campaigns one
        # fetch timeout after its start, so the stale one asks first, and asks the others once
        # they are up. Left running, it would campaign whenever its own cycle (fetch timeout,
        # then a pre-vote round) came round, often after a restarted follower had won.
        self._kill([leader, *choice["restarted"], stale])
        steps.note("kill", nodes=[leader, *choice["restarted"], stale])
        self.links.restore(self.kind)
        steps.note("heal", node=stale)
        epoch = self._epoch(stale)
        self._start([stale, *choice["restarted"]])
        steps.note("restart", nodes=[stale, *choice["restarted"]])
        grant = self._await_grant([stale, *choice["restarted"]], epoch)
        if grant is None:
            steps.note("no-vote", why=f"no vote granted past epoch {epoch}")
        else:
            # the new leader's BeginQuorumEpoch to its voter dropped for a while: it leads, and
            # takes reads, with no follower in contact; the voter's first fetch confirms them all
            voter, candidate, new_epoch = grant
            self._cut({(candidate, voter)})
            steps.note("hold", voter=voter, candidate=candidate, epoch=new_epoch)
            self.sleep(self.timing.hold)
            self.links.restore(self.kind)
            steps.note("release", voter=voter)
        self.sleep(self.timing.settle)
        steps.note("settled")

    def _await_grant(self, nodes: list[str], epoch: int | None) -> tuple[str, str, int] | None:
        """(voter, candidate, epoch) once one of `nodes` has persisted a vote for another of
        them in an epoch past `epoch`, or one of them its own leadership of such an epoch (then
        the voter is the first other node: a vote forgotten by `forget-vote` is never on disk).
        None: not within the watch, or quorum-state cannot be read."""
        if epoch is None:
            return None
        ids = {_id_of(self.env, n): n for n in nodes}
        deadline = self.clock() + self.timing.watch
        while self.clock() < deadline:
            for node in nodes:
                state = self._quorum_state(node) or {}
                new_epoch = int(state.get("leaderEpoch", -1))
                if new_epoch <= epoch:
                    continue
                candidate = ids.get(state.get("votedId", -1))
                if candidate not in (None, node):
                    return node, candidate, new_epoch
                if ids.get(state.get("leaderId", -1)) == node:
                    return next(n for n in nodes if n != node), node, new_epoch
            self.sleep(self.timing.poll)
        return None

    # -- vote-crash ----------------------------------------------------------------------------

    def _vote_crash(self, choice: dict[str, Any], steps: Steps) -> None:
        timing, voter = self.timing, choice["voter"]
        sides: list[list[str]] = choice["sides"]
        candidates = [n for side in sides for n in side]
        epoch = self._epoch(voter)
        self._kill([voter])
        steps.note("kill", nodes=[voter], epoch=epoch)
        self.sleep(timing.replicate)
        apart = _between(sides[0], sides[1])
        cut_at = self.clock()
        evidence = self._cut_proven(apart)
        steps.note("cut-apart", sides=sides, evidence=evidence)
        self.sleep(max(0.0, timing.resign - (self.clock() - cut_at)))
        # the candidates' Vote requests arrive late, so that the cut below beats the first one
        if self._delay({(c, voter) for c in candidates}):
            steps.note("late", nodes=candidates, to=voter, seconds=timing.late)
        # restarted, X has no recent fetch: it grants pre-votes at once; its own campaign fails,
        # since both sides hold more than it does
        self._start([voter])
        steps.note("restart", nodes=[voter])
        first = self._await_candidate(candidates, epoch)
        if first is None:
            steps.note("no-vote", why=f"no candidate past epoch {epoch}")
            return
        # the first candidate's Vote, sent once its own vote for itself is durable, is dropped:
        # it stays a candidate of that epoch, and X is free to vote for the other side
        loser, new_epoch = first
        self._cut(apart | {(loser, voter)})
        steps.note("hold", candidate=loser, epoch=new_epoch)
        seen = self._await_vote(voter, epoch)
        if seen is None:
            steps.note("no-vote", why=f"{voter}'s epoch stayed at {epoch}")
            return
        steps.note("voted", node=voter, state=seen)
        # from now on no candidate reaches X: the winner's BeginQuorumEpoch never tells it
        self._cut(apart | {(c, voter) for c in candidates})
        self.sleep(timing.grant)
        self._kill([voter])
        self._undelay()
        winners = [n for n in candidates if self._leads(n, new_epoch)]
        losers = [n for n in candidates if n not in winners and self._candidate(n, new_epoch)]
        steps.note("kill", nodes=[voter], winners=winners, losers=losers)
        if not winners or not losers:
            steps.note("gave-up", why=f"not a winner and a loser of epoch {new_epoch}")
            return
        # the winner's side stays cut from X; the losers reach it again
        self._cut(apart | {link for w in winners for link in _between([w], [voter])})
        self._start([voter])
        steps.note("restart", nodes=[voter])
        # a candidate restarted asks again in its epoch at once (no pre-vote): X, if it forgot
        self._kill(losers)
        self._start(losers)
        steps.note("restart", nodes=losers, why=f"candidates of epoch {new_epoch}")
        self.sleep(timing.settle)
        steps.note("settled", leaders=[n for n in candidates if self._leads(n, new_epoch)])

    def _await_candidate(self, nodes: list[str], epoch: int | None) -> tuple[str, int] | None:
        """(node, epoch) once one of `nodes` has persisted its vote for itself in an epoch past
        `epoch`: a candidate, about to send its Vote requests."""
        if epoch is None:
            return None
        deadline = self.clock() + self.timing.watch
        while self.clock() < deadline:
            for node in nodes:
                state = self._quorum_state(node) or {}
                new_epoch = int(state.get("leaderEpoch", -1))
                if new_epoch > epoch and state.get("votedId") == _id_of(self.env, node):
                    return node, new_epoch
            self.sleep(self.timing.poll)
        return None

    def _await_vote(self, node: str, epoch: int | None) -> dict[str, Any] | None:
        """`node`'s quorum-state once its epoch passes `epoch` (None: not within the watch)."""
        if epoch is None:
            return None
        deadline = self.clock() + self.timing.watch
        while self.clock() < deadline:
            state = self._quorum_state(node)
            if state is not None and int(state.get("leaderEpoch", -1)) > epoch:
                return state
            self.sleep(self.timing.poll)
        return None

    def _leads(self, node: str, epoch: int) -> bool:
        state = self._quorum_state(node)
        return (state is not None and state.get("leaderEpoch") == epoch
                and state.get("leaderId") == _id_of(self.env, node))

    def _candidate(self, node: str, epoch: int) -> bool:
        """Voted for itself in `epoch` without leading it: restarted, it asks again in it."""
        state = self._quorum_state(node)
        me = _id_of(self.env, node)
        return (state is not None and state.get("leaderEpoch") == epoch
                and state.get("votedId") == me and state.get("leaderId") != me)

    def _epoch(self, node: str) -> int | None:
        state = self._quorum_state(node)
        return None if state is None else int(state.get("leaderEpoch", 0))

    def _quorum_state(self, node: str) -> dict[str, Any] | None:
        """The node's `quorum-state` (Kafka's JSON line), read from this host; None if unread."""
        path = self._state_paths.get(node) or self._find_state(node)
        if path is None:
            return None
        try:
            state = json.loads(path.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None  # between its rename and our read, or not yet written
        return state if isinstance(state, dict) else None

    def _find_state(self, node: str) -> Path | None:
        db = self.env.db
        if not isinstance(db, HasDataDir):
            return None
        root = Path(db.data_dir(self.env.backend, node))
        for pattern in db.data_files().get("quorum-state", []):
            found = sorted(root.glob(pattern))
            if found:
                self._state_paths[node] = found[0]
                return found[0]
        return None

    # -- levers --------------------------------------------------------------------------------

    def _cut(self, links: set[Link]) -> None:
        self._ever_cut |= links
        self.links.cut(self.kind, links)

    def _cut_proven(self, links: set[Link]) -> dict[str, Any] | str:
        """`_cut`, then the probes' evidence of it: only where the shape then waits anyway (the
        wait is shortened by the probes' time); the cuts timed to a node's step are not probed,
        nor is the delay (`late`), which a probe would have to wait out."""
        self._cut(links)
        return prove_cut(self.env.backend, self.env.nodes, links, self.links.now())

    def _delay(self, links: set[Link]) -> bool:
        """Delays `links` by `timing.late`; False where the backend cannot."""
        backend = self.env.backend
        if not isinstance(backend, CanDelay):
            return False
        backend.delay(sorted(links), self.timing.late)
        self._delayed = True
        return True

    def _undelay(self) -> None:
        if self._delayed and isinstance(self.env.backend, CanDelay):
            self.env.backend.delay([], 0)
        self._delayed = False

    def _kill(self, nodes: list[str]) -> None:
        for node in nodes:
            self.down.add(node)
            self.killer.kill(self.env.backend, node)

    def _start(self, nodes: list[str]) -> None:
        for node in nodes:
            self.env.db.start(self.env.backend, node)
            self.down.discard(node)

    def _restore(self) -> list[str]:
        """Every cut and delay of this kind restored, every node it killed started: what was
        started."""
        self.links.restore(self.kind)
        self._undelay()
        down = sorted(n for n in self.down if n not in self.env.broken)
        self._start(down)
        self.down.clear()
        return down


def _between(a: list[str], b: list[str]) -> set[Link]:
    return {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}


def _isolating(node: str, nodes: list[str]) -> set[Link]:
    return _between([node], [n for n in nodes if n != node])


def _id_of(env: Env, node: str) -> int:
    """The node's id as the target numbers it: its position among the nodes, from 1."""
    return env.nodes.index(node) + 1


# asked for by name: it kills the leader and crashes voters on purpose, every turn
SPECS = (FaultSpec(KIND, (PARTITION, KILL, LEADER_AND_DATA),
                   lambda context: Targeted(context.env, context.links)),)
