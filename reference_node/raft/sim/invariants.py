"""Raft's invariants, checked by the simulator after every event.

Each check is incremental (it looks only at what the last event changed), so that checking after
every event stays cheap. A broken invariant raises `Violation` naming it.

| invariant | holds when |
| --- | --- |
| SingleLeader | at most one leader per epoch, ever |
| MonotonicEpoch | a node's epoch never decreases, across restarts too |
| MonotonicHighWatermark | a node's high watermark never decreases while it runs |
| MajorityReachedHighWatermark | when a leader's HW reaches H, a majority of voters has flushed entry H-1 as the leader has it |
| ConsistentCommittedData | every offset below any node's HW holds the same entry on every node, ever; no node truncates below its HW |
| NoAckedAppendLost | an acknowledged append stays committed at its offset |
| ReadsLinearizable | a read's HW covers every append acknowledged before the read began |
| ObserversFollow | no observer ends the run stranded: in an epoch above every voter's and behind what was committed when faults healed (an observer that campaigns, `observer-campaign`, strands itself in an epoch no leader has and stops replicating: KAFKA-17067's harm, brokers stuck on stale metadata) |
| ZombieStepDown | a leader cut off from a majority is no longer leader once the leader progress timeout (plus delivery slack) has passed |
| Liveness | once faults heal, an append commits within the remaining simulated time |
"""

from __future__ import annotations

from collections.abc import Callable

from reference_node.raft.messages import Entry

INVARIANTS = (
    "SingleLeader",
    "MonotonicEpoch",
    "MonotonicHighWatermark",
    "MajorityReachedHighWatermark",
    "ConsistentCommittedData",
    "NoAckedAppendLost",
    "ReadsLinearizable",
    "ObserversFollow",
    "ZombieStepDown",
    "Liveness",
)


class Violation(Exception):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


def same_entry(a: Entry, b: Entry) -> bool:
    return a is b or (a.epoch == b.epoch and a.kind is b.kind and a.payload == b.payload)


class Invariants:
    """The global memory the checks need: leaders per epoch, the committed log, acked appends."""

    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}
        self.committed: list[Entry] = []
        self.acked: dict[int, bytes] = {}
        self.max_acked = -1

    def leader(self, node: int, epoch: int) -> None:
        other = self.leaders.setdefault(epoch, node)
        if other != node:
            raise Violation("SingleLeader", f"nodes {other} and {node} both led epoch {epoch}")

    def epoch(self, node: int, old: int, new: int) -> None:
        if new < old:
            raise Violation("MonotonicEpoch", f"node {node} went from epoch {old} to {new}")

    def observer_followed(self, node: int, hw: int, committed_at_heal: int, state: str,
                          epoch: int, voter_epoch: int) -> None:
        if hw < committed_at_heal:
            raise Violation(
                "ObserversFollow",
                f"observer {node} ends the run {state} in epoch {epoch}, above every voter's "
                f"(at most {voter_epoch}), with high watermark {hw}; {committed_at_heal} entries "
                "were committed when the faults healed",
            )

    def truncated(self, node: int, offset: int, hw: int) -> None:
        if offset < hw:
            raise Violation(
                "ConsistentCommittedData",
                f"node {node} truncated its log to {offset}, below its high watermark {hw}",
            )

    def high_watermark(
        self, node: int, old: int, new: int, entry_at: Callable[[int], Entry | None]
    ) -> None:
        """`node`'s HW moved from `old` to `new`: record or compare every newly committed entry."""
        if new < old:
            raise Violation("MonotonicHighWatermark", f"node {node} HW went from {old} to {new}")
        committed = self.committed
        for offset in range(old, new):
            entry = entry_at(offset)
            if entry is None:
                raise Violation(
                    "ConsistentCommittedData", f"node {node} has HW {new} but no entry at {offset}"
                )
            if offset < len(committed):
                if not same_entry(entry, committed[offset]):
                    name = "NoAckedAppendLost" if offset in self.acked else "ConsistentCommittedData"
                    raise Violation(
                        name,
                        f"offset {offset}: node {node} committed {entry}, "
                        f"earlier committed {committed[offset]}",
                    )
            elif offset == len(committed):
                committed.append(entry)

    def majority_flushed(self, node: int, hw: int, holders: int, majority: int) -> None:
        if holders < majority:
            raise Violation(
                "MajorityReachedHighWatermark",
                f"leader {node} set HW {hw} but only {holders} voters (need {majority}) "
                f"have flushed entry {hw - 1}",
            )

    def acknowledged(self, offset: int, payload: bytes) -> None:
        entry = self.committed[offset] if offset < len(self.committed) else None
        if entry is None or entry.payload != payload:
            raise Violation(
                "NoAckedAppendLost",
                f"append {payload!r} acknowledged at {offset}, committed there: {entry}",
            )
        self.acked[offset] = payload
        self.max_acked = max(self.max_acked, offset)

    def read(self, node: int, max_acked_at_invoke: int, hw: int, records: tuple[Entry, ...]) -> None:
        if hw <= max_acked_at_invoke:
            raise Violation(
                "ReadsLinearizable",
                f"read at node {node} returned HW {hw}, but offset {max_acked_at_invoke} was "
                "acknowledged before the read began",
            )
        committed = self.committed
        for entry in records:
            if entry.offset >= len(committed) or not same_entry(entry, committed[entry.offset]):
                raise Violation(
                    "ConsistentCommittedData",
                    f"read at node {node} returned {entry} at {entry.offset}",
                )

    def zombie(self, node: int, cut_for_ms: int, limit_ms: int) -> None:
        if cut_for_ms > limit_ms:
            raise Violation(
                "ZombieStepDown",
                f"node {node} is still leader {cut_for_ms} ms after losing its majority "
                f"(limit {limit_ms} ms)",
            )
