"""Brokers in the simulator (`kraft simulate --brokers N`): incarnations, the checks that need the
simulated clock, and what the seeds exercised.

Theory of operation: a broker is a node the host runs with a `BrokerIdentity` (host.py): an
observer of the metadata log that registers with the leader and heartbeats it (raft/lifecycle.py).
Every start of a broker is a new process, so a new incarnation, made by `new_incarnation` from the
simulated clock (on a fixed Unix base, `SIM_UNIX_MS`) and the seed's broker stream; nothing orders
incarnations by it (the controller refuses another one only while a session is live).

`BrokerWatch` holds the broker invariants that need more than the committed log (BrokerSelfFence,
SessionExpiry, DuplicateRegistration, the event half of UnfenceAfterCaughtUp, BrokersLive),
keeping its own account of contact from what the network carried, not the broker's bookkeeping.
`BrokerStats` counts state changes, the controller's records and refusals, and stale replays, so
that a report shows what the seeds exercised. Details: docs/internals/simulator.md#brokers
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reference_node.raft.config import RaftConfig
from reference_node.raft.lifecycle import BrokerIdentity, new_incarnation
from reference_node.raft.messages import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    ErrorCode,
)
from reference_node.raft.states import NEVER
from reference_node.sim.invariants import Invariants, Violation
from reference_node.sim.oracle import Broker, fold_brokers, observed_brokers

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore
    from reference_node.sim.node import SimNode

SIM_UNIX_MS = 1_700_000_000_000
"""The Unix time (ms) the simulated clock's 0 stands for, in incarnation ids."""

BROKER_PORT = 9092
"""Every broker's advertised client listener port (its host is `node<id>`)."""

TICK_SLACK_MS = 1
"""A deadline is judged one millisecond late: events of the very millisecond a timer fires may
be handled before the tick (queued earlier), and the core's timeouts are strict (`>`)."""

TRANSITIONS: tuple[tuple[str, str], ...] = (
    ("initial", "inactive"),    # the registration is answered: registered, fenced
    ("inactive", "active"),     # a heartbeat is answered unfenced (the broker had caught up)
    ("active", "stopping"),     # controlled shutdown begins
    ("stopping", "stopped"),    # the controller lets it go (should_shut_down)
    ("initial", "stopped"),     # shut down before any registration was answered
)
# Not expected since another incarnation is refused while a session is live (issue 41): active ->
# initial and inactive -> initial (STALE_BROKER_EPOCH: another registration replaced its own); they
# need a replay to land while the running broker's session is out, which seeds 0-39 never do.
"""The changes of a broker's own state (its `broker-state` events) the seeds are expected to take.
The controller's side of the table is in its records (`CONTROLLER_RECORDS`): an active broker
fenced by session expiry is `inactive` in the image at once, but the broker itself never sees
that state: its next answered heartbeat unfences it again (it is caught up), and until then it
is `active` and, past its own timeout, self-fenced (`BrokerStats.self_fenced`)."""

CONTROLLER_RECORDS = ("register", "unfence", "fence:session-expired", "shutdown", "fence:shutdown")
"""The records the leaders are expected to append over the seeds (`fence:want-fence` is not
among them: no broker asks to be fenced)."""


def incarnation_at(now_ms: int, rng: random.Random) -> uuid.UUID:
    """The incarnation of a broker process started at simulated time `now_ms`."""
    return new_incarnation(SIM_UNIX_MS + now_ms, rng)


def identity(node_id: int, incarnation: uuid.UUID) -> BrokerIdentity:
    return BrokerIdentity(incarnation, f"node{node_id}", BROKER_PORT)


