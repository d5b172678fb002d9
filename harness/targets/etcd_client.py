"""The `etcd` target's client: the `kv` workload over etcd's v3 JSON gateway (etcd3gw's session).

Why the gateway: etcd serves its v3 API as JSON over HTTP on the client port (grpc-gateway,
`/v3/...`), so one `requests` session per client speaks to it with no generated gRPC stubs;
etcd3gw (OpenStack's, maintained) is that client. Its own `post` folds a refused connection and one
lost after the request went out into one exception, while the harness must tell them apart (the
first is `fail`, the second `info`), so each call here goes through the client's session and URL
(`Etcd3Client.session`, `get_url`) and classifies what `requests` raised itself.

Ops (workloads/kv.py), on key `/jepsen/<key>` holding the JSON of the value: read is a
linearizable Range, write a Put, cas one Txn, and append (etcd has none) a cas loop. A read that
did not answer is `fail`; a write or cas is `fail` when nothing was sent or etcd's error proves it
was not proposed, else `info`. Every member serves every op, so the client stays on its node, and
moves on to the next node after a refused connection; a final op (`"final": true`), a statement
about one member, is asked of the client's own node only.

Details (each op, which errors prove nothing was proposed): docs/internals/targets.md#etcd_client
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import requests
from etcd3gw.client import Etcd3Client
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from contracts.backend import Backend
from contracts.history import Op
from contracts.target import Client
from workloads import kv, ops

API_PATH = "/v3/"  # etcd 3.4's gateway prefix (3.3 served /v3beta/)
# the least time left for another round of an append's cas loop: a shorter one could only time
# out after sending, which turns the append's certain failure into an unknown outcome
MIN_ROUND_S = 0.2
KEY_PREFIX = "/jepsen/"
CLIENT_PORT = "client"

# gRPC codes (google.golang.org/grpc/codes) the gateway passes on in its error bodies
INVALID_ARGUMENT = 3
RESOURCE_EXHAUSTED = 8

# Messages of errors etcd returns only before a command is proposed, or for a command that then
# has no effect (see the module docstring): a write refused with one certainly changed nothing.
CERTAIN_FAILURES = {
    "etcdserver: too many requests": "too-many-requests",
    "etcdserver: request is too large": "request-too-large",
    "raft proposal dropped": "proposal-dropped",
    "etcdserver: mvcc: database space exceeded": "no-space",
    "etcdserver: not capable": "not-capable",
}
# Short names for the errors that leave a command's outcome unknown (any other is `etcd-error`).
UNKNOWN_OUTCOMES = {
    "etcdserver: request timed out": "timeout",
    "etcdserver: request timed out, possibly due to previous leader failure":
        "timeout-leader-failure",
    "etcdserver: request timed out, possibly due to connection lost": "timeout-connection-lost",
    "etcdserver: leader changed": "leader-changed",
    "etcdserver: server stopped": "server-stopped",
    "etcdserver: request cancelled": "cancelled",
    "etcdserver: no leader": "no-leader",
}


class CallError(Exception):
    """A gateway call without an ok answer. `sent`: whether the request may have reached etcd."""

    def __init__(self, name: str, detail: str, sent: bool, code: int | None = None) -> None:
        super().__init__(detail)
        self.name = name
        self.detail = detail
        self.sent = sent
        self.code = code


def gateway(address: tuple[str, int], timeout: float | None = None) -> Etcd3Client:
    """A client of the member at `address` (no version discovery: 3.4 serves /v3/)."""
    return Etcd3Client(host=address[0], port=address[1], timeout=timeout, api_path=API_PATH)


def not_sent(exc: requests.exceptions.RequestException) -> bool:
    """Whether `requests` failed before the request left: refused, or no connection in time."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return True
    if not isinstance(exc, requests.exceptions.ConnectionError) or not exc.args:
        return False
    reason = getattr(exc.args[0], "reason", exc.args[0])
    return isinstance(reason, (NewConnectionError, ConnectTimeoutError))


