"""The `nats` target's client: the `append` workload over JetStream, with nats-py.

nats-py is asyncio; the harness's `Client` is synchronous. Each client runs its own event loop on
a private daemon thread and hands it one coroutine per operation. A client talks only to its own
node (`client_address(node, "client")`); NATS routes each request to the stream's leader, so the
client never moves, and every completion's `node` is its own node.

An append is a JetStream publish whose message id is its value (de-duplicated within the stream's
window), ok at the offset its PubAck names (stream sequences count from 1, Kafka's offsets from 0).
A read asks for the stream's `last_seq` (its `hw`), then gets every message after F, `WINDOW`
requests in flight; a partial read fails. Both are served by whichever server believes it leads
the stream, with no quorum round, so reads are not promised linearizable. A read that did not
complete is `fail`, but one NATS answers "stream not found" is an ok read of nothing (`absent`):
NATS says the log is gone. An append is `fail` when it certainly was not stored, else `info`.

Details (each op, why this API, which errors are certain failures):
docs/internals/targets.md#nats_client
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import time
from collections.abc import Coroutine
from typing import Any

from contracts.backend import Backend, BackendError
from contracts.history import Op
from contracts.target import Client
from workloads import append, ops

# the one stream the log workload's records go to, and the subject they are published on
STREAM = "jepsen"
SUBJECT = "jepsen.log"
# MSG.GET requests in flight at once during a read
WINDOW = 256
NOT_FOUND = 10037  # JSNoMessageFoundErr: "no message found"
# JSStreamNotFoundErr: "stream not found" (github.com/nats-io/nats-server server/errors.json, HTTP
# code 404). Clustered, STREAM.INFO gets it only from the JetStream meta leader, when its
# replicated stream assignments hold no such stream (server/jetstream_api.go, jsStreamInfoRequest:
# `isLeader && sa == nil`; a server that is not the meta leader stays silent, one with no meta
# leader says 10008 "JetStream system temporarily unavailable"; a server alone answers it from
# its own streams): NATS's own definite word that the stream does not exist.
STREAM_NOT_FOUND = 10059
STREAM_IN_USE = 10058  # JSStreamNameExistErr: create of a stream that exists with another config
# JetStream error codes (server/errors.json, 2.9) that prove a publish was not stored: checked
# before the message is proposed, or on apply from the replicated state alike on every replica
CERTAIN_FAILURES = {
    10059: "stream-not-found", 10060: "stream-not-match", 10054: "message-too-large",
    10097: "header-too-large", 10071: "wrong-last-sequence", 10070: "wrong-last-msg-id",
    10109: "stream-sealed", 10120: "no-limits", 10023: "insufficient-resources",
}


class ApiError(Exception):
    """A JetStream API answer carrying `error` ({code, err_code, description})."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("description", "jetstream error"))
        self.code = int(error.get("code") or 0)
        self.err_code = int(error.get("err_code") or 0)


class NotSent(Exception):
    """Nothing of the operation reached a server (no connection)."""


def publish_outcome(reply: dict[str, Any]) -> tuple[str, str | None, int | None]:
    """A PubAck answer's (type, error, stream sequence): ok with the sequence, or the failure."""
    error = reply.get("error")
    if isinstance(error, dict):
        err_code = int(error.get("err_code") or 0)
        if err_code in CERTAIN_FAILURES:
            return "fail", CERTAIN_FAILURES[err_code], None
        if err_code == 0 and int(error.get("code") or 0) == 503:
            return "fail", "proposal-refused", None  # node.Propose failed: nothing appended
        return "info", f"jetstream-{err_code or error.get('code')}", None
    seq = reply.get("seq")
    if type(seq) is not int or seq < 1:
        return "info", "bad-puback", None
    return "ok", None, seq


def record_value(data: str | None) -> int | None:
    """A stored message's value as the history has it: the integer its base64 `data` spells in
    ASCII decimal, else None (docs/contracts.md: never a made-up value)."""
    try:
        text = base64.b64decode(data or "", validate=True).decode("ascii")
        return int(text) if text.strip() == text and text else None
    except (ValueError, UnicodeDecodeError):
        return None