@dataclass(slots=True)
class BrokerStats:
    """What the brokers did over a run (or, added up, over seeds)."""

    transitions: Counter[str] = field(default_factory=Counter)
    """Broker state changes, "from->to", as the brokers' own `broker-state` events say."""
    self_fenced: int = 0
    """Times a broker fenced itself (no answered heartbeat within its timeout)."""
    records: Counter[str] = field(default_factory=Counter)
    """Records the leaders appended: register, unfence, shutdown, fence:<reason>."""
    refused: Counter[str] = field(default_factory=Counter)
    """Broker requests a controller refused, by error name."""
    incarnations: int = 0
    """Broker processes started (each a new incarnation)."""
    replays: int = 0
    """Stale registrations (a previous incarnation's) delivered to a leader."""

    def add(self, other: BrokerStats) -> None:
        self.transitions.update(other.transitions)
        self.self_fenced += other.self_fenced
        self.records.update(other.records)
        self.refused.update(other.refused)
        self.incarnations += other.incarnations
        self.replays += other.replays

    def line(self) -> str:
        moves = ", ".join(f"{k} {n}" for k, n in sorted(self.transitions.items())) or "none"
        records = ", ".join(f"{k} {n}" for k, n in sorted(self.records.items())) or "none"
        refused = ", ".join(f"{k} {n}" for k, n in sorted(self.refused.items())) or "none"
        return (f"brokers: {self.incarnations} incarnations; states {moves}; "
                f"{self.self_fenced} self-fenced; records {records}; refused {refused}; "
                f"{self.replays} stale registrations replayed")

    def missing(self) -> list[str]:
        """The transitions of `TRANSITIONS` and the records of `CONTROLLER_RECORDS` never seen,
        and self-fencing if no broker ever fenced itself."""
        gaps = [f"{a}->{b}" for a, b in TRANSITIONS if self.transitions[f"{a}->{b}"] == 0]
        gaps += [r for r in CONTROLLER_RECORDS if self.records[r] == 0]
        return gaps + ([] if self.self_fenced else ["self-fenced"])


@dataclass(slots=True)
class _Session:
    """One leader incarnation's sessions, as the oracle counts them."""

    inc: int
    since: int
    """When the node became leader: every session starts here (Kafka's failover rule)."""
    heartbeats: dict[int, int] = field(default_factory=dict)
    """Broker id -> the last heartbeat delivered to this leader."""
    due: dict[int, int] = field(default_factory=dict)
    """Broker id -> when its session's deadline (+ slack) passes, unless judged since."""
    by_epoch: dict[tuple[int, int], int] = field(default_factory=dict)
    """(broker id, broker epoch) -> the last heartbeat of that registration delivered to it."""