def call(client: Etcd3Client, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """POST `body` to `path` of the v3 gateway; its JSON answer. CallError for anything else."""
    try:
        resp = client.session.post(client.get_url(path), json=body, timeout=timeout)
    except requests.exceptions.RequestException as exc:
        if not_sent(exc):
            raise CallError("connect-failed", str(exc)[:200], sent=False) from exc
        if isinstance(exc, requests.exceptions.Timeout):
            raise CallError("timeout", str(exc)[:200], sent=True) from exc
        raise CallError("connection-lost", str(exc)[:200], sent=True) from exc
    try:
        answer = resp.json()
    except ValueError:
        answer = None
    if resp.status_code != 200 or not isinstance(answer, dict):
        message, code = _error_of(answer, resp.text)
        raise CallError(f"http-{resp.status_code}", message, sent=True, code=code)
    return answer


def _error_of(answer: Any, text: str) -> tuple[str, int | None]:
    """The gateway's error message and gRPC code (`{"error", "message", "code"}`)."""
    if isinstance(answer, dict):
        message = answer.get("message") or answer.get("error") or text
        code = answer.get("code")
        return str(message)[:300], code if isinstance(code, int) else None
    return text[:300], None


def classify(f: str, error: CallError) -> tuple[str, str]:
    """(`fail` | `info`, short error name) for op `f` that ended in `error`."""
    name = error.name
    if error.code is not None or error.name.startswith("http-"):
        name = (CERTAIN_FAILURES.get(error.detail) or UNKNOWN_OUTCOMES.get(error.detail)
                or ("invalid-argument" if error.code == INVALID_ARGUMENT else "etcd-error"))
    if f == "read" or not error.sent:
        return "fail", name
    certain = (error.detail in CERTAIN_FAILURES
               or error.code in (INVALID_ARGUMENT, RESOURCE_EXHAUSTED))
    return ("fail" if certain else "info"), name


def encode(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def key_of(key: Any) -> str:
    return encode(f"{KEY_PREFIX}{key}")


def value_of(value: Any) -> str:
    """The stored form of a value: its JSON, so that a cas compares the bytes a write put."""
    return encode(json.dumps(value, sort_keys=True, separators=(",", ":")))


def range_body(key: Any) -> dict[str, Any]:
    return {"key": key_of(key)}  # serializable false: linearizable, etcd's default


def put_body(key: Any, value: Any) -> dict[str, Any]:
    return {"key": key_of(key), "value": value_of(value)}


def cas_body(key: Any, expected: Any, new: Any) -> dict[str, Any]:
    """A Txn: if the key holds `expected` (None: does not exist), put `new`."""
    if expected is None:
        compare = {"key": key_of(key), "result": "EQUAL", "target": "VERSION", "version": "0"}
    else:
        compare = {"key": key_of(key), "result": "EQUAL", "target": "VALUE",
                   "value": value_of(expected)}
    return {"compare": [compare], "success": [{"request_put": put_body(key, new)}]}


def read_value(answer: dict[str, Any]) -> Any:
    """The value a Range answer holds (None when the key is absent). ValueError if unreadable."""
    kvs = answer.get("kvs") or []
    if not kvs:
        return None
    raw = kvs[0].get("value")
    if raw is None:  # an empty value (proto3 JSON leaves it out)
        raise ValueError("the key holds an empty value")
    return json.loads(base64.b64decode(raw))


class EtcdClient(Client):
    """The `kv` workload's client (the one workload the target runs): one connection (a requests
    session) to one member at a time."""

    def __init__(self) -> None:
        self.nodes: list[str] = []
        self.addresses: dict[str, tuple[str, int]] = {}
        self.current = ""
        self.home = ""  # the node the client was opened at
        self.client: Etcd3Client | None = None

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        self.nodes = list(nodes)
        self.addresses = {n: backend.client_address(n, CLIENT_PORT) for n in nodes}
        self.current = self.home = node

    def close(self) -> None:
        if self.client is not None:
            self.client.session.close()
            self.client = None

    def _client(self) -> Etcd3Client:
        if self.client is None:
            self.client = gateway(self.addresses[self.current])
        return self.client

    def _rotate(self) -> None:
        self.close()
        self.current = self.nodes[(self.nodes.index(self.current) + 1) % len(self.nodes)]

    def invoke(self, op: Op, timeout: float) -> Op:
        if op.get("final") and self.current != self.home:
            # a final read says what one member holds: back to the client's own, whatever
            # member an earlier refused connection moved it to
            self.close()
            self.current = self.home
        node = self.current
        try:
            match ops.invoke_of(op, kv.INVOKES):
                case kv.Read() as read:
                    answer = call(self._client(), "/kv/range", range_body(read.key), timeout)
                    try:
                        value = read_value(answer)
                    except ValueError as exc:
                        return {**op, "type": "fail", "node": node, "error": "bad-value",
                                "detail": str(exc)[:200]}
                    return {**op, "type": "ok", "node": node,
                            "value": ops.value(kv.ReadOk(read.key, value))}
                case kv.Write() as write:
                    call(self._client(), "/kv/put", put_body(write.key, write.value), timeout)
                    return {**op, "type": "ok", "node": node}
                case kv.Cas() as cas:
                    answer = call(self._client(), "/kv/txn",
                                  cas_body(cas.key, cas.expected, cas.to), timeout)
                    # proto3 JSON leaves a false `succeeded` out
                    done = kv.CasOk(cas.key, cas.expected, cas.to, answer.get("succeeded") is True)
                    return {**op, "type": "ok", "node": node, "value": ops.value(done)}
                case kv.Append() as append:
                    return self._append(op, append, node, timeout)
            return {**op, "type": "fail", "node": node, "error": f"unknown-f {op['f']}"}
        except CallError as exc:
            return self._failed(op, node, op["f"], exc)

    def _failed(self, op: Op, node: str, f: str, exc: CallError) -> Op:
        """The completion of `op`, ended by `exc` in a call that was an `f`."""
        outcome, name = classify(f, exc)
        if not exc.sent and not op.get("final"):
            self._rotate()  # the member is down: the next op asks the next one
        elif exc.code is None:
            self.close()  # a lost or timed-out connection is not reused
        return {**op, "type": outcome, "node": node, "error": name, "detail": exc.detail}

    def _append(self, op: Op, append: kv.Append, node: str, timeout: float) -> Op:
        """The cas loop (the module's docstring); CallError from a Txn, whose outcome it is."""
        deadline = time.monotonic() + timeout
        while True:
            try:  # a read, which changes nothing, whatever became of it
                answer = call(self._client(), "/kv/range", range_body(append.key),
                              max(0.0, deadline - time.monotonic()))
                current = read_value(answer)
            except CallError as exc:
                return self._failed(op, node, "read", exc)
            except ValueError as exc:
                return {**op, "type": "fail", "node": node, "error": "bad-value",
                        "detail": str(exc)[:200]}
            new = kv.appended(current, append.value)
            if new is None:
                return {**op, "type": "fail", "node": node, "error": "not-text",
                        "detail": repr(current)[:200]}
            answer = call(self._client(), "/kv/txn", cas_body(append.key, current, new),
                          max(0.0, deadline - time.monotonic()))
            if answer.get("succeeded") is True:
                return {**op, "type": "ok", "node": node}
            if deadline - time.monotonic() < MIN_ROUND_S:
                return {**op, "type": "fail", "node": node, "error": "append-contended"}
