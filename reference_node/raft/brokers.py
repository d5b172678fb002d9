"""Brokers: registration, heartbeats, fencing and incarnations (the early KIP-631 proposal, as
Kafka's KRaft controller and BrokerLifecycleManager carry it out), sans I/O.

Theory of operation. A broker is an observer of the metadata log that also registers with the
active controller (the quorum leader) and heartbeats it. The controller's decisions are metadata
records, DATA entries of the log written only by the leader (`encode_register`, `encode_fence`,
`encode_unfence`, `encode_shutdown`); every node applies them to its image (`Image.brokers`), so
every node agrees on which brokers are registered, fenced or stopping, at every offset.

Controller side (on the Leader, once its own epoch's entry is committed, `Leader.hw_known`; before
that every request is NOT_CONTROLLER): its view is the image's brokers plus the records it
appended since (`controller_view`). A registration appends register-broker (the broker epoch is
that record's offset; a registration from an older incarnation than the registered one is
DUPLICATE_BROKER_REGISTRATION); a heartbeat renews the broker's session and may append an
unfence (fenced, registration committed, and the metadata offset, an image end offset, above
the broker epoch: the broker has applied its own registration), a fence
(want_fence; or, with want_shutdown in controlled shutdown, the end of it) or a shutdown-broker.
Every answer goes out when the records it depends on commit, as membership.py answers voter
changes; leadership lost answers the waiting ones NOT_CONTROLLER. A leader tick fences an unfenced
broker whose session (`broker_session_timeout_ms`) ran out; a new leader starts every session at
the moment it became leader (`Leader.became_ms`), so brokers survive a failover without being
fenced all at once, and silent ones are fenced one session timeout after it.

Broker side (`BrokerLifecycle`, owned by the core of a broker node): registers with the leader it
follows, then heartbeats it every `broker_heartbeat_interval_ms` with its image end offset. It
fences itself (`self_fenced`: stops serving) when no request has been answered NONE for
`broker_heartbeat_timeout_ms` since it was sent; that timeout is longer than the controller's
session timeout, so the controller has already fenced a cut-off broker when it stops serving.

The proposal's broker states, mapped to ours (`BrokerLifecycle.state`, `BrokerInfo.state`):

| proposal | ours | meaning here |
| --- | --- | --- |
| 0 Initial | `initial` | no registration answered yet (or the controller forgot the one we had) |
| 1 Inactive | `inactive` | registered, fenced: not in metadata, not serving |
| 2 Active | `active` | unfenced: serving |
| 3 Stopping | `stopping` | unfenced, in controlled shutdown: still serving |
| (none) | `stopped` | the controller answered should_shut_down: the process may exit |

The proposal's "target state" of a heartbeat is Kafka's want_fence / want_shutdown flags; its
INVALID_INCARNATION_ID is Kafka's DUPLICATE_BROKER_REGISTRATION; its 64-bit incarnation from
ZooKeeper's czxid is a time-ordered UUID (`new_incarnation`, UUIDv7) made at process start.
"""

from __future__ import annotations

import functools
import json
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeGuard

from reference_node.raft.config import Unsafe
from reference_node.raft.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerRequest,
    BrokerResponse,
    Entry,
    EntryKind,
    ErrorCode,
    Message,
)
from reference_node.raft.states import NEVER, Leader, PendingBrokerAnswer

if TYPE_CHECKING:
    from reference_node.raft.ops import CoreOps

__all__ = [
    "BROKER_OPS",
    "FENCE_REASONS",
    "BrokerChange",
    "BrokerIdentity",
    "BrokerInfo",
    "BrokerLifecycle",
    "BrokerStatus",
    "apply_change",
    "controller_view",
    "decode_broker_record",
    "encode_fence",
    "encode_register",
    "encode_shutdown",
    "encode_unfence",
    "fail_pending",
    "leader_deadline",
    "new_incarnation",
    "on_commit",
    "on_heartbeat_request",
    "on_leader_tick",
    "on_registration_request",
]

REGISTER, FENCE, UNFENCE, SHUTDOWN = (
    "register-broker", "fence-broker", "unfence-broker", "shutdown-broker"
)
BROKER_OPS = frozenset({REGISTER, FENCE, UNFENCE, SHUTDOWN})
"""The `op` of every broker record."""
FENCE_REASONS = frozenset({"session-expired", "shutdown", "want-fence"})

