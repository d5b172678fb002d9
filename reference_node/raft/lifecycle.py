"""The broker's own side of the brokers (the early KIP-631 proposal, as Kafka's
BrokerLifecycleManager carries it out), sans I/O.

Theory of operation. A broker is an observer of the metadata log that also registers with the
active controller (the quorum leader, controller.py) and heartbeats it. `BrokerLifecycle`, owned by
the core of a broker node, registers with the leader it follows, then heartbeats it every
`broker_heartbeat_interval_ms` with its image end offset. It fences itself (`self_fenced`: stops
serving) when no request has been answered NONE for `broker_heartbeat_timeout_ms` since it was
sent; that timeout is longer than the controller's session timeout, so the controller has already
fenced a cut-off broker when it stops serving.

Its states are `initial`, `inactive` (registered, fenced), `active` (serving), `stopping`
(controlled shutdown) and `stopped`; the incarnation is a UUID made at process start
(`new_incarnation`); its order decides nothing (no host clock does). The proposal's states and words mapped to ours and Kafka's:
docs/internals/raft.md#lifecycle
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from reference_node.raft.config import Unsafe
from reference_node.raft.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerRequest,
    BrokerResponse,
    ErrorCode,
    Message,
)
from reference_node.raft.ops import CoreOps
from reference_node.raft.states import NEVER

__all__ = [
    "BrokerIdentity",
    "BrokerLifecycle",
    "BrokerStatus",
    "last_applied",
    "new_incarnation",
]


# --- incarnations ---------------------------------------------------------------------------------


def new_incarnation(now_unix_ms: int, rng: random.Random) -> uuid.UUID:
    """An incarnation id (UUIDv7 layout: 48-bit Unix milliseconds in the top bits, version 7, the
    RFC 4122 variant, random rest): unique per process start, readable by a person as when it
    started. Its order decides nothing: the controller refuses another incarnation only while the
    registered one's session is live (Kafka's rule), so a host whose clock steps back is not
    locked out. Made by the host once per process start."""
    value = (now_unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= rng.getrandbits(12) << 64
    value |= 0b10 << 62
    value |= rng.getrandbits(62)
    return uuid.UUID(int=value)


# --- broker side ----------------------------------------------------------------------------------


def last_applied(core: CoreOps) -> int:
    """The broker's metadata offset: the last offset its image applied (inclusive; -1 before
    any), what Kafka's BrokerLifecycleManager sends as CurrentMetadataOffset
    (MetadataLoader.lastAppliedOffset) and its controller compares with the registration's."""
    return core.image.end_offset - 1


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
    """The image end offset (exclusive: one above `last_applied`, what heartbeats carry)."""


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
                                             last_applied(core),
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
                   metadata_offset=last_applied(core),
                   incarnation=str(self.identity.incarnation), self_fenced=fenced)
