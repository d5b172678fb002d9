"""`Routing`: each request from the wire to whoever answers it, and each message of the core to
where it goes.

From the wire (`dispatch`, the listener's handler): Vote, BeginQuorumEpoch, EndQuorumEpoch,
FetchSnapshot, UpdateRaftVoter and a replica's Fetch (replica id >= 0) are translated (`translate`), checked (the
cluster id; a request that does not name exactly our partition is INVALID_REQUEST) and stepped
into the core; BrokerRegistration and BrokerHeartbeat (api 62/63, on a controller) are checked
(cluster id, a listener and an incarnation id: else refused at once) and stepped in the same way;
everything else goes to the client API (`client_api.ClientApi.handlers`).

The core answers a request with a `Send` of the response that names the request it answers
(`Send.in_reply_to`); the pending request is found by identity, in whatever order the core
answers, and answered on its connection. A request the core does not answer within the request
timeout (plus a Fetch's MaxWaitMs) is forgotten: a Raft request gets no answer, a broker's gets
REQUEST_TIMED_OUT, never silence. The core's other messages are requests to other nodes
(`peer_rpc`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from reference_node.config import NodeConfig
from reference_node.raft import messages as m
from reference_node.raft.api import Receive, Send
from reference_node.server import translate
from reference_node.server.peer_rpc import REQUESTS, PeerRpc
from reference_node.server.pump import Pump
from reference_node.wire import apis
from reference_node.wire.codec import Request
from reference_node.wire.errors import ProtocolError

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore

log = logging.getLogger(__name__)

_RAFT_APIS = (apis.VOTE, apis.BEGIN_QUORUM_EPOCH, apis.END_QUORUM_EPOCH, apis.FETCH_SNAPSHOT,
              apis.UPDATE_RAFT_VOTER)
_BROKER_APIS = (apis.BROKER_REGISTRATION, apis.BROKER_HEARTBEAT)

TIMED_OUT: Any = object()
"""What a request's future holds when the core did not answer it in time."""


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(TIMED_OUT)


