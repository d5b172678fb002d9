"""The `reference` target's clients: one Kafka request per operation, on `__cluster_metadata-0`.

One client class per workload (`AppendClient`, `KvClient`, `BrokersClient`; the target maps each
workload's name to its class), over `ReferenceClient`'s connections and leader discovery. An append
is a Produce (acks=-1), a read a consumer Fetch; kv's write and cas are a Produce of a command every
node applies when it commits, its read a Fetch of the `__kv_image` view; the `brokers` workload's
describe is a Fetch of the `__brokers` view, always of the client's own node.

What an outcome means: a connection refused, or an error code the node sends only for a request it
did not append (NOT_LEADER_OR_FOLLOWER, ...), is `fail`; a timeout after sending, a closed
connection, or REQUEST_TIMED_OUT (the node's "appended, but lost leadership before commit") is
`info`.

Leader discovery (issue 18): the client starts at its own node and asks Metadata who leads. An
operation is tried again at once, within its own timeout, after an attempt that certainly changed
nothing (a read after any wire error too), so an op never appends twice: only its last attempt
can have appended. A final op is asked of the client's own node only. TLS with an `ssl` context.

Details (each op, the retry rules, final ops, idle connections, TLS):
docs/internals/targets.md#reference_client
"""

from __future__ import annotations

import contextlib
import json
import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from ssl import SSLContext, SSLSocket
from typing import Any

from kio.schema.errors import ErrorCode

from contracts.backend import Backend
from contracts.history import Op
from contracts.target import Client
from reference_node.raft.image import encode_cas, encode_write
from reference_node.wire import (
    FETCH,
    LIST_OFFSETS,
    METADATA,
    METADATA_TOPIC,
    PRODUCE,
    BadResponse,
    ConnectFailed,
    ConnectionClosed,
    KafkaClient,
    RequestTimeout,
    VersionMismatch,
    WireError,
)
from reference_node.wire.brokers_view import BROKERS_TOPIC, parse_brokers_view
from reference_node.wire.records import build_append_batch, build_batch, parse_batches, read_values
from reference_node.wire.requests import (
    EARLIEST_TIMESTAMP,
    fetch_request,
    list_offsets_request,
    metadata_request,
    produce_request,
)
from workloads import append, brokers, kv, ops

MAX_BYTES = 32 << 20
# The topic a consumer Fetch reads the node's kv image from (the brief of issue 15).
KV_IMAGE = "__kv_image"
# The topic a consumer Fetch reads the node's view of the brokers from (issue 17).
BROKERS_VIEW = BROKERS_TOPIC
# the describe's own names for its refusals (the design's, the kebab form of Kafka's names)
DESCRIBE_REFUSALS = {ErrorCode.broker_not_available: "broker-not-available",
                     ErrorCode.not_leader_or_follower: "not-leader-or-follower"}
# A cas's outcome on the node, in the Produce partition response's error_message.
CAS_OUTCOMES = {"swapped": True, "not-swapped": False}

# error codes that prove a request was not applied (for reads: anything but none)
CERTAIN_FAILURES = {
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition, ErrorCode.corrupt_message, ErrorCode.invalid_record,
    ErrorCode.invalid_required_acks, ErrorCode.unsupported_compression_type,
    ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_request,
    ErrorCode.unsupported_version, ErrorCode.not_enough_replicas, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch, ErrorCode.offset_out_of_range,
}
# Refusals that say "not here": sent only for a request the node did not append, and another node
# (the leader) may accept it, so the op goes there at once (a subset of CERTAIN_FAILURES).
LEADERSHIP_REFUSALS = {
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch,
}
# Kafka's retry.backoff.ms default: the pause before asking every node again when none leads.
RETRY_BACKOFF_S = 0.1
# The least time left for one more attempt: a shorter one could only time out after sending,
# which turns the op's certain failure into an unknown outcome.
MIN_ATTEMPT_S = 0.2
# Connecting and the ApiVersions handshake: a node that takes longer (paused, unreachable) is
# left for another while the op still has time; nothing was sent to it.
HANDSHAKE_S = 0.5
SHORT_NAMES = {ErrorCode.not_leader_or_follower: "not-leader",
               ErrorCode.request_timed_out: "timeout",
               ErrorCode.offset_out_of_range: "offset-out-of-range"}