MAX_PORT = 65535


# --- incarnations ---------------------------------------------------------------------------------


def new_incarnation(now_unix_ms: int, rng: random.Random) -> uuid.UUID:
    """A time-ordered incarnation id (UUIDv7 layout: 48-bit Unix milliseconds in the top bits,
    version 7, the RFC 4122 variant, random rest), so that a later process start compares greater
    (`incarnation.int`). Made by the host once per process start."""
    value = (now_unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= rng.getrandbits(12) << 64
    value |= 0b10 << 62
    value |= rng.getrandbits(62)
    return uuid.UUID(int=value)


# --- the image's view of a broker -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    """A registered broker, as the metadata records applied so far leave it."""

    broker_id: int
    incarnation: uuid.UUID
    epoch: int
    """The broker epoch: the offset of its register-broker record."""
    host: str
    port: int
    fenced: bool = True
    shutdown: bool = False
    """In controlled shutdown ("stopping")."""
    since: int = -1
    """The offset of the record that last changed `fenced`/`shutdown` (or registered it)."""

    @property
    def state(self) -> str:
        if self.fenced:
            return "inactive"
        return "stopping" if self.shutdown else "active"

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker_id, "incarnation": str(self.incarnation),
                "epoch": self.epoch, "host": self.host, "port": self.port,
                "fenced": self.fenced, "shutdown": self.shutdown, "since": self.since,
                "state": self.state}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> BrokerInfo:
        """The inverse of `to_json` (`state` is derived, so not read); KeyError, TypeError or
        ValueError for anything else."""
        info = cls(int(body["broker"]), uuid.UUID(body["incarnation"]), int(body["epoch"]),
                   str(body["host"]), int(body["port"]), bool(body["fenced"]),
                   bool(body["shutdown"]), int(body["since"]))
        return info


# --- the records ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerChange:
    """A decoded broker record. Fields an op does not carry keep their defaults."""

    op: str
    broker: int
    epoch: int = -1
    """fence / unfence / shutdown: the registration epoch it applies to."""
    incarnation: uuid.UUID | None = None
    host: str = ""
    port: int = 0
    reason: str = ""
    caught_up: int = -1
    """unfence: the metadata offset the broker's heartbeat reported."""


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def encode_register(broker: int, incarnation: uuid.UUID, host: str, port: int) -> bytes:
    return _encode({"op": REGISTER, "broker": broker, "incarnation": str(incarnation),
                    "host": host, "port": port})


def encode_fence(broker: int, epoch: int, reason: str) -> bytes:
    return _encode({"op": FENCE, "broker": broker, "epoch": epoch, "reason": reason})


def encode_unfence(broker: int, epoch: int, caught_up: int) -> bytes:
    return _encode({"op": UNFENCE, "broker": broker, "epoch": epoch, "caught_up": caught_up})


def encode_shutdown(broker: int, epoch: int) -> bytes:
    return _encode({"op": SHUTDOWN, "broker": broker, "epoch": epoch})


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def decode_broker_record(payload: bytes) -> BrokerChange | None:
    """The broker record in a data record's value, or None when it is not one (anything that is
    not a JSON object with a broker op and that op's fields, well typed)."""
    if not payload.startswith(b"{"):
        return None
    return _decode(payload)


@functools.lru_cache(maxsize=1024)
def _decode(payload: bytes) -> BrokerChange | None:
    # Cached as image.py caches kv commands: every node applies the same records.
    try:
        body = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(body, dict) or body.get("op") not in BROKER_OPS:
        return None
    op, broker = body["op"], body.get("broker")
    if not _is_int(broker):
        return None
    if op == REGISTER:
        host, port, text = body.get("host"), body.get("port"), body.get("incarnation")
        if not isinstance(host, str) or not _is_int(port) or not isinstance(text, str):
            return None
        try:
            incarnation = uuid.UUID(text)
        except ValueError:
            return None
        return BrokerChange(op, broker, incarnation=incarnation, host=host, port=port)
    epoch = body.get("epoch")
    if not _is_int(epoch):
        return None
    if op == FENCE:
        reason = body.get("reason")
        return BrokerChange(op, broker, epoch, reason=reason) if reason in FENCE_REASONS \
            else None
    if op == UNFENCE:
        caught_up = body.get("caught_up")
        return BrokerChange(op, broker, epoch, caught_up=caught_up) if _is_int(caught_up) \
            else None
    return BrokerChange(op, broker, epoch)


