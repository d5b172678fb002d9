"""`VoterSet`: who votes. Static today; later read from the log's VotersRecord (KIP-853)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class VoterSet:
    """The voters of the quorum. Directory ids (KIP-853) will join the node ids here."""

    ids: frozenset[int]

    @classmethod
    def of(cls, ids: Iterable[int]) -> VoterSet:
        voters = frozenset(ids)
        if not voters:
            raise ValueError("a quorum needs at least one voter")
        if any(v < 0 for v in voters):
            raise ValueError(f"voter ids must be non-negative: {sorted(voters)}")
        return cls(voters)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.ids

    def __len__(self) -> int:
        return len(self.ids)

    def sorted(self) -> list[int]:
        return sorted(self.ids)

    @property
    def majority(self) -> int:
        return len(self.ids) // 2 + 1
