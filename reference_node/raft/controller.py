"""The active controller's side of the brokers (the early KIP-631 proposal, as Kafka's KRaft
controller carries it out), sans I/O: BrokerRegistration and BrokerHeartbeat on the quorum leader.

Theory of operation. The leader acts as the controller once its own epoch's entry is committed
(`Leader.hw_known`); before that every request is NOT_CONTROLLER. Its view is the image's brokers
plus the records it appended since (`controller_view`). A registration appends register-broker:
from another incarnation than the registered one, a new broker epoch (that record's offset), but
DUPLICATE_BROKER_REGISTRATION while the registered one's session is live (unfenced, heard from
within the session timeout); from the registered incarnation, an amendment that keeps its epoch
and state (Kafka's ClusterControlManager.registerBroker; no order among incarnations); a heartbeat renews the broker's session and may
append an unfence (fenced, registration committed, and the metadata offset, the last offset the
broker applied, at or above the broker epoch: it has applied its own registration), a fence (want_fence; or,
with want_shutdown in controlled shutdown, the end of it) or a shutdown-broker (records.py).
Every answer goes out when the records it depends on commit, as membership.py answers voter
changes; leadership lost answers the waiting ones NOT_CONTROLLER. A leader tick fences an unfenced
broker whose session (`broker_session_timeout_ms`) ran out; a new leader starts every session at
the moment it became leader (`Leader.became_ms`), so brokers survive a failover without being
fenced all at once, and silent ones are fenced one session timeout after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
)
from reference_node.raft.ops import CoreOps
from reference_node.raft.records import (
    FENCE,
    REGISTER,
    UNFENCE,
    BrokerInfo,
    apply_change,
    decode_broker_record,
    encode_fence,
    encode_register,
    encode_shutdown,
    encode_unfence,
)
from reference_node.raft.states import NEVER, Leader, PendingBrokerAnswer

__all__ = [
    "controller_view",
    "fail_pending",
    "leader_deadline",
    "on_commit",
    "on_heartbeat_request",
    "on_leader_tick",
    "on_registration_request",
]

MAX_PORT = 65535
"""The highest port a registration may advertise."""


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


def _append(core: CoreOps, state: Leader, payload: bytes,
            replaced: BrokerInfo | None = None) -> BrokerInfo:
    """Append one broker record; the view takes it at once (the answer waits for its commit).
    `replaced`: a registration's, what the view held before (its event says what it was)."""
    change = decode_broker_record(payload)
    assert change is not None
    offset = core.log.end_offset
    info = apply_change(controller_view(core, state), change, offset)
    assert info is not None, f"a broker record that changes nothing: {change}"
    state.broker_view[change.broker] = info
    state.broker_last_record[change.broker] = offset
    if change.op == REGISTER:
        fields: dict[str, Any] = {"amended": change.epoch >= 0}
        if replaced is not None and replaced.incarnation != change.incarnation:
            fields.update(replaced=str(replaced.incarnation), replaced_epoch=replaced.epoch,
                          replaced_fenced=replaced.fenced)
        core.event(type="broker-register", broker=change.broker,
                   incarnation=str(change.incarnation), epoch=info.epoch, offset=offset, **fields)
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
                        view: Mapping[int, BrokerInfo], state: Leader) -> ErrorCode | None:
    if not core.cluster_ok(req.cluster_id):
        return ErrorCode.inconsistent_cluster_id
    # A voter's id is a broker's too with combined roles (Kafka's, process.roles=broker,
    # controller); a separate broker that takes a voter's id is refused by its configuration.
    if req.sender < 0 or not 1 <= req.port <= MAX_PORT:
        return ErrorCode.invalid_request
    registered = view.get(req.sender)
    if registered is not None and req.incarnation != registered.incarnation and \
            _session_live(core, state, registered) and \
            not core.config.has(Unsafe.ACCEPT_OLD_INCARNATION):
        return ErrorCode.duplicate_broker_registration
    return None


def _session_live(core: CoreOps, state: Leader, info: BrokerInfo) -> bool:
    """Kafka's BrokerHeartbeatManager.hasValidSession: unfenced, and its session has not run out
    (the moment `on_leader_tick` would fence it)."""
    return not info.fenced and \
        core.now - _session_start(state, info.broker_id) < core.config.broker_session_timeout_ms


def on_registration_request(core: CoreOps, src: int, req: BrokerRegistrationRequest) -> None:
    """BrokerRegistration, answered once its register-broker record commits: another incarnation
    (unless the registered one's session is live) gets a new broker epoch, the record's offset;
    the registered incarnation keeps its epoch and state (its request retried, or replayed)."""
    state = _active_leader(core)
    if state is None:
        _refused(core, src, req, ErrorCode.not_controller)
        return
    view = controller_view(core, state)
    error = _registration_error(core, req, view, state)
    if error is not None:
        _refused(core, src, req, error)
        return
    registered = view.get(req.sender)
    kept = registered if registered is not None and \
        registered.incarnation == req.incarnation else None
    info = _append(core, state, encode_register(req.sender, req.incarnation, req.host, req.port,
                                                kept), replaced=registered)
    state.broker_heartbeats[req.sender] = core.now
    _wait(core, state, PendingBrokerAnswer(src, req, state.broker_last_record[req.sender],
                                           broker_epoch=info.epoch))


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
            req.metadata_offset >= info.epoch or core.config.has(Unsafe.UNFENCE_BEFORE_CAUGHT_UP)
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
        core.answer(pending.src, req,
                    BrokerRegistrationResponse(ErrorCode.none, pending.broker_epoch))
        return
    info = core.image.brokers.get(req.sender)
    if info is None or info.epoch != req.broker_epoch:
        # Registered again (another process of this id) while the answer waited.
        core.answer(pending.src, req, BrokerHeartbeatResponse(ErrorCode.stale_broker_epoch))
        return
    core.answer(pending.src, req, BrokerHeartbeatResponse(
        ErrorCode.none, is_caught_up=req.metadata_offset >= info.epoch, is_fenced=info.fenced,
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