def apply_change(brokers: Mapping[int, BrokerInfo], change: BrokerChange, offset: int
                 ) -> BrokerInfo | None:
    """What the record at `offset` makes of its broker, or None when it changes nothing (a
    fence/unfence/shutdown of another registration epoch, or of a state it is already in). The
    image and the controller's view both apply records with it, so they cannot disagree."""
    if change.op == REGISTER:
        assert change.incarnation is not None
        return BrokerInfo(change.broker, change.incarnation, offset, change.host, change.port,
                          fenced=True, shutdown=False, since=offset)
    info = brokers.get(change.broker)
    if info is None or info.epoch != change.epoch:
        return None
    if change.op == FENCE:
        new = replace(info, fenced=True, shutdown=False)
    elif change.op == UNFENCE:
        new = replace(info, fenced=False, shutdown=False)
    else:
        new = replace(info, shutdown=True)
    if new == info:
        return None
    return replace(new, since=offset)


# --- controller side (the quorum leader) -------------------------------------------------------


def _active_leader(core: CoreOps) -> Leader | None:
    """The leader state when this node may act as the active controller: it leads, is not
    stopping, and has committed an entry of its own epoch (so its image holds every committed
    broker record); else None (NOT_CONTROLLER)."""
    state = core.state
    if not isinstance(state, Leader) or core.shutting_down or not state.hw_known:
        return None
    return state


def controller_view(core: CoreOps, state: Leader) -> dict[int, BrokerInfo]:
    """The image's brokers with the records this leader appended since (committed or not)."""
    view = dict(core.image.brokers)
    view.update(state.broker_view)
    return view


def _refused(core: CoreOps, src: int, req: BrokerRequest, error: ErrorCode) -> None:
    if error != ErrorCode.not_controller:
        fields: dict[str, Any] = {"broker": req.sender, "error": error.name}
        if isinstance(req, BrokerRegistrationRequest):
            fields["incarnation"] = str(req.incarnation)
        core.event(type="broker-refused", **fields)
    response: BrokerResponse = (
        BrokerRegistrationResponse(error) if isinstance(req, BrokerRegistrationRequest)
        else BrokerHeartbeatResponse(error)
    )
    core.answer(src, req, response)


def _append(core: CoreOps, state: Leader, payload: bytes) -> BrokerInfo:
    """Append one broker record; the view takes it at once (the answer waits for its commit)."""
    change = decode_broker_record(payload)
    assert change is not None
    offset = core.log.end_offset
    info = apply_change(controller_view(core, state), change, offset)
    assert info is not None, f"a broker record that changes nothing: {change}"
    state.broker_view[change.broker] = info
    state.broker_last_record[change.broker] = offset
    if change.op == REGISTER:
        core.event(type="broker-register", broker=change.broker,
                   incarnation=str(change.incarnation), epoch=offset)
    elif change.op == FENCE:
        core.event(type="broker-fence", broker=change.broker, epoch=change.epoch, offset=offset,
                   reason=change.reason)
    elif change.op == UNFENCE:
        core.event(type="broker-unfence", broker=change.broker, epoch=change.epoch,
                   offset=offset, caught_up=change.caught_up)
    else:
        core.event(type="broker-shutdown", broker=change.broker, epoch=change.epoch,
                   offset=offset)
    core.append_entries([Entry(offset, core.epoch, EntryKind.DATA, payload)])
    return info


def _wait(core: CoreOps, state: Leader, answer: PendingBrokerAnswer) -> None:
    """Queue the answer; it goes at once when what it depends on is committed already. (What was
    appended is replicated by the core: it wakes the parked fetches when the log grew.)"""
    state.broker_answers.append(answer)
    on_commit(core, state)


def _registration_error(core: CoreOps, req: BrokerRegistrationRequest,
                        view: Mapping[int, BrokerInfo]) -> ErrorCode | None:
    if not core.cluster_ok(req.cluster_id):
        return ErrorCode.inconsistent_cluster_id
    # A voter's id is a broker's too with combined roles (Kafka's, process.roles=broker,
    # controller); a separate broker that takes a voter's id is refused by its configuration.
    if req.sender < 0 or not 1 <= req.port <= MAX_PORT:
        return ErrorCode.invalid_request
    registered = view.get(req.sender)
    if registered is not None and req.incarnation.int < registered.incarnation.int and \
            not core.config.has(Unsafe.ACCEPT_OLD_INCARNATION):
        return ErrorCode.duplicate_broker_registration
    return None


