"""The simulator's events: trace lines (part of the replay contract) and the queue's order."""

import heapq

import pytest

from reference_node.raft.api import AppendReply
from reference_node.raft.messages import ErrorCode, VoteRequest
from reference_node.sim.events import (
    ClientNext,
    ClientReplyDue,
    ClientRequest,
    ClientTimeout,
    Deliver,
    Event,
    EventQueue,
    FaultStart,
    FaultStop,
    Flushed,
    Heal,
    TickDue,
    VoteCrash,
    VoterRestart,
)
from reference_node.sim.faults import ActiveFault

VOTE = VoteRequest(cluster_id="c", candidate_epoch=3, candidate_id=2, last_offset_epoch=1,
                   last_offset=4, pre_vote=False)
REPLY = AppendReply(7, ErrorCode.none, offsets=(5,))
CRASH = ActiveFault("crash", (2, 4))

LINES: list[tuple[Event, str]] = [
    (Deliver(dst=3, inc=2, src=1, msg=VOTE, rid=9), f"12 deliver 1->3 {VOTE!r}"),
    (TickDue(node=4, inc=1), "12 tick 4"),
    (Flushed(node=4, inc=1), "12 flushed 4 1"),
    (ClientNext(client=0), "12 client-next 0"),
    (ClientRequest(node=2, inc=3, client=1), "12 client-request 2 3 1"),
    (ClientReplyDue(client=1, reply=REPLY, node=2), f"12 client-reply 1 {REPLY} 2"),
    (ClientTimeout(client=1, request_id=8), "12 client-timeout 1 8"),
    (FaultStart(), "12 nemesis start"),
    (FaultStop(ActiveFault("drop")), "12 nemesis stop ['drop']"),
    (FaultStop(CRASH), "12 nemesis stop ['crash', [2, 4]]"),
    (Heal(), "12 nemesis heal"),
    (VoteCrash(CRASH, 2, 5), "12 nemesis vote-crash (['crash', [2, 4]], 2, 5)"),
    (VoterRestart(CRASH, 2, 6), "12 nemesis restart (['crash', [2, 4]], 2, 6)"),
]


@pytest.mark.parametrize(("event", "line"), LINES)
def test_each_event_writes_its_trace_line(event: Event, line: str) -> None:
    assert event.trace_line(12) == line


def test_events_of_one_millisecond_run_in_push_order() -> None:
    queue = EventQueue()
    queue.push(5, ClientNext(2))
    queue.push(3, ClientNext(1))
    queue.push(5, FaultStart())  # never compared with the ClientNext: the sequence number decides
    queue.push(5, ClientNext(0))
    order = [heapq.heappop(queue.heap)[2].trace_line(0) for _ in range(4)]
    assert order == ["0 client-next 1", "0 client-next 2", "0 nemesis start", "0 client-next 0"]


def test_a_fault_is_equal_only_to_itself() -> None:
    assert ActiveFault("crash", (2,)) != ActiveFault("crash", (2,))
    assert CRASH == CRASH
