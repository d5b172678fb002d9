"""Broker records: what the active controller decides about brokers, as metadata records (the
early KIP-631 proposal, as Kafka's KRaft controller writes them), and what they make of a broker.

Theory of operation. The controller's decisions are DATA entries of the log written only by the
leader: register-broker, fence-broker, unfence-broker, shutdown-broker (`encode_register`,
`encode_fence`, `encode_unfence`, `encode_shutdown`: JSON objects). Every node applies them to its
image (`Image.brokers`), and the controller to its own view of what it appended (controller.py),
with the one `apply_change`, so every node agrees on which brokers are registered, fenced or
stopping, at every offset. A new registration's offset is its broker epoch; a registration of the
incarnation already registered amends it, carrying the epoch and state it keeps (Kafka's
ClusterControlManager.registerBroker); the other records name the epoch they apply to and change
nothing once that registration was replaced.

`BrokerInfo` is a broker as the records applied so far leave it; its `state` is the proposal's
(inactive, active, stopping: lifecycle.py has the table). Pure data: no core, no clock.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeGuard

__all__ = [
    "BROKER_OPS",
    "FENCE",
    "FENCE_REASONS",
    "REGISTER",
    "SHUTDOWN",
    "UNFENCE",
    "BrokerChange",
    "BrokerInfo",
    "apply_change",
    "decode_broker_record",
    "encode_fence",
    "encode_register",
    "encode_shutdown",
    "encode_unfence",
]

REGISTER, FENCE, UNFENCE, SHUTDOWN = (
    "register-broker", "fence-broker", "unfence-broker", "shutdown-broker"
)
BROKER_OPS = frozenset({REGISTER, FENCE, UNFENCE, SHUTDOWN})
"""The `op` of every broker record."""
FENCE_REASONS = frozenset({"session-expired", "shutdown", "want-fence"})


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
    """fence / unfence / shutdown: the registration epoch it applies to; register: the epoch an
    amended registration keeps (-1: a new registration, whose epoch is its offset)."""
    incarnation: uuid.UUID | None = None
    host: str = ""
    port: int = 0
    reason: str = ""
    caught_up: int = -1
    """unfence: the metadata offset the broker's heartbeat reported."""
    fenced: bool = True
    shutdown: bool = False
    """register: the state an amended registration keeps (a new one is fenced)."""


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def encode_register(broker: int, incarnation: uuid.UUID, host: str, port: int,
                    kept: BrokerInfo | None = None) -> bytes:
    """A registration; with `kept` (the registration of this same incarnation), an amendment that
    keeps its epoch and state."""
    body: dict[str, Any] = {"op": REGISTER, "broker": broker, "incarnation": str(incarnation),
                            "host": host, "port": port}
    if kept is not None:
        body.update(epoch=kept.epoch, fenced=kept.fenced, shutdown=kept.shutdown)
    return _encode(body)


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
        if "epoch" not in body:
            return BrokerChange(op, broker, incarnation=incarnation, host=host, port=port)
        kept, fenced, shutdown = body["epoch"], body.get("fenced"), body.get("shutdown")
        if not _is_int(kept) or kept < 0 or not isinstance(fenced, bool) or \
                not isinstance(shutdown, bool):
            return None
        return BrokerChange(op, broker, kept, incarnation=incarnation, host=host, port=port,
                            fenced=fenced, shutdown=shutdown)
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
    fence/unfence/shutdown of another registration epoch, or of a state it is already in; a
    registration always makes one, even an amendment that changes nothing). The
    image and the controller's view both apply records with it, so they cannot disagree."""
    info = brokers.get(change.broker)
    if change.op == REGISTER:
        assert change.incarnation is not None
        if change.epoch < 0:
            return BrokerInfo(change.broker, change.incarnation, offset, change.host,
                              change.port, fenced=True, shutdown=False, since=offset)
        # An amendment: `since` stays where the state last changed.
        same = info is not None and (info.epoch, info.fenced, info.shutdown) == \
            (change.epoch, change.fenced, change.shutdown)
        return BrokerInfo(change.broker, change.incarnation, change.epoch, change.host,
                          change.port, fenced=change.fenced, shutdown=change.shutdown,
                          since=info.since if same and info is not None else offset)
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