WIRE_ERRORS: dict[type[WireError], str] = {
    ConnectFailed: "connect-failed", RequestTimeout: "timeout",
    ConnectionClosed: "connection-closed", BadResponse: "bad-response",
    VersionMismatch: "version-mismatch"}


def error_name(code: ErrorCode) -> str:
    return SHORT_NAMES.get(code, code.name.replace("_", "-"))


def leader_of(address: tuple[str, int], timeout: float,
              ssl: SSLContext | None = None) -> int | None:
    """The leader id that the node at `address` reports through Metadata, or None."""
    with contextlib.suppress(WireError, Exception), \
            KafkaClient(*address, client_id="kraft-harness", timeout=timeout, ssl=ssl) as client:
        return _named_leader(client, timeout)
    return None


def _named_leader(conn: KafkaClient, timeout: float) -> int | None:
    """The leader id that the node at the other end of `conn` reports through Metadata, or None
    (it knows none). WireError when it does not answer."""
    response = conn.call(METADATA, lambda v: metadata_request(v, None), timeout)
    for topic in response.topics:
        for partition in topic.partitions:
            leader = int(partition.leader_id)
            return leader if leader >= 0 else None
    return None


def _peer_closed(conn: KafkaClient) -> bool:
    """Whether the node closed this idle connection (its process died, say): anything to read on
    a connection with no request outstanding is its end of file, a reset, or bytes nobody asked
    for, and a request written after it could never be read by the node. Over TLS the check is
    left out, as a session ticket also makes the socket readable."""
    sock = getattr(conn, "_sock", None)  # KafkaClient keeps its socket to itself
    if sock is None or isinstance(sock, SSLSocket):
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class NotLeader(Exception):
    """A leadership refusal (`LEADERSHIP_REFUSALS`): nothing was appended, and `leader` (None:
    not said) may take the request."""

    def __init__(self, code: ErrorCode, leader: int | None) -> None:
        super().__init__(code.name)
        self.code = code
        self.leader = leader


@dataclass(frozen=True)
class Failed:
    """An op's failed completion, where a value was wanted."""

    outcome: Op


@dataclass(frozen=True)
class Refused:
    """An attempt that certainly changed nothing and that another node may accept: its `fail`
    completion, the leader the refusal named, and whether the node answered at all (then its
    Metadata may name the leader)."""

    outcome: Op
    leader: int | None
    answered: bool


