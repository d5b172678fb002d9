"""The `reference` target's client: one Kafka request per operation, on `__cluster_metadata-0`.

- append V: Produce (acks=-1) of one record whose value is the ASCII decimal of V; ok with the
  base offset.
- read F: Fetch from F as a consumer (replica_id -1, no wait); ok with the high watermark and the
  records below it. A reply whose records stop short of the high watermark (size limit) is a
  `fail`: a read has no effect, and a partial one proves nothing.

What an outcome means: a connection refused, or an error code the node sends only for a request it
did not append (NOT_LEADER_OR_FOLLOWER, ...), is `fail`; a timeout after sending, a closed
connection, or REQUEST_TIMED_OUT (the node's "appended, but lost leadership before commit") is
`info`. Leader discovery: the client starts at its own node, asks Metadata who leads, and after
a not-leader answer moves to the leader the answer (or Metadata) names, for the next operation.
With an `ssl` context (a run with `--node-config security=ssl`) every connection is TLS, with the
harness's certificate of the run's CA.
"""

from __future__ import annotations

import contextlib
from ssl import SSLContext

from kio.schema.errors import ErrorCode

from contracts.backend import Backend
from contracts.history import Op
from contracts.target import Client
from reference_node.wire import (
    FETCH,
    METADATA,
    PRODUCE,
    BadResponse,
    ConnectFailed,
    ConnectionClosed,
    KafkaClient,
    RequestTimeout,
    VersionMismatch,
    WireError,
)
from reference_node.wire.records import build_append_batch, read_values
from reference_node.wire.requests import fetch_request, metadata_request, produce_request

MAX_BYTES = 32 << 20

# error codes that prove a request was not applied (for reads: anything but none)
CERTAIN_FAILURES = {
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available,
    ErrorCode.unknown_topic_or_partition, ErrorCode.corrupt_message, ErrorCode.invalid_record,
    ErrorCode.invalid_required_acks, ErrorCode.unsupported_compression_type,
    ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_request,
    ErrorCode.unsupported_version, ErrorCode.not_enough_replicas, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch, ErrorCode.offset_out_of_range,
}
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
        response = client.call(METADATA, lambda v: metadata_request(v, None), timeout)
        for topic in response.topics:
            for partition in topic.partitions:
                leader = int(partition.leader_id)
                return leader if leader >= 0 else None
    return None


class ReferenceClient(Client):
    def __init__(self, ssl: SSLContext | None = None) -> None:
        self.ssl = ssl
        self.addresses: dict[int, tuple[str, int]] = {}
        self.names: dict[int, str] = {}
        self.current = 0
        self.conn: KafkaClient | None = None

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        self.names = {i + 1: n for i, n in enumerate(nodes)}
        self.addresses = {i + 1: backend.client_address(n, "kafka") for i, n in enumerate(nodes)}
        self.current = nodes.index(node) + 1
        # best effort: start at the leader if the node knows it (not an operation)
        leader = leader_of(self.addresses[self.current], timeout=1.0, ssl=self.ssl)
        if leader in self.addresses:
            self.current = leader

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _connection(self, timeout: float) -> KafkaClient:
        if self.conn is None:
            host, port = self.addresses[self.current]
            self.conn = KafkaClient(host, port, client_id="kraft-harness", timeout=timeout,
                                    ssl=self.ssl)
        return self.conn

    def _move_to(self, leader: int | None) -> None:
        """After a not-leader answer: to the named leader, else whom Metadata names, else on to
        the next node (the one we asked may be cut off and know nothing)."""
        if leader is None or leader == self.current or leader not in self.addresses:
            leader = leader_of(self.addresses[self.current], timeout=0.5, ssl=self.ssl)
        self.close()
        if leader is not None and leader != self.current and leader in self.addresses:
            self.current = leader
        else:
            self._rotate()

    def invoke(self, op: Op, timeout: float) -> Op:
        node = self.names[self.current]
        try:
            if op["f"] == "append":
                return {**self._append(op, timeout), "node": node}
            if op["f"] == "read":
                return {**self._read(op, timeout), "node": node}
            return {**op, "type": "fail", "node": node, "error": f"unknown-f {op['f']}"}
        except WireError as exc:
            self.close()
            # a read has no effect, so even an unanswered one certainly changed nothing
            certain = exc.certainly_not_sent or op["f"] == "read"
            if exc.certainly_not_sent:
                # an unreachable node: try the others in turn
                self._rotate()
            return {**op, "type": "fail" if certain else "info", "node": node,
                    "error": WIRE_ERRORS.get(type(exc), "wire-error"), "detail": str(exc)[:200]}

    def _rotate(self) -> None:
        ids = sorted(self.addresses)
        self.current = ids[(ids.index(self.current) + 1) % len(ids)]

    def _append(self, op: Op, timeout: float) -> Op:
        value = op["value"]["value"]
        records = build_append_batch([value])
        response = self._connection(timeout).call(
            PRODUCE, lambda v: produce_request(v, records, timeout_ms=int(timeout * 1000)),
            timeout)
        part = response.responses[0].partition_responses[0]
        code = ErrorCode(int(part.error_code))
        if code == ErrorCode.none:
            return {**op, "type": "ok", "value": {"value": value, "offset": int(part.base_offset)}}
        if code == ErrorCode.not_leader_or_follower:
            self._move_to(None)
        outcome = "fail" if code in CERTAIN_FAILURES else "info"
        return {**op, "type": outcome, "error": error_name(code)}

    def _read(self, op: Op, timeout: float) -> Op:
        start = op["value"]["from"]
        response = self._connection(timeout).call(
            FETCH, lambda v: fetch_request(v, start, max_bytes=MAX_BYTES), timeout)
        part = response.responses[0].partitions[0]
        code = ErrorCode(int(part.error_code))
        if code != ErrorCode.none:
            if code in (ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch):
                hint = getattr(part, "current_leader", None)
                leader = int(hint.leader_id) if hint is not None else -1
                self._move_to(leader if leader >= 0 else None)
            return {**op, "type": "fail", "error": error_name(code)}
        hw = int(part.high_watermark)
        records = [[o, v] for o, v in read_values(part.records) if start <= o < hw]
        if hw > start and (not records or records[-1][0] != hw - 1):
            return {**op, "type": "fail", "error": "incomplete-read"}
        return {**op, "type": "ok", "value": {"from": start, "hw": hw, "records": records}}