class BrokerWatch:
    """The broker invariants that need the simulated clock, and the run's `BrokerStats`."""

    def __init__(self, config: RaftConfig, nodes: dict[int, SimNode], broker_ids: Iterable[int],
                 inv: Invariants) -> None:
        self.nodes = nodes
        self.broker_ids = tuple(broker_ids)
        self.inv = inv
        self.session_ms = config.broker_session_timeout_ms
        self.broker_timeout_ms = config.broker_heartbeat_timeout_ms
        self.stats = BrokerStats()
        self.serving_until: dict[int, int] = {}
        """Broker id -> when its last answered request is too old for it to be serving."""
        self.sessions: dict[int, _Session] = {}
        """Leader node id -> its sessions, while it leads."""
        self.next_due = NEVER
        self.paused: set[int] = set()
        """The nodes found paused while a deadline of theirs was due (see `_paused`)."""
        """The earliest deadline of either kind: most events only compare the clock with it."""
        self.state: dict[int, tuple[str, bool]] = {}
        """Broker id -> (state, self_fenced) as its last `broker-state` event said."""
        self.registrations: dict[int, dict[uuid.UUID, BrokerRegistrationRequest]] = {}
        """Broker id -> the last registration each of its incarnations sent."""
        self.asked: dict[int, dict[int, tuple[object, int]]] = {}
        """Broker id -> its running incarnation's unanswered requests (by object id: the request
        and when it was sent)."""
        self.contact: dict[int, int] = {}
        """Broker id -> the send time of its running incarnation's latest request answered NONE."""

    # --- what the host reports ------------------------------------------------------------------

    def started(self, node: SimNode) -> None:
        """A new broker process (a new incarnation) starts, in state `initial`."""
        self.stats.incarnations += 1
        self.state[node.id] = ("initial", True)
        self.asked[node.id] = {}
        self.contact.pop(node.id, None)

    def sent(self, node: SimNode, message: object, now: int) -> None:
        if isinstance(message, BrokerRegistrationRequest):
            self.registrations.setdefault(node.id, {})[message.incarnation] = message
        if isinstance(message, BrokerRegistrationRequest | BrokerHeartbeatRequest):
            self.asked.setdefault(node.id, {})[id(message)] = (message, now)

    def answered(self, node: SimNode, request: object, response: object) -> None:
        """A response reached broker `node` (after the RPC layer paired it with `request`)."""
        entry = self.asked.get(node.id, {}).pop(id(request), None)
        if entry is None or entry[0] is not request:
            return
        if getattr(response, "error", None) == ErrorCode.none:
            self.contact[node.id] = max(self.contact.get(node.id, entry[1]), entry[1])

    def delivered(self, node: SimNode, message: BrokerHeartbeatRequest, now: int) -> None:
        """A heartbeat reached `node`: if it leads, the broker's session there is renewed."""
        self._renewed(node, message.sender, message.broker_epoch, now)

    def _renewed(self, node: SimNode, broker: int, epoch: int, now: int) -> None:
        session = self.sessions.get(node.id)
        if session is None or session.inc != node.inc:
            return
        session.heartbeats[broker] = now
        session.by_epoch[(broker, epoch)] = now
        due = now + self.session_ms + TICK_SLACK_MS
        session.due[broker] = due
        if due < self.next_due:
            self.next_due = due

    def on_events(self, node: SimNode, events: list[dict[str, Any]], now: int) -> None:
        stats = self.stats
        for ev in events:
            kind = ev["type"]
            if kind == "state":
                self._leadership(node, ev["state"] == "leader", now)
            elif kind == "broker-state":
                self._broker_state(node.id, ev)
            elif kind == "broker-unfence":
                stats.records["unfence"] += 1
                self.inv.unfence_caught_up(node.id, ev["broker"], ev["epoch"], ev["caught_up"],
                                           ev.get("offset"))
            elif kind == "broker-register":
                stats.records["register"] += 1
                if ev.get("replaced_fenced") is False:
                    self._replaced_live(node, ev, now)
                # A registration renews the session too (an amendment keeps it unfenced).
                self._renewed(node, ev["broker"], ev["epoch"], now)
            elif kind == "broker-fence":
                stats.records[f"fence:{ev['reason']}"] += 1
            elif kind == "broker-shutdown":
                stats.records["shutdown"] += 1
            elif kind == "broker-refused":
                stats.refused[str(ev["error"])] += 1

    def _replaced_live(self, node: SimNode, ev: dict[str, Any], now: int) -> None:
        """DuplicateRegistration: leader `node` registered another incarnation over an unfenced
        one (`ev`) whose session was live: heard from (a heartbeat of its epoch delivered, or the
        leader's election) within the session timeout. The leader also counts registrations, so
        its session is at least as fresh as this account: a violation here is one there."""
        session = self.sessions.get(node.id)
        if session is None or session.inc != node.inc:
            return
        broker = ev["broker"]
        last = max(session.since, session.by_epoch.get((broker, ev["replaced_epoch"]), -NEVER))
        if now - last < self.session_ms:
            raise Violation(
                "DuplicateRegistration",
                f"leader {node.id} registered broker {broker} as incarnation {ev['incarnation']} "
                f"at {now} ms over incarnation {ev['replaced']} (epoch {ev['replaced_epoch']}, "
                f"unfenced), heard from {now - last} ms before (broker.session.timeout.ms "
                f"{self.session_ms})",
            )

    def _leadership(self, node: SimNode, leads: bool, now: int) -> None:
        if not leads:
            self.sessions.pop(node.id, None)
            return
        due = now + self.session_ms + TICK_SLACK_MS
        self.sessions[node.id] = _Session(node.inc, now, {},
                                          {b: due for b in self.broker_ids})
        if due < self.next_due:
            self.next_due = due

    def _broker_state(self, broker: int, ev: dict[str, Any]) -> None:
        state, self_fenced = ev["state"], bool(ev["self_fenced"])
        before, was_fenced = self.state.get(broker, ("initial", True))
        if state != before:
            self.stats.transitions[f"{before}->{state}"] += 1
            if state == "active":
                self.inv.active_caught_up(broker, ev["broker_epoch"], ev["metadata_offset"])
        if self_fenced and not was_fenced:
            self.stats.self_fenced += 1
        self.state[broker] = (state, self_fenced)

    def stepped(self, node: SimNode) -> None:
        """After every step of a broker: when does its last answered request stop vouching for
        it? (Never, while it does not serve.)"""
        core = node.core
        status = core.broker_status() if core is not None else None
        if core is None or status is None or not status.serving:
            self.serving_until.pop(node.id, None)
            return
        contact = self.contact.get(node.id)
        if contact is None:
            raise Violation(
                "BrokerSelfFence",
                f"broker {node.id} serves ({status.state}) but no request of its incarnation "
                f"{status.incarnation} was ever answered",
            )
        until = contact + self.broker_timeout_ms + TICK_SLACK_MS
        self.serving_until[node.id] = until
        if until < self.next_due:
            self.next_due = until

    # --- checks -----------------------------------------------------------------------------------

    def check(self, now: int) -> None:
        """After every event: any deadline passed? (One comparison, most of the time.)"""
        if now > self.next_due:
            self._check_due(now)

    def _check_due(self, now: int) -> None:
        for broker, until in list(self.serving_until.items()):
            if now > until and not self._paused(broker, now):
                self._self_fence(broker, until, now)
        for leader, session in list(self.sessions.items()):
            node = self.nodes[leader]
            if node.core is None or node.inc != session.inc or not node.core.is_leader:
                del self.sessions[leader]
                continue
            if self._paused(leader, now):
                continue
            for broker, due in list(session.due.items()):
                if now > due:
                    self._session(node, session, broker, now)
        self.next_due = min(
            min(self.serving_until.values(), default=NEVER),
            min((d for s in self.sessions.values() for d in s.due.values()), default=NEVER),
        )

    def _paused(self, node_id: int, now: int) -> bool:
        """Whether `node_id`'s deadlines wait: a paused process (pause, leader-stall) cannot act
        on a timer that comes due. Once it resumes, its overdue timer fires before anything else
        it handles, but after the resume itself, so its deadlines move to one tick past the
        resume."""
        if self.nodes[node_id].held is not None:
            self.paused.add(node_id)
            return True
        if node_id not in self.paused:
            return False
        self.paused.discard(node_id)
        resumed = now + TICK_SLACK_MS
        if node_id in self.serving_until:
            self.serving_until[node_id] = max(self.serving_until[node_id], resumed)
        session = self.sessions.get(node_id)
        if session is not None:
            for broker, due in session.due.items():
                session.due[broker] = max(due, resumed)
        return True

    def _self_fence(self, broker: int, until: int, now: int) -> None:
        node = self.nodes[broker]
        core = node.core
        status = core.broker_status() if core is not None else None
        if status is None or not status.serving:
            del self.serving_until[broker]
            return
        age = now - (until - self.broker_timeout_ms - TICK_SLACK_MS)
        raise Violation(
            "BrokerSelfFence",
            f"broker {broker} still serves ({status.state}, incarnation {status.incarnation}, "
            f"broker epoch {status.broker_epoch}) {age} ms after its last answered request "
            f"(broker.heartbeat.timeout.ms {self.broker_timeout_ms})",
        )

    def _session(self, node: SimNode, session: _Session, broker: int, now: int) -> None:
        del session.due[broker]
        info = leader_view(node).get(broker)
        if info is None or info.fenced:
            return
        last = session.heartbeats.get(broker)
        since = (f"its last heartbeat to it at {last} ms" if last is not None
                 else f"its election at {session.since} ms (no heartbeat since)")
        raise Violation(
            "SessionExpiry",
            f"leader {node.id} still holds broker {broker} unfenced ({info.state}, epoch "
            f"{info.epoch}) at {now} ms, {now - max(last or 0, session.since)} ms after {since} "
            f"(broker.session.timeout.ms {self.session_ms})",
        )

    def check_live(self, leader_id: int | None) -> None:
        """BrokersLive, at the end of a run whose tail was fault-free."""
        leader = self.nodes[leader_id].core if leader_id is not None else None
        for broker in self.broker_ids:
            core = self.nodes[broker].core
            status = core.broker_status() if core is not None else None
            if status is None or status.state != "active" or not status.serving:
                said = "not running" if status is None else (
                    f"{status.state}, self-fenced {status.self_fenced}, broker epoch "
                    f"{status.broker_epoch}, metadata offset {status.metadata_offset}")
                raise Violation("BrokersLive", f"broker {broker} ends the run {said}")
            if leader is None:
                continue
            info = leader.brokers_view().get(broker)
            if info is None or info.fenced or info.incarnation != status.incarnation:
                raise Violation(
                    "BrokersLive",
                    f"broker {broker} (incarnation {status.incarnation}) is active, but the "
                    f"leader's image ends the run with {info!r}",
                )


def leader_view(node: SimNode) -> dict[int, Broker]:
    """The brokers as a leader's log has them: its committed image, then every record above it
    (committed or not), applied by the oracle's model: what it will commit, whatever it
    answered."""
    core: RaftCore | None = node.core
    assert core is not None
    image = core.image
    log = core.log_view
    view = observed_brokers(image.brokers)
    if log.end_offset > image.end_offset:
        fold_brokers(view, log.read(image.end_offset, log.end_offset))
    return view