class ReferenceClient(Client):
    """One client process's connections to the nodes, and the leader discovery of each op (the
    module's docstring); the workload's client below says what one attempt of an op is.
    `topics_seen` holds the topics a node has answered for without error: shared by the clients
    of one run (the target's), so that a final read's new client knows what existed before it."""

    def __init__(self, ssl: SSLContext | None = None,
                 topics_seen: set[str] | None = None) -> None:
        self.ssl = ssl
        self.topics_seen: set[str] = set() if topics_seen is None else topics_seen
        self.addresses: dict[int, tuple[str, int]] = {}
        self.names: dict[int, str] = {}
        self.current = 0
        # one connection per node asked, kept while the op moves between nodes (an election
        # would otherwise cost a connection and a handshake per node per round)
        self.conns: dict[int, KafkaClient] = {}
        self.home = 0  # the node the client was opened at
        # whether the current attempt sent a Produce whose effect is not known to be none: until
        # then, whatever the wire does, the op certainly changed nothing
        self.produced = False

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        self.names = {i + 1: n for i, n in enumerate(nodes)}
        self.addresses = {i + 1: backend.client_address(n, "kafka") for i, n in enumerate(nodes)}
        self.current = self.home = nodes.index(node) + 1
        # best effort: start at the leader if the node knows it (not an operation)
        leader = leader_of(self.addresses[self.current], timeout=1.0, ssl=self.ssl)
        if leader in self.addresses:
            self.current = leader

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()

    def _connection(self, timeout: float) -> KafkaClient:
        """The connection to the current node (a new one if the node closed the old)."""
        conn = self.conns.get(self.current)
        if conn is not None and _peer_closed(conn):
            self._drop_connection()
            conn = None
        if conn is None:
            host, port = self.addresses[self.current]
            conn = KafkaClient(host, port, client_id="kraft-harness", timeout=timeout,
                               ssl=self.ssl)
            self.conns[self.current] = conn
        return conn

    def _drop_connection(self) -> None:
        conn = self.conns.pop(self.current, None)
        if conn is not None:
            conn.close()

    def invoke(self, op: Op, timeout: float) -> Op:
        attempt = self._attempt_of(op)
        if attempt is None:
            return {**op, "type": "fail", "node": self.names[self.current],
                    "error": f"unknown-f {op['f']}"}
        deadline = time.monotonic() + timeout
        if op.get("final"):
            # a final read says what one node holds: asked of that node alone, and whatever
            # it answers (a refusal too) is the op's outcome, never another node's answer
            self.current = self.home
            done = self._try(op, attempt, deadline)
            return done.outcome if isinstance(done, Refused) else done
        tried: set[int] = set()
        while True:
            done = self._try(op, attempt, deadline)
            if not isinstance(done, Refused):
                return done
            tried.add(self.current)
            leader = done.leader
            if leader is None and done.answered:
                leader = self._leader_named_here(deadline)
            if not self._move_on(leader, tried, deadline):
                return done.outcome

    def _attempt_of(self, op: Op) -> Callable[[float], Op] | None:
        """One attempt of `op` at the current node, given the time it may take; None for an op
        the workload has not. The workload's client says."""
        return None

    def _try(self, op: Op, attempt: Callable[[float], Op], deadline: float) -> Op | Refused:
        """One attempt at the current node: its completion, or Refused when another node may
        take the op."""
        node = self.names[self.current]
        self.produced = False
        try:
            # the handshake alone first, on a short leash: a node that cannot even take the
            # request is left while there is time for another
            self._connection(HANDSHAKE_S).api_versions(
                min(HANDSHAKE_S, max(0.0, deadline - time.monotonic())))
            return {**attempt(max(0.0, deadline - time.monotonic())), "node": node}
        except NotLeader as refusal:
            return Refused({**op, "type": "fail", "node": node, "error": error_name(refusal.code)},
                           refusal.leader, answered=True)
        except WireError as exc:
            self._drop_connection()
            # a read has no effect, so even an unanswered one certainly changed nothing
            certain = exc.certainly_not_sent or not self.produced
            failed = {**op, "type": "fail" if certain else "info", "node": node,
                      "error": WIRE_ERRORS.get(type(exc), "wire-error"), "detail": str(exc)[:200]}
            return Refused(failed, None, answered=False) if certain else failed

    def _leader_named_here(self, deadline: float) -> int | None:
        """Who the current node, which just refused, says leads (None: it does not know)."""
        timeout = min(HANDSHAKE_S, max(0.0, deadline - time.monotonic()))
        try:
            return _named_leader(self._connection(timeout), timeout)
        except WireError:
            self._drop_connection()
            return None

    def _move_on(self, leader: int | None, tried: set[int], deadline: float) -> bool:
        """To the named leader unless this op tried it already (a follower names its dead
        leader until it elects another), else to the next untried node; when every node has
        refused, none leads yet: all of them again after a pause. False when no attempt fits
        in the time left."""
        if leader in self.addresses and leader not in tried:
            self.current = leader
        else:
            ids = sorted(self.addresses)
            start = ids.index(self.current)
            untried = [n for n in ids[start + 1:] + ids[:start + 1] if n not in tried]
            if untried:
                self.current = untried[0]
            else:
                tried.clear()
                self._rotate()
                pause = min(RETRY_BACKOFF_S, deadline - time.monotonic() - MIN_ATTEMPT_S)
                if pause > 0:
                    time.sleep(pause)
        return deadline - time.monotonic() >= MIN_ATTEMPT_S

    def _rotate(self) -> None:
        ids = sorted(self.addresses)
        self.current = ids[(ids.index(self.current) + 1) % len(ids)]

    def _produce(self, records: bytes, timeout: float) -> Any:
        """Produce one records blob; the partition's response. NotLeader for a leadership
        refusal (Produce up to v9 names no leader: Metadata will)."""
        self.produced = True
        response = self._connection(timeout).call(
            PRODUCE, lambda v: produce_request(v, records, timeout_ms=int(timeout * 1000)),
            timeout)
        part = response.responses[0].partition_responses[0]
        code = ErrorCode(int(part.error_code))
        if code in LEADERSHIP_REFUSALS:
            raise NotLeader(code, None)
        if code == ErrorCode.none:
            self.topics_seen.add(METADATA_TOPIC)
        return part

    def _fetch(self, start: int, topic: str, timeout: float) -> Any:
        """A consumer Fetch of partition 0 of `topic` from `start`: the named partition's answer.
        NotLeader, with the leader the answer names, for a leadership refusal."""
        response = self._connection(timeout).call(
            FETCH, lambda v: fetch_request(v, start, topic=topic, max_bytes=MAX_BYTES), timeout)
        part = _partition(response, topic)
        code = ErrorCode(int(part.error_code))
        if code in LEADERSHIP_REFUSALS:
            hint = getattr(part, "current_leader", None)
            leader = int(hint.leader_id) if hint is not None else -1
            raise NotLeader(code, leader if leader >= 0 else None)
        if code == ErrorCode.none:
            self.topics_seen.add(topic)
        return part

    def _log_start(self, part: Any, timeout: float) -> int | None:
        """Where the log begins, after an OFFSET_OUT_OF_RANGE: the answer's own log_start_offset
        (Fetch v5+), else what ListOffsets EARLIEST says, else None."""
        said = int(getattr(part, "log_start_offset", -1))
        if said >= 0:
            return said
        response = self._connection(timeout).call(
            LIST_OFFSETS, lambda v: list_offsets_request(v, EARLIEST_TIMESTAMP), timeout)
        listed = response.topics[0].partitions[0]
        if ErrorCode(int(listed.error_code)) != ErrorCode.none:
            return None
        return int(listed.offset)


