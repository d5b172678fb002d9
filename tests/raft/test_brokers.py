"""Brokers on real cores: three voters (1, 2, 3) and broker observers (4, 5), messages delivered
by a small loop (`Net`), every flush completed at once. Each test walks transitions of the
proposal's table (lifecycle.py): initial -> inactive -> active -> stopping -> stopped; active ->
inactive on the controller's session expiry; the broker's self-fence and its return;
re-registration; incarnations; failover; NOT_CONTROLLER; and each unsafe switch."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from typing import Any

from reference_node.raft.api import (
    ClientRead,
    LogFlushed,
    ReadReply,
    Ready,
    Receive,
    Shutdown,
    Tick,
)
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.core import RaftCore
from reference_node.raft.lifecycle import BrokerIdentity, new_incarnation
from reference_node.raft.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    Message,
)

CLUSTER = "test-cluster"
VOTERS = (1, 2, 3)
SESSION, INTERVAL, TIMEOUT = 3000, 500, 4500
"""The harness's settings (brokers.md)."""


def config(*unsafe: Unsafe) -> RaftConfig:
    return RaftConfig(broker_session_timeout_ms=SESSION, broker_heartbeat_interval_ms=INTERVAL,
                      broker_heartbeat_timeout_ms=TIMEOUT, unsafe=frozenset(unsafe))


def incarnation(ms: int) -> uuid.UUID:
    return new_incarnation(1_700_000_000_000 + ms, random.Random(ms))


@dataclass
class Wire:
    src: int
    dst: int
    message: Message
    in_reply_to: Message | None