def on_registration_request(core: CoreOps, src: int, req: BrokerRegistrationRequest) -> None:
    """BrokerRegistration: a new broker epoch (its register-broker record's offset), answered
    once that record commits. Same or newer incarnation: always a new registration."""
    state = _active_leader(core)
    if state is None:
        _refused(core, src, req, ErrorCode.not_controller)
        return
    error = _registration_error(core, req, controller_view(core, state))
    if error is not None:
        _refused(core, src, req, error)
        return
    info = _append(core, state, encode_register(req.sender, req.incarnation, req.host, req.port))
    state.broker_heartbeats[req.sender] = core.now
    _wait(core, state, PendingBrokerAnswer(src, req, info.epoch))


def on_heartbeat_request(core: CoreOps, src: int, req: BrokerHeartbeatRequest) -> None:
    """BrokerHeartbeat: renew the session, then move the broker toward what it asks for and
    what it has earned (see the module doc); answered once the records it depends on commit."""
    state = _active_leader(core)
    if state is None:
        _refused(core, src, req, ErrorCode.not_controller)
        return
    info = controller_view(core, state).get(req.sender)
    if info is None:
        _refused(core, src, req, ErrorCode.broker_id_not_registered)
        return
    if req.broker_epoch != info.epoch:
        _refused(core, src, req, ErrorCode.stale_broker_epoch)
        return
    state.broker_heartbeats[req.sender] = core.now
    should_shut_down = False
    b, e = info.broker_id, info.epoch
    if info.fenced:
        if req.want_shutdown:
            should_shut_down = True  # nothing to hand over: it may go at once
        elif not req.want_fence and info.epoch < core.hw and (
            req.metadata_offset > info.epoch or core.config.has(Unsafe.UNFENCE_BEFORE_CAUGHT_UP)
        ):
            _append(core, state, encode_unfence(b, e, req.metadata_offset))
    elif req.want_fence:
        _append(core, state, encode_fence(b, e, "want-fence"))
    elif req.want_shutdown and not info.shutdown:
        _append(core, state, encode_shutdown(b, e))
    elif req.want_shutdown:
        _append(core, state, encode_fence(b, e, "shutdown"))
        should_shut_down = True
    after = state.broker_last_record.get(b, -1)
    _wait(core, state, PendingBrokerAnswer(src, req, after, should_shut_down))


def _answer(core: CoreOps, pending: PendingBrokerAnswer) -> None:
    req = pending.request
    if isinstance(req, BrokerRegistrationRequest):
        core.answer(pending.src, req, BrokerRegistrationResponse(ErrorCode.none, pending.after))
        return
    info = core.image.brokers.get(req.sender)
    if info is None or info.epoch != req.broker_epoch:
        # Registered again (another process of this id) while the answer waited.
        core.answer(pending.src, req, BrokerHeartbeatResponse(ErrorCode.stale_broker_epoch))
        return
    core.answer(pending.src, req, BrokerHeartbeatResponse(
        ErrorCode.none, is_caught_up=req.metadata_offset > info.epoch, is_fenced=info.fenced,
        should_shut_down=pending.should_shut_down,
    ))


def on_commit(core: CoreOps, state: Leader) -> None:
    """The high watermark moved: answer every request whose records it committed, with the
    committed image's word on the broker."""
    if not state.broker_answers:
        return
    waiting = []
    for pending in state.broker_answers:
        if pending.after < core.hw:
            _answer(core, pending)
        else:
            waiting.append(pending)
    state.broker_answers = waiting


def fail_pending(core: CoreOps, old: Leader) -> None:
    """Leadership lost: what waited for a commit is NOT_CONTROLLER (the broker asks the next
    leader; its records may still commit under it)."""
    for pending in old.broker_answers:
        _refused(core, pending.src, pending.request, ErrorCode.not_controller)
    old.broker_answers = []


def _session_start(state: Leader, broker: int) -> int:
    return state.broker_heartbeats.get(broker, state.became_ms)