class AppendClient(ReferenceClient):
    """The `append` workload's client: a Produce of one record per append, a consumer Fetch of
    `__cluster_metadata-0` per read."""

    def _attempt_of(self, op: Op) -> Callable[[float], Op] | None:
        match ops.invoke_of(op, append.INVOKES):
            case append.Append(value=value):
                return lambda timeout: self._append(op, value, timeout)
            case append.Read(start=start):
                return lambda timeout: self._read(op, start, timeout)
        return None

    def _append(self, op: Op, value: int, timeout: float) -> Op:
        part = self._produce(build_append_batch([value]), timeout)
        code = ErrorCode(int(part.error_code))
        if code == ErrorCode.none:
            done = append.AppendOk(value, int(part.base_offset))
            return {**op, "type": "ok", "value": ops.value(done)}
        return _produce_failed(op, code)

    def _read(self, op: Op, start: int, timeout: float) -> Op:
        for _ in range(2):  # at most once more, from the log start offset
            part = self._fetch(start, METADATA_TOPIC, timeout)
            code = ErrorCode(int(part.error_code))
            if code == ErrorCode.offset_out_of_range:
                log_start = self._log_start(part, timeout)
                if log_start is not None and log_start > start:
                    # KIP-630: the prefix below the log start is in a snapshot, not the log; the
                    # read goes on from where the log begins, and says so in its `from`
                    start = log_start
                    continue
            if code == ErrorCode.unknown_topic_or_partition and METADATA_TOPIC in self.topics_seen:
                # The node says it holds no such partition (Kafka's protocol guide, error code 3
                # UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition",
                # kafka.apache.org/protocol#protocol_error_codes),
                # of a partition a node of this run has served: a definite read of nothing from
                # this node, which the checkers judge (after acknowledged appends, a lost
                # write). Before the partition was seen it may not exist yet: a failure.
                done = append.read_of_nothing(start)
                return {**op, "type": "ok", "value": ops.value(done),
                        "detail": "unknown-topic-or-partition"}
            if code != ErrorCode.none:
                return {**op, "type": "fail", "error": error_name(code)}
            hw = int(part.high_watermark)
            records: list[list[int | None]] = [
                [o, v] for o, v in read_values(part.records) if start <= o < hw]
            if hw > start and (not records or records[-1][0] != hw - 1):
                return {**op, "type": "fail", "error": "incomplete-read"}
            return {**op, "type": "ok", "value": ops.value(append.ReadOk(start, hw, records))}
        return {**op, "type": "fail", "error": "offset-out-of-range",
                "detail": f"below the log start again from offset {start}"}