class Routing:
    def __init__(self, cfg: NodeConfig, core: RaftCore, cluster_id: str, pump: Pump,
                 peer_rpc: PeerRpc, client_handlers: dict[int, Callable[[Request], Awaitable[Any]]],
                 loop: asyncio.AbstractEventLoop) -> None:
        self._cfg = cfg
        self._node_id = cfg.node_id
        self._core = core
        self._cluster_id = cluster_id
        self._pump = pump
        self._peer_rpc = peer_rpc
        self._client_handlers = client_handlers
        self._loop = loop
        self._inbound: dict[int, tuple[m.Message, asyncio.Future[Any]]] = {}
        """Requests handed to the core and not answered yet, by identity: the core names the
        request each response answers (`Send.in_reply_to`), in whatever order it answers."""

    # --- requests from the wire ---------------------------------------------------------------

    def dispatch(self, req: Request) -> Awaitable[Any]:
        """The request's answer to come (the listener's `Handler`): not a coroutine itself, so
        that a handler returning a future (Produce) costs no task."""
        if req.api_key in _BROKER_APIS:
            return self._broker_request(req)
        if req.api_key in _RAFT_APIS or (
            req.api_key == apis.FETCH and translate.fetch_replica_id(req.body) >= 0
        ):
            return self._raft_request(req)
        handler = self._client_handlers.get(req.api_key)
        if handler is None:
            nothing: asyncio.Future[Any] = self._loop.create_future()
            nothing.set_result(None)
            return nothing
        return handler(req)

    async def _raft_request(self, req: Request) -> Any:
        try:
            msg = translate.request_from_kio(req.api_key, req.body)
        except translate.NotOurPartition as exc:
            # Kafka's order: another cluster first, then a request that does not name exactly
            # our partition is INVALID_REQUEST, both as a top-level error.
            cluster_id = getattr(req.body, "cluster_id", None)
            code = m.ErrorCode.invalid_request if cluster_id in (None, self._cluster_id) \
                else m.ErrorCode.inconsistent_cluster_id
            answer = translate.refusal_to_kio(req.api_key, req.api_version, code)
            if answer is None:
                raise ProtocolError(f"{apis.API_NAMES.get(req.api_key)} v{req.api_version} "
                                    f"refused ({exc}) and it has no error field") from None
            log.debug("refusing %s: %s", apis.API_NAMES.get(req.api_key), exc)
            return answer
        if msg.cluster_id is not None and msg.cluster_id != self._cluster_id:
            return self._raft_error(req, msg, m.ErrorCode.inconsistent_cluster_id)
        src = msg.sender
        # Endpoints are learned once the request is known to be of this cluster.
        self._peer_rpc.learn(src, req.body)
        if isinstance(msg, m.FetchRequest) and msg.max_wait_ms > self._cfg.request_timeout_ms:
            # Parked longer, the answer would reach a fetcher that gave up on it (its request
            # timeout); a forged MaxWaitMs of 24 days would hold the request that long.
            msg = dataclasses.replace(msg, max_wait_ms=self._cfg.request_timeout_ms)
        wait = self._cfg.request_timeout_ms / 1000.0
        if isinstance(msg, m.FetchRequest):
            wait += max(msg.max_wait_ms, 0) / 1000.0  # a negative one is refused, not waited
        response = await self._core_answer(msg, src, wait)
        if response is TIMED_OUT:
            log.debug("no answer to %s from %d", type(msg).__name__, src)
            return None
        return translate.response_to_kio(req.api_key, req.api_version, response, self._node_id,
                                          self._cfg.client_address(self._node_id)
                                          or self._cfg.listen)

    async def _core_answer(self, msg: m.Message, src: int, wait_s: float) -> Any:
        """Step the request `msg` from `src` into the core and await its response (matched by
        identity, `_answer_inbound`), or `TIMED_OUT` after `wait_s`. The future is awaited
        directly, with a timer to expire it, rather than through `asyncio.wait_for`: that costs
        a loop iteration and four more objects per request, and this is every Fetch's path."""
        fut: asyncio.Future[Any] = self._loop.create_future()
        key = id(msg)
        self._inbound[key] = (msg, fut)
        self._pump.step(Receive(src, msg))
        expiry = self._loop.call_later(wait_s, _expire, fut)
        try:
            response = await fut
        finally:
            expiry.cancel()
        if response is TIMED_OUT:
            pending = self._inbound.get(key)
            if pending is not None and pending[1] is fut:
                del self._inbound[key]
        return response

    def _raft_error(self, req: Request, msg: m.Request, code: m.ErrorCode) -> Any:
        response = m.error_response(msg, code, self._core.responder_leader(), self._core.epoch)
        return translate.response_to_kio(req.api_key, req.api_version, response, self._node_id,
                                         self._cfg.listen)

    async def _broker_request(self, req: Request) -> Any:
        """A broker's registration or heartbeat: into the core, answered with its response."""
        try:
            msg = translate.broker_request_from_kio(req.api_key, req.body)
        except translate.BadBrokerRequest as exc:
            log.debug("refusing %s: %s", apis.API_NAMES[req.api_key], exc)
            return translate.broker_refusal_to_kio(req.api_key, req.api_version,
                                                   m.ErrorCode.invalid_request)
        cluster_id = getattr(msg, "cluster_id", None)
        if cluster_id is not None and cluster_id != self._cluster_id:
            return translate.broker_refusal_to_kio(req.api_key, req.api_version,
                                                   m.ErrorCode.inconsistent_cluster_id)
        response = await self._core_answer(msg, msg.sender,
                                           self._cfg.request_timeout_ms / 1000.0)
        if response is TIMED_OUT:
            log.debug("no answer to %s from broker %d", type(msg).__name__, msg.sender)
            return translate.broker_refusal_to_kio(req.api_key, req.api_version,
                                                   m.ErrorCode.request_timed_out)
        return translate.broker_response_to_kio(req.api_key, req.api_version, response)

    # --- messages of the core -----------------------------------------------------------------

    def send(self, send: Send) -> None:
        """A message of the core: a request to another node, or the answer to a pending
        request."""
        if isinstance(send.message, REQUESTS):
            self._peer_rpc.request(send.dst, send.message)
        else:
            self._answer_inbound(send)

    def _answer_inbound(self, send: Send) -> None:
        """The core's response to a pending request (matched by identity: `in_reply_to`)."""
        request = send.in_reply_to
        pending = self._inbound.pop(id(request), None) if request is not None else None
        if pending is not None and pending[0] is request and not pending[1].done():
            pending[1].set_result(send.message)
        else:
            log.debug("no pending request from %d for %s", send.dst,
                      type(send.message).__name__)