async def api(nc: Any, subject: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One JetStream API request; its answer, or ApiError."""
    msg = await nc.request(subject, json.dumps(body).encode(), timeout=timeout)
    reply = json.loads(msg.data)
    if not isinstance(reply, dict):
        raise ApiError({"description": f"not an object: {msg.data[:100]!r}"})
    if isinstance(reply.get("error"), dict):
        raise ApiError(reply["error"])
    return reply


async def connect(address: tuple[str, int], timeout: float) -> Any:
    """A connection to one server, never moved to another (no reconnect, no discovered
    servers); NotSent when it cannot be made."""
    import nats

    async def quiet(*_: Any) -> None:
        return None
    try:
        # max_reconnect_attempts=0 would make nats-py dial a refusing server for ever, even
        # on the first connect; 1 with no wait between tries gives up after two refusals
        return await asyncio.wait_for(nats.connect(
            servers=[f"nats://{address[0]}:{address[1]}"], allow_reconnect=False,
            connect_timeout=timeout, max_reconnect_attempts=1, reconnect_time_wait=0,
            error_cb=quiet, disconnected_cb=quiet, closed_cb=quiet), timeout + 1.0)
    except Exception as exc:  # nats-py raises several kinds (refused, timeout, no servers)
        raise NotSent(f"{type(exc).__name__}: {exc}"[:200]) from None


class _Loop:
    """An event loop on a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nats-client",
                                       daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class NatsClient(Client):
    """The `append` workload's client (the one workload the target runs)."""

    def __init__(self) -> None:
        self.node = ""
        self.address: tuple[str, int] = ("", 0)
        self.nc: Any = None
        self.runner: _Loop | None = None

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        self.node = node
        self.address = backend.client_address(node, "client")
        self.runner = _Loop()

    def close(self) -> None:
        if self.runner is None:
            return
        with contextlib.suppress(Exception):
            self.runner.run(self._drop(), 2.0)
        self.runner.close()
        self.runner = None

    async def _drop(self) -> None:
        nc, self.nc = self.nc, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.close(), 1.0)

    async def _connection(self, timeout: float) -> Any:
        if self.nc is None or not self.nc.is_connected:
            await self._drop()
            self.nc = await connect(self.address, timeout)
        return self.nc

    def invoke(self, op: Op, timeout: float) -> Op:
        if self.runner is None:
            raise RuntimeError("NatsClient.invoke before open")
        coro: Coroutine[Any, Any, Op]
        match ops.invoke_of(op, append.INVOKES):
            case append.Append(value=value):
                coro, unknown = self._append(op, value, timeout), "info"
            case append.Read(start=start):
                coro, unknown = self._read(op, start, timeout), "fail"
            case _:
                return {**op, "type": "fail", "node": self.node, "error": f"unknown-f {op['f']}"}
        try:
            done: Op = self.runner.run(coro, timeout + 2.0)
        except TimeoutError:
            # the loop did not finish in time: unknown for an append, nothing for a read
            done = {**op, "type": unknown, "error": "timeout"}
        return {**done, "node": self.node}

    async def _append(self, op: Op, value: int, timeout: float) -> Op:
        try:
            nc = await self._connection(timeout)
        except NotSent as exc:
            return {**op, "type": "fail", "error": "connect-failed", "detail": str(exc)}
        import nats.errors

        headers = {"Nats-Msg-Id": str(value), "Nats-Expected-Stream": STREAM}
        try:
            msg = await nc.request(SUBJECT, str(value).encode(), timeout=timeout,
                                   headers=headers)
        except nats.errors.NoRespondersError:
            return {**op, "type": "fail", "error": "no-responders"}
        except (nats.errors.ConnectionClosedError, nats.errors.ConnectionDrainingError):
            # raised by publish before anything is buffered: nothing was sent
            await self._drop()
            return {**op, "type": "fail", "error": "connection-closed"}
        except nats.errors.TimeoutError:
            await self._drop()
            return {**op, "type": "info", "error": "timeout"}
        except Exception as exc:
            await self._drop()
            return {**op, "type": "info", "error": type(exc).__name__,
                    "detail": str(exc)[:200]}
        try:
            reply = json.loads(msg.data)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            return {**op, "type": "info", "error": "bad-puback", "detail": repr(msg.data[:100])}
        kind, error, seq = publish_outcome(reply)
        if kind == "ok" and seq is not None:
            return {**op, "type": "ok", "value": ops.value(append.AppendOk(value, seq - 1))}
        detail = str((reply.get("error") or {}).get("description", ""))[:200]
        return {**op, "type": kind, "error": error, "detail": detail}

    async def _read(self, op: Op, start: int, timeout: float) -> Op:
        try:
            nc = await self._connection(timeout)
            value = await asyncio.wait_for(read_stream(nc, start, timeout), timeout)
        except NotSent as exc:
            return {**op, "type": "fail", "error": "connect-failed", "detail": str(exc)}
        except IncompleteRead as exc:
            return {**op, "type": "fail", "error": "incomplete-read", "detail": str(exc)}
        except ApiError as exc:
            return {**op, "type": "fail", "error": f"jetstream-{exc.err_code or exc.code}",
                    "detail": str(exc)[:200]}
        except Exception as exc:  # a read has no effect: whatever stopped it, it is a fail
            await self._drop()
            name = "timeout" if isinstance(exc, TimeoutError) or "Timeout" in type(
                exc).__name__ else type(exc).__name__
            return {**op, "type": "fail", "error": name, "detail": str(exc)[:200]}
        if value.get("absent"):
            return {**op, "type": "ok", "value": value,
                    "detail": f"jetstream-{STREAM_NOT_FOUND} stream not found"}
        return {**op, "type": "ok", "value": value}