def on_leader_tick(core: CoreOps, state: Leader) -> None:
    """Fence every unfenced broker (active or stopping) whose session ran out."""
    if _active_leader(core) is not state:
        return
    timeout = core.config.broker_session_timeout_ms
    expired = [(broker, info.epoch) for broker, info in sorted(controller_view(core, state).items())
               if not info.fenced and core.now - _session_start(state, broker) >= timeout]
    for broker, epoch in expired:
        _append(core, state, encode_fence(broker, epoch, "session-expired"))


def leader_deadline(core: CoreOps) -> int:
    """When the next unfenced broker's session runs out (NEVER: none, or not the active
    controller)."""
    if not core.image.brokers and not isinstance(core.state, Leader):
        return NEVER  # asked after every input: the common case (no brokers) costs nothing
    state = _active_leader(core)
    if state is None or not (core.image.brokers or state.broker_view):
        return NEVER
    timeout = core.config.broker_session_timeout_ms
    return min((_session_start(state, b) + timeout
                for b, info in controller_view(core, state).items() if not info.fenced),
               default=NEVER)


# --- broker side ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """What a broker process registers as: its incarnation (made at process start) and the client
    listener it advertises."""

    incarnation: uuid.UUID
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    """A broker's own view of itself (`RaftCore.broker_status`)."""

    state: str
    incarnation: uuid.UUID
    broker_epoch: int
    self_fenced: bool
    serving: bool
    contact_age_ms: int | None
    """Since the send time of the latest request answered NONE; None: never answered."""
    metadata_offset: int


