"""A simulated node's RPC layer: at most one response per request reaches the core.

Theory of operation: like the server's (reference_node/server/peers.py), every request a node sends
travels with a new correlation id, and the node remembers it until a response answers it. A node
answers the requests delivered to it in the order they came, per requester and response type, and
its response carries the id of the oldest one not yet answered. The network may duplicate either:
a second copy of a request is handed to the core (it handles both) but answered with id 0, and a
response whose id no request is waiting for is dropped before the core sees it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from reference_node.raft.messages import RESPONSE_TO, Message

RESPONSES = frozenset(RESPONSE_TO.values())
NO_REQUEST = 0
"""The correlation id of a response that answers no request (one to a duplicate copy)."""


class Rpc:
    """One incarnation's correlation state; a restart starts a new one."""

    __slots__ = ("answering", "asked", "awaiting", "ids")

    def __init__(self, ids: Iterator[int]) -> None:
        self.ids = ids
        """The cluster's correlation ids, shared by every node, so that ids are never reused."""
        self.awaiting: set[int] = set()
        """Ids of the requests this node sent that no response has answered yet."""
        self.asked: set[int] = set()
        """Ids of the requests delivered to this node (a second copy is not answered twice)."""
        self.answering: dict[tuple[int, type], deque[int]] = {}
        """Per (requester, response type): ids of the delivered requests not yet answered."""

    def admit(self, src: int, message: Message, rid: int) -> bool:
        """Whether `message` from `src` reaches the core: every request does, a response only if
        it answers a request still waiting."""
        response = RESPONSE_TO.get(type(message))
        if response is not None:
            if rid not in self.asked:
                self.asked.add(rid)
                self.answering.setdefault((src, response), deque()).append(rid)
            return True
        if rid in self.awaiting:
            self.awaiting.discard(rid)
            return True
        return False

    def correlate(self, dst: int, message: Message) -> int:
        """The correlation id `message` to `dst` travels with: a new one for a request; for a
        response, the oldest unanswered request from `dst` of that kind."""
        cls = type(message)
        if cls in RESPONSES:
            waiting = self.answering.get((dst, cls))
            return waiting.popleft() if waiting else NO_REQUEST
        rid = next(self.ids)
        self.awaiting.add(rid)
        return rid