class KvClient(ReferenceClient):
    """The `kv` workload's client: a write or cas is a Produce of one record holding the
    command, applied when it commits; a read, a consumer Fetch of the node's image."""

    def _attempt_of(self, op: Op) -> Callable[[float], Op] | None:
        match ops.invoke_of(op, kv.INVOKES):
            case kv.Read() as read:
                return lambda timeout: self._read(op, read, timeout)
            case kv.Write() as write:
                return lambda timeout: self._write(op, write, timeout)
            case kv.Cas() as cas:
                return lambda timeout: self._cas(op, cas, timeout)
            case kv.Append() as piece:
                return lambda timeout: self._append(op, piece, timeout)
        return None

    def _command(self, payload: bytes, timeout: float) -> tuple[ErrorCode, Any]:
        """A Produce of one command record: the partition's error code, and its error_message
        (how the node applied a cas)."""
        part = self._produce(build_batch(0, -1, [payload]), timeout)
        return ErrorCode(int(part.error_code)), getattr(part, "error_message", None)

    def _write(self, op: Op, write: kv.Write, timeout: float) -> Op:
        code, _ = self._command(encode_write(write.key, write.value), timeout)
        return {**op, "type": "ok"} if code == ErrorCode.none else _produce_failed(op, code)

    def _cas(self, op: Op, cas: kv.Cas, timeout: float) -> Op:
        swapped = _cas_outcome(op, *self._command(encode_cas(cas.key, cas.expected, cas.to),
                                                  timeout))
        if isinstance(swapped, Failed):
            return swapped.outcome
        done = kv.CasOk(cas.key, cas.expected, cas.to, swapped)
        return {**op, "type": "ok", "value": ops.value(done)}

    def _read(self, op: Op, read: kv.Read, timeout: float) -> Op:
        value = self._value(op, read.key, timeout)
        if isinstance(value, Failed):
            return value.outcome
        return {**op, "type": "ok", "value": ops.value(kv.ReadOk(read.key, value))}

    def _value(self, op: Op, key: kv.Key, timeout: float) -> kv.Value | Failed:
        """The key's value in the node's whole image at its high watermark, or the op's failed
        completion."""
        part = self._fetch(0, KV_IMAGE, timeout)
        code = ErrorCode(int(part.error_code))
        if code != ErrorCode.none:
            return Failed({**op, "type": "fail", "error": error_name(code)})
        try:
            image = image_of(part.records)
        except ValueError as exc:
            return Failed({**op, "type": "fail", "error": "bad-image", "detail": str(exc)[:200]})
        value: kv.Value = image.get(key)
        return value

    def _append(self, op: Op, append: kv.Append, timeout: float) -> Op:
        """A cas loop (the module's docstring): each cas that did not swap changed nothing, so
        the loop goes on while an attempt fits in the time left."""
        deadline = time.monotonic() + timeout
        while True:
            current = self._value(op, append.key, max(0.0, deadline - time.monotonic()))
            if isinstance(current, Failed):
                return current.outcome
            new = kv.appended(current, append.value)
            if new is None:
                return {**op, "type": "fail", "error": "not-text", "detail": repr(current)[:200]}
            swapped = _cas_outcome(op, *self._command(encode_cas(append.key, current, new),
                                                      max(0.0, deadline - time.monotonic())))
            if isinstance(swapped, Failed):
                return swapped.outcome
            if swapped:
                return {**op, "type": "ok"}
            self.produced = False  # not swapped: nothing appended, as before the cas
            if deadline - time.monotonic() < MIN_ATTEMPT_S:
                return {**op, "type": "fail", "error": "append-contended"}


class BrokersClient(ReferenceClient):
    """The `brokers` workload's client: a describe is asked of the node the client was opened
    at, on a connection of its own, whatever leader other ops would have moved to (what a
    broker serves is the point), and never tried at another node."""

    def __init__(self, ssl: SSLContext | None = None,
                 topics_seen: set[str] | None = None) -> None:
        super().__init__(ssl, topics_seen)
        self.home_conn: KafkaClient | None = None

    def close(self) -> None:
        super().close()
        if self.home_conn is not None:
            self.home_conn.close()
            self.home_conn = None

    def invoke(self, op: Op, timeout: float) -> Op:
        if op["f"] != brokers.DESCRIBE:
            return {**op, "type": "fail", "node": self.names[self.home],
                    "error": f"unknown-f {op['f']}"}
        node = self.names[self.home]
        try:
            if self.home_conn is None:
                host, port = self.addresses[self.home]
                self.home_conn = KafkaClient(host, port, client_id="kraft-harness",
                                             timeout=timeout, ssl=self.ssl)
            part = _fetch_view(self.home_conn, timeout)
        except WireError as exc:
            if self.home_conn is not None:
                self.home_conn.close()
                self.home_conn = None
            # not even sent: certainly nothing said; else the answer is unknown
            return {**op, "type": "fail" if exc.certainly_not_sent else "info", "node": node,
                    "error": WIRE_ERRORS.get(type(exc), "wire-error"), "detail": str(exc)[:200]}
        return {**describe_outcome(op, part, node), "node": node}


