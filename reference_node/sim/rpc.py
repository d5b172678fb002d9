"""A simulated node's RPC layer: at most one response per request reaches the core.

Theory of operation: like the server's (reference_node/server/peers.py), every request a node sends
travels with a new correlation id, and the node remembers it until a response answers it. The core
names the request each response answers (`Send.in_reply_to`, the very object it received), and the
response carries that request's id, whatever order the core answers in (a parked Fetch is answered
after later requests). The network may duplicate either: a second copy of a request is handed to the
core (it handles both) but only the first answer carries its id (later ones carry 0), and a response
whose id no request is waiting for is dropped before the core sees it. A response reaches the core
with the request it answers (`Receive.in_reply_to`), as the server's connection hands it.
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

    __slots__ = ("asked", "awaiting", "ids", "unanswered")

    def __init__(self, ids: Iterator[int]) -> None:
        self.ids = ids
        """The cluster's correlation ids, shared by every node, so that ids are never reused."""
        self.awaiting: dict[int, Message] = {}
        """The requests this node sent that no response has answered yet, by id."""
        self.asked: set[int] = set()
        """Ids of the requests delivered to this node (a second copy is not answered twice)."""
        self.unanswered: dict[int, tuple[Message, deque[int]]] = {}
        """Requests delivered to this node and not answered yet, by object identity: the request
        (kept, so that its identity stays its own) and its ids in arrival order."""

    def request_of(self, rid: int) -> Message | None:
        """The request of ours that correlation id `rid` answers, while it is still waiting."""
        return self.awaiting.get(rid)

    def admit(self, src: int, message: Message, rid: int) -> bool:
        """Whether `message` from `src` reaches the core: every request does, a response only if
        it answers a request still waiting."""
        if type(message) in RESPONSE_TO:
            if rid not in self.asked:
                self.asked.add(rid)
                entry = self.unanswered.setdefault(id(message), (message, deque()))
                entry[1].append(rid)
            return True
        return self.awaiting.pop(rid, None) is not None

    def correlate(self, dst: int, message: Message, in_reply_to: Message | None = None) -> int:
        """The correlation id `message` to `dst` travels with: a new one for a request; for a
        response, the id of the request it answers (`in_reply_to`), if not answered yet."""
        if type(message) in RESPONSES:
            entry = self.unanswered.get(id(in_reply_to)) if in_reply_to is not None else None
            if entry is None or entry[0] is not in_reply_to:
                return NO_REQUEST
            rid = entry[1].popleft()
            if not entry[1]:
                del self.unanswered[id(in_reply_to)]
            return rid
        rid = next(self.ids)
        self.awaiting[rid] = message
        return rid
