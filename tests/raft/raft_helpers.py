"""Small builders shared by the Raft core tests."""

from __future__ import annotations

import random
from collections.abc import Sequence

from reference_node.raft.api import QuorumState, Ready, Receive, Send, Tick
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.messages import Entry, EntryKind, Message

CLUSTER = "test-cluster"


def entries(*epochs: int, start: int = 0) -> list[Entry]:
    """One data entry per epoch given, at offsets start, start+1, ..."""
    return [Entry(start + i, e, EntryKind.DATA, str(start + i).encode()) for i, e in enumerate(epochs)]


def make(
    node_id: int = 1,
    voters: Sequence[int] = (1, 2, 3),
    qs: QuorumState | None = None,
    log: Sequence[Entry] = (),
    config: RaftConfig | None = None,
    seed: int = 0,
    now: int = 0,
    keep_ready: bool = False,
) -> RaftCore:
    """A core built from persisted state; its first Ready is drained unless `keep_ready`."""
    core = RaftCore(node_id, voters, CLUSTER, config or RaftConfig(), random.Random(seed), now,
                    qs, log)
    if not keep_ready:
        drain(core)
    return core


def drain(core: RaftCore) -> Ready:
    ready = core.ready()
    core.advance(ready)
    return ready


def deliver(core: RaftCore, src: int, msg: Message) -> Ready:
    core.step(Receive(src, msg))
    return drain(core)


def tick(core: RaftCore, now: int) -> Ready:
    core.step(Tick(now))
    return drain(core)


def sent(ready: Ready, kind: type, dst: int | None = None) -> list[Send]:
    return [s for s in ready.messages
            if isinstance(s.message, kind) and (dst is None or s.dst == dst)]


def only(ready: Ready, kind: type, dst: int | None = None) -> Message:
    found = sent(ready, kind, dst)
    assert len(found) == 1, f"expected one {kind.__name__} to {dst}, got {ready.messages}"
    return found[0].message


def elect(core: RaftCore, now: int = 5000) -> Ready:
    """Drive a voter of (1,2,3) with pre-vote to leadership of the next epoch."""
    from reference_node.raft.messages import ErrorCode, VoteResponse

    tick(core, now)
    assert core.state_name in ("prospective", "candidate"), core.state_name
    if core.state_name == "prospective":
        deliver(core, 2, VoteResponse(ErrorCode.none, -1, core.epoch, True, True))
    assert core.state_name == "candidate"
    return deliver(core, 2, VoteResponse(ErrorCode.none, -1, core.epoch, True, False))