def _cas_outcome(op: Op, code: ErrorCode, message: object) -> bool | Failed:
    """Whether a cas the node answered swapped, or the op's completion when that is not known."""
    if code != ErrorCode.none:
        return Failed(_produce_failed(op, code))
    swapped = CAS_OUTCOMES.get(message) if isinstance(message, str) else None
    if swapped is None:
        # committed, but whether it swapped is not said: the effect is unknown, never guessed
        return Failed({**op, "type": "info", "error": "cas-outcome-unknown",
                       "detail": f"error_message {message!r}"})
    return swapped


def _produce_failed(op: Op, code: ErrorCode) -> Op:
    outcome = "fail" if code in CERTAIN_FAILURES else "info"
    return {**op, "type": outcome, "error": error_name(code)}


def _partition(response: Any, topic: str) -> Any:
    """The answer for partition 0 of `topic` in a Fetch response."""
    for answer in response.responses:
        if answer.topic == topic and answer.partitions:
            return answer.partitions[0]
    raise BadResponse(f"the Fetch response names no partition of {topic}")


def _fetch_view(conn: KafkaClient, timeout: float) -> Any:
    """A consumer Fetch of `__brokers` partition 0 from 0: the partition's answer."""
    response = conn.call(
        FETCH, lambda v: fetch_request(v, 0, topic=BROKERS_VIEW, max_bytes=MAX_BYTES), timeout)
    return _partition(response, BROKERS_VIEW)


def describe_outcome(op: Op, part: Any, node: str) -> Op:
    """A describe's completion from the `__brokers` partition answer of `node`."""
    code = ErrorCode(int(part.error_code))
    if code == ErrorCode.request_timed_out:
        return {**op, "type": "info", "error": "timeout"}
    if code != ErrorCode.none:
        return {**op, "type": "fail",
                "error": DESCRIBE_REFUSALS.get(code, code.name.replace("_", "-"))}
    try:
        mine, listed = brokers_of(part.records)
    except ValueError as exc:
        return {**op, "type": "fail", "error": "bad-view", "detail": str(exc)[:200]}
    role = str(mine.get("role", "broker")) if mine is not None else "controller"
    view = brokers.DescribeOk(node, role, int(part.high_watermark), mine, listed)
    return {**op, "type": "ok", "value": ops.value(view)}


def brokers_of(records: bytes | None) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The `self` record (None on a controller) and the brokers by id (as text, as JSON keeps
    them in the history) of a `__brokers` answer. ValueError (one line) for a record that is
    not one."""
    mine, listed = parse_brokers_view(records)
    return mine, {str(broker): info for broker, info in listed.items()}


def describe_brokers(address: tuple[str, int], timeout: float,
                     ssl: SSLContext | None = None) -> dict[str, Any] | None:
    """The describe view of the node at `address` (the ok value, without `node`), or None when
    it refused or did not answer (for the harness's own questions, not an operation)."""
    with contextlib.suppress(WireError, OSError), \
            KafkaClient(*address, client_id="kraft-harness", timeout=timeout, ssl=ssl) as conn:
        done = describe_outcome({"f": "describe", "value": None}, _fetch_view(conn, timeout), "")
        if done["type"] == "ok":
            value: dict[str, Any] = done["value"]
            return value
    return None


def image_of(records: bytes | None) -> dict[Any, Any]:
    """The kv map in an `__kv_image` answer: one record per key, key and value as JSON.
    ValueError (one line) for a record that is not one."""
    image: dict[Any, Any] = {}
    for batch in parse_batches(records):
        if batch.is_control:
            continue
        for offset, key, value in batch.records:
            if key is None or value is None:
                raise ValueError(f"image record {offset} has no key or no value")
            try:
                image[json.loads(key)] = json.loads(value)
            except (ValueError, UnicodeDecodeError, TypeError) as exc:
                raise ValueError(f"image record {offset} is not JSON: {exc}") from None
    return image