class IncompleteRead(Exception):
    """A sequence at or below the read's watermark could not be had, and the stream does not
    say it is gone."""


async def read_stream(nc: Any, start: int, timeout: float) -> dict[str, Any]:
    """The ok value of `read {"from": start}`: the stream's messages from offset `start` (its
    sequence start + 1) to its last sequence (see the module's docstring); a read of nothing,
    marked `absent`, when NATS says the stream does not exist (`STREAM_NOT_FOUND`): the stream
    was made before any client ran (`create_stream`), so its absence is a loss for the checkers
    to judge, not a read that could not be made."""
    try:
        info = await api(nc, f"$JS.API.STREAM.INFO.{STREAM}", {}, timeout)
    except ApiError as exc:
        if exc.err_code == STREAM_NOT_FOUND:
            return ops.value(append.read_of_nothing(start))
        raise
    state = info.get("state") or {}
    hw = int(state.get("last_seq") or 0)
    first = int(state.get("first_seq") or 0)
    begin = start
    if hw > start and first > start + 1:
        begin = first - 1  # the prefix below `first` is gone: read from where the stream begins
    seqs = list(range(begin + 1, hw + 1))
    found: dict[int, int | None] = {}
    missing = await _get_messages(nc, seqs, found, timeout)
    if missing:
        missing = await _get_messages(nc, missing, found, timeout)
    if missing:
        again = await api(nc, f"$JS.API.STREAM.INFO.{STREAM}", {"deleted_details": True},
                          timeout)
        now = again.get("state") or {}
        gone = set(now.get("deleted") or []) | set((now.get("lost") or {}).get("msgs") or [])
        unexplained = [s for s in missing if s not in gone]
        if unexplained:
            raise IncompleteRead(f"no message at sequence {unexplained[0]} at or below the "
                                 f"last sequence {hw} ({len(unexplained)} such)")
    records: list[list[int | None]] = [[s - 1, found[s]] for s in seqs if s in found]
    return ops.value(append.ReadOk(begin, hw, records))


async def _get_messages(nc: Any, seqs: list[int], found: dict[int, int | None],
                        timeout: float) -> list[int]:
    """MSG.GET each of `seqs` (WINDOW at a time) into `found`; the ones NATS has no message
    for. Any other error ends the read (ApiError or the request's own)."""
    missing: list[int] = []
    subject = f"$JS.API.STREAM.MSG.GET.{STREAM}"
    for at in range(0, len(seqs), WINDOW):
        batch = seqs[at:at + WINDOW]
        replies = await asyncio.gather(*(api(nc, subject, {"seq": s}, timeout) for s in batch),
                                       return_exceptions=True)
        for seq, reply in zip(batch, replies, strict=True):
            if isinstance(reply, ApiError) and reply.err_code == NOT_FOUND:
                missing.append(seq)
            elif isinstance(reply, BaseException):
                raise reply
            else:
                message = reply.get("message") or {}
                found[seq] = record_value(message.get("data"))
    return missing


def create_stream(address: tuple[str, int], nodes: int, deadline: float) -> None:
    """Create the stream `jepsen` (file storage, one replica per node, NATS's defaults
    otherwise) through the server at `address`, asking again until `deadline` while the
    cluster is not ready; BackendError with NATS's last answer when it never succeeds. Creating
    it again with the same config is NATS's no-op."""
    config = {"name": STREAM, "subjects": [SUBJECT], "storage": "file", "num_replicas": nodes}
    last = "no answer"

    async def attempt() -> bool:
        nonlocal last
        try:
            nc = await connect(address, 2.0)
        except NotSent as exc:
            last = str(exc)
            return False
        try:
            await api(nc, f"$JS.API.STREAM.CREATE.{STREAM}", config, 5.0)
            return True
        except ApiError as exc:
            last = f"{exc} (err_code {exc.err_code})"
            if exc.err_code == STREAM_IN_USE:
                raise BackendError(f"nats: stream {STREAM} exists with another config: "
                                   f"{exc}") from None
            return False
        except Exception as exc:
            last = f"{type(exc).__name__}: {exc}"
            return False
        finally:
            with contextlib.suppress(Exception):
                await nc.close()

    while time.monotonic() < deadline:
        if asyncio.run(attempt()):
            return
        time.sleep(0.2)
    raise BackendError(f"nats: could not create stream {STREAM}: {last}")