@dataclass
class Net:
    """The cores, the wire, one clock; `cut` pairs lose every message between them, `down`
    nodes neither tick nor receive."""

    cfg: RaftConfig
    brokers: tuple[int, ...] = (4,)
    now: int = 0
    cores: dict[int, RaftCore] = field(default_factory=dict)
    wire: list[Wire] = field(default_factory=list)
    events: list[tuple[int, int, dict[str, Any]]] = field(default_factory=list)
    """(time, node, event)."""
    answers: list[tuple[int, Message, Message | None]] = field(default_factory=list)
    """(receiver, response, request) of every broker response delivered."""
    replies: list[tuple[int, Any]] = field(default_factory=list)
    cut: set[frozenset[int]] = field(default_factory=set)
    down: set[int] = field(default_factory=set)
    drop: Any = None
    """A predicate on Wire: True drops the message."""
    sent: list[tuple[int, Wire]] = field(default_factory=list)
    """(time, message) of everything any core sent."""
    outside: list[Wire] = field(default_factory=list)
    """Messages to a node that is not in the cluster (a test's forged requester)."""

    combined: bool = False
    """Every voter is a broker too (process.roles=broker,controller)."""

    def __post_init__(self) -> None:
        for v in VOTERS:
            identity = BrokerIdentity(incarnation(v), f"node{v}", 9000 + v) \
                if self.combined else None
            self.cores[v] = RaftCore(v, VOTERS, CLUSTER, self.cfg, random.Random(v), 0,
                                     broker=identity)
            self.carry(v)
        for b in self.brokers:
            self.start_broker(b, incarnation(b))

    def start_broker(self, b: int, inc: uuid.UUID) -> None:
        identity = BrokerIdentity(inc, f"broker{b}", 9000 + b)
        self.cores[b] = RaftCore(b, VOTERS, CLUSTER, self.cfg, random.Random(b), self.now,
                                 broker=identity)
        self.down.discard(b)
        self.carry(b)

    def carry(self, node: int) -> None:
        core = self.cores[node]
        ready: Ready = core.ready()
        for send in ready.messages:
            self.wire.append(Wire(node, send.dst, send.message, send.in_reply_to))
            self.sent.append((self.now, self.wire[-1]))
        self.events.extend((self.now, node, e) for e in ready.events)
        self.replies.extend((node, r) for r in ready.replies)
        core.advance(ready)
        if ready.flush:
            self.step(node, LogFlushed(core.log_end_offset))

    def step(self, node: int, inp: Any) -> None:
        self.cores[node].step(inp, now_ms=self.now)
        self.carry(node)

    def isolate(self, node: int) -> None:
        self.cut |= {frozenset((node, other)) for other in self.cores if other != node}

    def heal(self) -> None:
        self.cut.clear()

    def settle(self) -> None:
        for _ in range(10_000):
            if not self.wire:
                return
            w = self.wire.pop(0)
            if w.dst not in self.cores:
                self.outside.append(w)
                continue
            if w.dst in self.down or w.src in self.down or frozenset((w.src, w.dst)) in self.cut \
                    or (self.drop is not None and self.drop(w)):
                continue
            if isinstance(w.message, BrokerRegistrationResponse | BrokerHeartbeatResponse):
                self.answers.append((w.dst, w.message, w.in_reply_to))
            self.step(w.dst, Receive(w.src, w.message, w.in_reply_to))
        raise AssertionError("the network did not settle")

    def run(self, ms: int, every: int = 10) -> None:
        end = self.now + ms
        while self.now < end:
            self.now += every
            for node in self.cores:
                if node not in self.down:
                    self.step(node, Tick(self.now))
            self.settle()

    def leader(self) -> int:
        (leader,) = [n for n in VOTERS if n not in self.down and self.cores[n].is_leader]
        return leader

    def of(self, kind: str, node: int | None = None) -> list[dict[str, Any]]:
        return [e for _, n, e in self.events if e["type"] == kind and node in (None, n)]

    def timed(self, kind: str, node: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        return [(t, e) for t, n, e in self.events if e["type"] == kind and node in (None, n)]

    def states(self, broker: int) -> list[str]:
        """The broker's own successive states, as its broker-state events say."""
        out: list[str] = []
        for e in self.of("broker-state", broker):
            if not out or out[-1] != e["state"]:
                out.append(e["state"])
        return out

    def status(self, broker: int) -> Any:
        status = self.cores[broker].broker_status()
        assert status is not None
        return status

    def ask(self, node: int, request: Message, src: int = 99) -> list[Message]:
        """Deliver `request` to `node` as if from `src`; the broker answers it gave, at once or
        once committed (the wire runs until then)."""
        self.step(node, Receive(src, request))
        for _ in range(300):
            self.settle()
            got = [w.message for w in self.outside if w.in_reply_to is request]
            if got:
                return got
            self.run(10)
        raise AssertionError(f"no answer to {request}")


def behind(w: Wire) -> bool:
    """A drop rule: broker 4 never receives a record (it still learns the leader from answers
    without any), so that its metadata offset stays below its broker epoch."""
    return w.dst == 4 and isinstance(w.message, FetchResponse) and bool(w.message.records)


def started(*unsafe: Unsafe, brokers: tuple[int, ...] = (4,)) -> Net:
    """A cluster whose brokers are all active."""
    net = Net(config(*unsafe), brokers)
    net.run(4000)
    for b in brokers:
        assert net.status(b).state == "active", net.states(b)
    return net


# --- initial -> inactive -> active ----------------------------------------------------------------


def test_a_broker_registers_fenced_then_is_unfenced_once_caught_up() -> None:
    net = started()
    leader = net.leader()
    assert net.states(4) == ["initial", "inactive", "active"]
    (reg,) = net.of("broker-register", leader)
    (unfence,) = net.of("broker-unfence", leader)
    assert reg["broker"] == 4 and reg["incarnation"] == str(incarnation(4))
    assert unfence["epoch"] == reg["epoch"] and unfence["caught_up"] >= reg["epoch"]
    status = net.status(4)
    assert status.serving and not status.self_fenced and status.broker_epoch == reg["epoch"]
    assert status.contact_age_ms is not None and status.contact_age_ms <= INTERVAL + 50
    assert status.metadata_offset > reg["epoch"]
    for node in (*VOTERS, 4):  # every image agrees, the broker's own included
        info = net.cores[node].brokers_view()[4]
        assert (info.state, info.epoch, info.host, info.port) == \
            ("active", reg["epoch"], "broker4", 9004)
    # A broker-state event carries what brokers.md names.
    assert set(net.of("broker-state", 4)[-1]) == {
        "type", "state", "broker_epoch", "metadata_offset", "incarnation", "self_fenced"}


def test_no_unfence_while_the_brokers_metadata_is_behind_its_registration() -> None:
    net = Net(config())
    # The broker's fetches are lost: it heartbeats, but its image never reaches its record.
    net.drop = behind
    net.run(4000)
    assert net.states(4) == ["initial", "inactive"]
    assert net.of("broker-unfence") == []
    status = net.status(4)
    assert status.metadata_offset < status.broker_epoch and not status.serving
    net.drop = None
    net.run(4000)  # its fetch in flight times out first
    assert net.states(4) == ["initial", "inactive", "active"]
    (unfence,) = net.of("broker-unfence")
    assert unfence["caught_up"] >= unfence["epoch"]


def test_unfence_before_caught_up_unfences_a_broker_that_is_behind() -> None:
    net = Net(config(Unsafe.UNFENCE_BEFORE_CAUGHT_UP))
    net.drop = behind
    net.run(4000)
    (unfence,) = net.of("broker-unfence")
    assert unfence["caught_up"] < unfence["epoch"]
    assert net.states(4) == ["initial", "inactive", "active"]
    assert net.status(4).metadata_offset <= net.status(4).broker_epoch


def test_the_controller_unfences_once_the_broker_has_applied_its_registration() -> None:
    # CurrentMetadataOffset is the last offset the broker applied (inclusive), as Kafka's
    # BrokerLifecycleManager sends it (MetadataLoader.lastAppliedOffset): at `epoch - 1` the
    # broker has not applied its own registration record yet; at `epoch` it has (Kafka's
    # BrokerHeartbeatManager.calculateNextBrokerState: currentMetadataOffset >= the record's).
    net = started()
    leader = net.leader()
    (reg,) = net.ask(leader, BrokerRegistrationRequest(6, CLUSTER, incarnation(6), "h", 1))
    assert isinstance(reg, BrokerRegistrationResponse)
    epoch = reg.broker_epoch
    (answer,) = net.ask(leader, BrokerHeartbeatRequest(6, epoch, epoch - 1))
    assert answer == BrokerHeartbeatResponse(ErrorCode.none, is_caught_up=False, is_fenced=True)
    assert net.of("broker-unfence", leader)[-1]["broker"] == 4
    (answer,) = net.ask(leader, BrokerHeartbeatRequest(6, epoch, epoch))
    assert answer == BrokerHeartbeatResponse(ErrorCode.none, is_caught_up=True, is_fenced=False)
    assert net.of("broker-unfence", leader)[-1] == {
        "type": "broker-unfence", "broker": 6, "epoch": epoch,
        "offset": net.cores[leader].brokers_view()[6].since, "caught_up": epoch}


def test_a_broker_heartbeats_its_last_applied_offset() -> None:
    # The broker's side of the same rule: what it sends is its image's last offset, one below
    # the image's end offset, and so is what its broker-state events say.
    net = started()
    heartbeats = [(t, w.message) for t, w in net.sent
                  if w.src == 4 and isinstance(w.message, BrokerHeartbeatRequest)]
    assert heartbeats
    end = net.status(4).metadata_offset  # the image end offset (exclusive)
    assert heartbeats[-1][1].metadata_offset == end - 1
    assert max(h.metadata_offset for _, h in heartbeats) == end - 1
    active = next(e for e in net.of("broker-state", 4) if e["state"] == "active")
    (unfence,) = net.of("broker-unfence")
    assert active["metadata_offset"] >= unfence["epoch"]
    assert unfence["caught_up"] >= unfence["epoch"]


def test_an_image_read_on_the_leader_lists_the_brokers() -> None:
    net = started()
    leader = net.leader()
    net.step(leader, ClientRead(77, 0, image=True))
    net.run(100)
    (reply,) = [r for _, r in net.replies if isinstance(r, ReadReply) and r.request_id == 77]
    assert reply.error == ErrorCode.none and reply.brokers is not None
    assert [(b.broker_id, b.state) for b in reply.brokers] == [(4, "active")]


# --- active -> stopping -> stopped ----------------------------------------------------------------


def test_controlled_shutdown_goes_through_stopping_to_stopped() -> None:
    net = started()
    leader = net.leader()
    net.step(4, Shutdown())
    assert not net.cores[4].shutdown_complete
    net.run(300)
    assert net.status(4).state == "stopping" and net.status(4).serving
    assert net.cores[leader].brokers_view()[4].state == "stopping"
    net.run(1000)
    assert net.states(4) == ["initial", "inactive", "active", "stopping", "stopped"]
    assert net.cores[4].shutdown_complete
    (shut,) = net.of("broker-shutdown", leader)
    (fence,) = net.of("broker-fence", leader)
    assert fence["reason"] == "shutdown" and fence["offset"] > shut["offset"]
    assert net.cores[leader].brokers_view()[4].state == "inactive"
    assert not net.status(4).serving
    stopped_at = net.now
    net.run(2000)  # stopped: it asks nothing more
    assert net.states(4)[-1] == "stopped"
    assert not [w for t, w in net.sent if t > stopped_at and w.src == 4
                and isinstance(w.message, BrokerHeartbeatRequest | BrokerRegistrationRequest)]


def test_a_fenced_broker_that_asks_to_shut_down_may_go_at_once() -> None:
    net = Net(config())
    net.drop = behind
    net.run(3000)  # registered, never caught up: fenced
    net.step(4, Shutdown())
    net.run(INTERVAL * 2)
    assert net.status(4).state == "stopped" and net.cores[4].shutdown_complete
    assert net.of("broker-shutdown") == [] and net.of("broker-fence") == []


def test_a_broker_never_registered_stops_at_once() -> None:
    net = Net(config())
    net.step(4, Shutdown())
    assert net.cores[4].shutdown_complete


# --- sessions: the controller fences, the broker fences itself -----------------------------------


def test_a_cut_off_broker_is_fenced_by_the_controller_before_it_fences_itself() -> None:
    net = started()
    leader = net.leader()
    net.isolate(4)
    cut_at = net.now
    net.run(TIMEOUT + 1000)
    ((fenced_at, fence),) = net.timed("broker-fence", leader)
    assert fence["reason"] == "session-expired"
    assert cut_at + SESSION - INTERVAL <= fenced_at <= cut_at + SESSION + 50
    assert net.cores[leader].brokers_view()[4].state == "inactive"
    self_fenced = [(t, e) for t, e in net.timed("broker-state", 4) if e["self_fenced"]]
    assert self_fenced and fenced_at < self_fenced[-1][0] <= cut_at + TIMEOUT + 50
    status = net.status(4)
    assert status.self_fenced and not status.serving and status.contact_age_ms > TIMEOUT
    assert net.cores[4].next_deadline_ms() > net.now  # no leader to ask: no timer spins
    # Back in touch: its heartbeats are answered, the controller unfences it again.
    net.heal()
    net.run(2000)
    status = net.status(4)
    assert status.serving and not status.self_fenced and status.state == "active"
    assert len(net.of("broker-unfence", leader)) == 2
    assert net.cores[leader].brokers_view()[4].state == "active"


def test_no_self_fence_keeps_a_cut_off_broker_serving() -> None:
    net = started(Unsafe.NO_SELF_FENCE)
    leader = net.leader()
    net.isolate(4)
    net.run(TIMEOUT + 1000)
    status = net.status(4)
    assert status.serving and not status.self_fenced and status.contact_age_ms > TIMEOUT
    # The controller side is unchanged: the session still expires.
    assert [e["reason"] for e in net.of("broker-fence", leader)] == ["session-expired"]


def test_the_broker_deadline_wakes_it_for_heartbeats_and_the_leader_for_sessions() -> None:
    net = started()
    broker, leader = net.cores[4], net.cores[net.leader()]
    assert broker.next_deadline_ms() <= net.now + INTERVAL
    net.isolate(4)
    net.run(SESSION - 600)
    # The session ends within the leader's next deadline (heartbeats no longer renew it).
    assert leader.next_deadline_ms() <= net.now + 600


# --- re-registration and incarnations -------------------------------------------------------------


def test_the_same_incarnation_registering_again_keeps_its_epoch_and_state() -> None:
    # A retried (or replayed) registration of the incarnation registered amends it: the same
    # broker epoch, unfenced still (Kafka's ClusterControlManager.registerBroker).
    net = started()
    leader = net.leader()
    first = net.status(4).broker_epoch
    (answer,) = net.ask(leader, BrokerRegistrationRequest(4, CLUSTER, incarnation(4), "x", 1))
    assert answer == BrokerRegistrationResponse(ErrorCode.none, first)
    info = net.cores[leader].brokers_view()[4]
    assert (info.epoch, info.state, info.host, info.port) == (first, "active", "x", 1)
    register = net.of("broker-register", leader)[-1]
    assert (register["epoch"], register["amended"]) == (first, True) and register["offset"] > first
    assert "replaced" not in register
    net.run(3000)
    assert net.of("broker-refused", leader) == []
    assert net.status(4).broker_epoch == first and net.status(4).state == "active"
    for node in (*VOTERS, 4):  # every image applies the amendment alike
        assert net.cores[node].brokers_view()[4] == info


def test_stale_broker_epoch_makes_the_broker_register_again() -> None:
    net = started()
    leader = net.leader()
    first = net.status(4).broker_epoch
    net.isolate(4)
    net.run(SESSION + 200)  # its session runs out: fenced, so another incarnation may register
    other = incarnation(7)
    (answer,) = net.ask(leader, BrokerRegistrationRequest(4, CLUSTER, other, "x", 1))
    assert isinstance(answer, BrokerRegistrationResponse) and answer.broker_epoch > first
    assert net.of("broker-register", leader)[-1]["replaced"] == str(incarnation(4))
    net.heal()
    net.run(3000)
    refused = net.of("broker-refused", leader)
    assert refused and refused[0]["error"] == "stale_broker_epoch"
    status = net.status(4)  # the forged one never heartbeats: fenced, so 4 takes its id back
    assert status.state == "active" and status.broker_epoch > answer.broker_epoch
    assert [e["epoch"] for e in net.of("broker-register", leader)] == \
        [first, answer.broker_epoch, status.broker_epoch]
    assert "initial" in net.states(4)[2:]


def test_another_incarnation_is_refused_while_the_session_is_live_whatever_its_id() -> None:
    # No order among incarnation ids (no host clock decides): a greater id is refused while the
    # registered one's session is live, a smaller one accepted once it has run out.
    net = started()
    leader = net.leader()
    epoch = net.status(4).broker_epoch
    older, newer = incarnation(3), incarnation(5)
    assert older.int < incarnation(4).int < newer.int
    (answer,) = net.ask(leader, BrokerRegistrationRequest(4, CLUSTER, newer, "x", 1))
    assert answer == BrokerRegistrationResponse(ErrorCode.duplicate_broker_registration)
    assert net.of("broker-refused", leader)[-1] == {
        "type": "broker-refused", "broker": 4, "error": "duplicate_broker_registration",
        "incarnation": str(newer)}
    assert net.cores[leader].brokers_view()[4].epoch == epoch
    net.isolate(4)
    net.run(SESSION + 200)
    assert net.cores[leader].brokers_view()[4].state == "inactive"
    (answer,) = net.ask(leader, BrokerRegistrationRequest(4, CLUSTER, older, "x", 1))
    assert answer.error == ErrorCode.none and answer.broker_epoch > epoch
    info = net.cores[leader].brokers_view()[4]
    assert (info.incarnation, info.epoch, info.state) == (older, answer.broker_epoch, "inactive")


def test_a_fenced_registration_has_no_live_session() -> None:
    # Kafka's hasValidSession is false for a fenced broker: another incarnation may replace a
    # registration that was never unfenced, at once.
    net = Net(config())
    net.drop = behind  # broker 4 stays fenced
    net.run(4000)
    leader = net.leader()
    assert net.cores[leader].brokers_view()[4].state == "inactive"
    (answer,) = net.ask(leader, BrokerRegistrationRequest(4, CLUSTER, incarnation(3), "x", 1))
    assert answer.error == ErrorCode.none


def test_accept_old_incarnation_lets_an_older_process_take_the_id_back() -> None:
    net = started(Unsafe.ACCEPT_OLD_INCARNATION)
    leader = net.leader()
    older = incarnation(3)
    (answer,) = net.ask(leader, BrokerRegistrationRequest(4, CLUSTER, older, "x", 1))
    assert answer.error == ErrorCode.none
    assert net.cores[leader].brokers_view()[4].incarnation == older


def test_a_restarted_broker_registers_its_new_incarnation_once_the_old_session_ran_out() -> None:
    net = started()
    leader = net.leader()
    net.down.add(4)
    net.run(100)
    killed = net.now
    net.start_broker(4, incarnation(40))
    net.run(SESSION + 3000)
    (refused, *_) = net.of("broker-refused", leader)
    assert refused["error"] == "duplicate_broker_registration"
    ((fenced_at, fence),) = net.timed("broker-fence", leader)
    assert fence["reason"] == "session-expired" and fenced_at >= killed
    ((registered_at, register),) = [(t, e) for t, e in net.timed("broker-register", leader)
                                    if e["incarnation"] == str(incarnation(40))]
    assert registered_at >= fenced_at and register["replaced_fenced"] is True
    info = net.cores[leader].brokers_view()[4]
    assert info.incarnation == incarnation(40) and info.state == "active"
    assert net.status(4).broker_epoch == info.epoch


# --- failover ------------------------------------------------------------------------------------


def test_a_new_leader_gives_every_broker_a_session_then_fences_the_silent_one() -> None:
    net = started(brokers=(4, 5))
    old = net.leader()
    net.down |= {old, 5}  # the controller and broker 5 die together
    net.run(4000)
    new = net.leader()
    ((became, _),) = [(t, e) for t, e in net.timed("state", new) if e["state"] == "leader"]
    net.run(SESSION + 500)
    fences = net.timed("broker-fence", new)
    assert [(e["broker"], e["reason"]) for _, e in fences] == [(5, "session-expired")]
    assert became + SESSION - 50 <= fences[0][0] <= became + SESSION + 50
    view = net.cores[new].brokers_view()
    assert view[4].state == "active" and view[5].state == "inactive"
    assert net.status(4).serving  # broker 4 found the new controller in time


# --- refusals -------------------------------------------------------------------------------------


def test_followers_answer_not_controller_and_the_broker_finds_the_leader() -> None:
    net = started()
    follower = next(v for v in VOTERS if v != net.leader())
    reg = BrokerRegistrationRequest(6, CLUSTER, incarnation(6), "h", 1)
    hb = BrokerHeartbeatRequest(4, net.status(4).broker_epoch, 0)
    assert net.ask(follower, reg) == [BrokerRegistrationResponse(ErrorCode.not_controller)]
    assert net.ask(follower, hb) == [BrokerHeartbeatResponse(ErrorCode.not_controller)]
    assert net.of("broker-refused", follower) == []  # NOT_CONTROLLER is no event


def test_a_leader_answers_not_controller_until_its_epoch_is_committed() -> None:
    net = Net(config(), brokers=())
    net.drop = lambda w: isinstance(w.message, FetchRequest)  # the LeaderChange never commits
    while not any(c.is_leader for c in net.cores.values()):
        net.run(10)
    leader = net.leader()
    req = BrokerRegistrationRequest(6, CLUSTER, incarnation(6), "h", 1)
    net.step(leader, Receive(99, req))
    assert [w.message for w in net.wire if w.in_reply_to is req] == \
        [BrokerRegistrationResponse(ErrorCode.not_controller)]
    assert not net.cores[leader].state.hw_known  # type: ignore[union-attr]


def test_requests_that_cannot_be_registered_are_refused_with_kafkas_codes() -> None:
    net = started()
    leader = net.leader()
    inc = incarnation(6)
    cases = [
        (BrokerRegistrationRequest(6, "other", inc, "h", 1), ErrorCode.inconsistent_cluster_id),
        (BrokerRegistrationRequest(-1, CLUSTER, inc, "h", 1), ErrorCode.invalid_request),
        (BrokerRegistrationRequest(6, CLUSTER, inc, "h", 0), ErrorCode.invalid_request),
        (BrokerRegistrationRequest(6, CLUSTER, inc, "h", 65536), ErrorCode.invalid_request),
    ]
    for req, error in cases:
        assert net.ask(leader, req) == [BrokerRegistrationResponse(error)], req
    epoch = net.status(4).broker_epoch
    assert net.ask(leader, BrokerHeartbeatRequest(6, 0, 0)) == \
        [BrokerHeartbeatResponse(ErrorCode.broker_id_not_registered)]
    assert net.ask(leader, BrokerHeartbeatRequest(4, epoch + 1, 0)) == \
        [BrokerHeartbeatResponse(ErrorCode.stale_broker_epoch)]
    assert net.of("broker-register", leader)[-1]["broker"] == 4  # nothing was appended


def test_a_want_fence_heartbeat_fences_and_the_answer_waits_for_the_commit() -> None:
    net = started()
    leader = net.leader()
    epoch = net.status(4).broker_epoch
    hb = BrokerHeartbeatRequest(4, epoch, net.status(4).metadata_offset, want_fence=True)
    (answer,) = net.ask(leader, hb)
    assert answer == BrokerHeartbeatResponse(ErrorCode.none, is_caught_up=True, is_fenced=True)
    (fence,) = net.of("broker-fence", leader)
    assert fence["reason"] == "want-fence"
    assert net.cores[leader].high_watermark > fence["offset"]


def test_leadership_lost_before_the_commit_answers_not_controller() -> None:
    net = started()
    leader = net.leader()
    net.isolate(leader)
    req = BrokerRegistrationRequest(6, CLUSTER, incarnation(6), "h", 1)
    net.step(leader, Receive(99, req))
    assert net.of("broker-register", leader)[-1]["broker"] == 6  # appended, not committed
    assert not [w for w in net.wire if w.in_reply_to is req]
    net.step(leader, Shutdown())  # the leader resigns
    assert [w.message for w in net.wire if w.in_reply_to is req] == \
        [BrokerRegistrationResponse(ErrorCode.not_controller)]


def test_an_answer_to_a_request_no_longer_in_flight_is_ignored() -> None:
    net = started()
    before = net.status(4)
    stale = BrokerHeartbeatRequest(4, before.broker_epoch, 0)
    net.step(4, Receive(net.leader(), BrokerHeartbeatResponse(ErrorCode.stale_broker_epoch),
                        stale))
    assert net.status(4).broker_epoch == before.broker_epoch
    assert net.status(4).state == "active"


# --- combined roles (process.roles=broker,controller) --------------------------------------------


def test_with_combined_roles_every_voter_registers_the_leader_with_itself() -> None:
    net = Net(config(), brokers=(4,), combined=True)
    net.run(4000)
    leader = net.leader()
    for node in (*VOTERS, 4):
        assert net.states(node)[:3] == ["initial", "inactive", "active"], (node, net.states(node))
    view = net.cores[leader].brokers_view()
    assert sorted(view) == [1, 2, 3, 4] and not any(b.fenced for b in view.values())
    # the leader's own broker never crossed the wire: no request of its own, no answer to it
    assert not [w for _, w in net.sent if w.src == leader and w.dst == leader]
    assert not [w for _, w in net.sent
                if isinstance(w.message, BrokerRegistrationRequest | BrokerHeartbeatRequest)
                and w.message.sender == leader]
    assert net.of("broker-register", leader)  # yet it registered, as a record in the log


def test_with_combined_roles_a_deposed_leader_heartbeats_the_next_one() -> None:
    net = Net(config(), brokers=(), combined=True)
    net.run(4000)
    old = net.leader()
    net.isolate(old)
    # Its own controller answers it until check-quorum deposes it (Kafka's combined mode too);
    # from then on nothing answers, and it fences itself one broker timeout later.
    net.run(9000)
    new = net.leader()
    assert new != old
    # cut off: the old leader's broker fences itself; the new controller fences it
    assert net.status(old).self_fenced and not net.status(old).serving
    assert net.cores[new].brokers_view()[old].fenced
    net.heal()
    net.run(3000)
    assert net.status(old).state == "active" and net.status(old).serving
    assert not net.cores[new].brokers_view()[old].fenced
    sent = [w for _, w in net.sent if w.src == old and w.dst == new
            and isinstance(w.message, BrokerHeartbeatRequest)]
    assert sent, "the old leader's broker heartbeats the new leader over the wire"