class BrokerLifecycle:
    """The broker side (Kafka's BrokerLifecycleManager): register, heartbeat, self-fence, stop.

    One request in flight at a time, to the leader the core follows; a request that is not
    answered within the request timeout, or whose leader is no longer the one followed, is given
    up and the next one sent. The core calls `poll` after every input.
    """

    __slots__ = ("broker_epoch", "identity", "in_flight", "in_flight_dst", "last_contact_ms",
                 "next_heartbeat_ms", "reported", "retry_at", "sent_ms", "state",
                 "want_shutdown")

    def __init__(self, identity: BrokerIdentity) -> None:
        self.identity = identity
        self.state = "initial"
        self.broker_epoch = -1
        """-1 while not registered (or the controller forgot the registration)."""
        self.last_contact_ms: int | None = None
        self.in_flight: BrokerRequest | None = None
        self.in_flight_dst = -1
        self.sent_ms = 0
        self.retry_at = 0
        self.next_heartbeat_ms = 0
        self.want_shutdown = False
        self.reported: tuple[str, bool] | None = None
        """(state, self_fenced) as the latest broker-state event said."""

    # --- what the broker is -----------------------------------------------------------------

    def self_fenced(self, core: CoreOps) -> bool:
        if core.config.has(Unsafe.NO_SELF_FENCE):
            return False
        return self.last_contact_ms is None or \
            core.now - self.last_contact_ms > core.config.broker_heartbeat_timeout_ms

    def serving(self, core: CoreOps) -> bool:
        return self.state in ("active", "stopping") and not self.self_fenced(core)

    def status(self, core: CoreOps) -> BrokerStatus:
        age = None if self.last_contact_ms is None else core.now - self.last_contact_ms
        return BrokerStatus(self.state, self.identity.incarnation, self.broker_epoch,
                            self.self_fenced(core), self.serving(core), age,
                            core.image.end_offset)

    def deadline(self, core: CoreOps) -> int:
        """The earliest time the lifecycle wants a Tick: a request timing out, a retry, the next
        heartbeat, or the moment it fences itself (so that the event is on time)."""
        if self.state == "stopped":
            return NEVER
        config = core.config
        if self.in_flight is not None:
            d = self.sent_ms + config.request_timeout_ms
        else:
            d = self.retry_at if self.broker_epoch < 0 else \
                max(self.retry_at, self.next_heartbeat_ms)
            if d <= core.now:
                # Due, yet `poll` sent nothing: no leader is known. The input that brings one
                # polls again; a timer would only spin.
                d = NEVER
        if self.last_contact_ms is not None and not self.self_fenced(core) and \
                not config.has(Unsafe.NO_SELF_FENCE):
            d = min(d, self.last_contact_ms + config.broker_heartbeat_timeout_ms + 1)
        return d

    # --- inputs ---------------------------------------------------------------------------------

    def on_shutdown(self, core: CoreOps) -> None:
        """Controlled shutdown: heartbeat want_shutdown (at once) until should_shut_down. A broker
        never registered has nothing to hand over: it stops at once."""
        self.want_shutdown = True
        self.next_heartbeat_ms = core.now
        if self.broker_epoch < 0:
            self.state = "stopped"
        self.note(core)

    def on_response(self, core: CoreOps, src: int, resp: BrokerResponse,
                    in_reply_to: Message | None) -> None:
        """An answer from the controller; ignored unless it answers the request in flight."""
        req = self.in_flight
        if req is None:
            return
        if in_reply_to is not None and in_reply_to is not req:
            return  # an answer to a request we gave up on
        if in_reply_to is None and (src != self.in_flight_dst or
                                    isinstance(resp, BrokerRegistrationResponse) !=
                                    isinstance(req, BrokerRegistrationRequest)):
            return
        self.in_flight = None
        if isinstance(resp, BrokerRegistrationResponse):
            self._registered(core, resp)
        else:
            self._heartbeat_answered(core, resp)
        self.note(core)

    def _failed(self, core: CoreOps, error: ErrorCode) -> None:
        # NOT_CONTROLLER: the leader moved, or is not active yet: ask again soon. Other errors
        # will not go away by asking at once.
        wait = core.config.retry_backoff_ms if error == ErrorCode.not_controller else \
            core.config.broker_heartbeat_interval_ms
        self.retry_at = core.now + wait

    def _registered(self, core: CoreOps, resp: BrokerRegistrationResponse) -> None:
        if resp.error != ErrorCode.none:
            self._failed(core, resp.error)
            return
        self.last_contact_ms = self.sent_ms
        self.broker_epoch = resp.broker_epoch
        self.state = "inactive"  # a registration is fenced until a heartbeat unfences it
        self.next_heartbeat_ms = core.now

    def _heartbeat_answered(self, core: CoreOps, resp: BrokerHeartbeatResponse) -> None:
        if resp.error in (ErrorCode.stale_broker_epoch, ErrorCode.broker_id_not_registered):
            # The controller knows another registration (or none): register again.
            self.broker_epoch = -1
            self.state = "stopped" if self.want_shutdown else "initial"
            return
        if resp.error != ErrorCode.none:
            self._failed(core, resp.error)
            return
        self.last_contact_ms = self.sent_ms
        self.next_heartbeat_ms = self.sent_ms + core.config.broker_heartbeat_interval_ms
        if resp.should_shut_down:
            self.state = "stopped"
        elif resp.is_fenced:
            self.state = "inactive"
        else:
            self.state = "stopping" if self.want_shutdown else "active"

    # --- output ---------------------------------------------------------------------------------

    def poll(self, core: CoreOps) -> None:
        """Send what is due (a registration, a heartbeat), then report any change of state."""
        if self.state != "stopped":
            self._maybe_send(core)
        self.note(core)

    def _maybe_send(self, core: CoreOps) -> None:
        now, leader = core.now, core.leader_id
        if self.in_flight is not None:
            timed_out = now - self.sent_ms >= core.config.request_timeout_ms
            if not timed_out and leader == self.in_flight_dst:
                return
            self.in_flight = None  # no answer, or the leader moved: ask the one we follow now
        if leader is None or now < self.retry_at:
            return  # (a leader that is this node, with combined roles: the core loops it back)
        request: BrokerRequest
        if self.broker_epoch < 0:
            identity = self.identity
            request = BrokerRegistrationRequest(core.node_id, core.cluster_id,
                                                identity.incarnation, identity.host,
                                                identity.port)
        elif now >= self.next_heartbeat_ms:
            request = BrokerHeartbeatRequest(core.node_id, self.broker_epoch,
                                             core.image.end_offset,
                                             want_shutdown=self.want_shutdown)
        else:
            return
        core.send(leader, request)
        self.in_flight, self.in_flight_dst, self.sent_ms = request, leader, now

    def note(self, core: CoreOps) -> None:
        """A broker-state event when the state or self_fenced changed since the last one."""
        fenced = self.self_fenced(core)
        if self.reported == (self.state, fenced):
            return
        self.reported = (self.state, fenced)
        core.event(type="broker-state", state=self.state, broker_epoch=self.broker_epoch,
                   metadata_offset=core.image.end_offset,
                   incarnation=str(self.identity.incarnation), self_fenced=fenced)
