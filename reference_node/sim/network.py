"""The simulated network: per-message latency, loss, duplication, reordering, slow links and
partitions.

Theory of operation: a message's fate is drawn from the network random stream when it is sent
(`delivery_times`: none when lost, two when duplicated, each 1-3 ms plus whatever the active fault
adds; `corrupted`: a snapshot chunk with a byte flipped, under corrupt-snapshot; `vote_delayed`:
a Vote or pre-vote answer held back past its candidate's next election, under vote-delay), and its
link is checked again when it arrives (`link_ok`). A partition is a set of blocked directed links, so a
message in flight when a partition starts is lost as it would be on a cut wire. Clients sit outside
every partition (the harness's clients reach every node: "the leader isolated while clients still
reach it"), so a reply to a client only takes time (`reply_time`).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

SHIFT = 10  # node ids are below 1024 in a simulation


class Network:
    __slots__ = ("blocked", "corrupt_p", "delay_max", "drop_p", "dup_p", "jitter_max", "rng",
                 "slow", "vote_delay")

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.blocked: set[int] = set()
        self.drop_p = 0.0
        self.dup_p = 0.0
        self.corrupt_p = 0.0
        """The chance that a snapshot chunk arrives with one byte flipped."""
        self.delay_max = 0
        self.jitter_max = 0
        self.slow: dict[int, int] = {}
        """Extra latency (ms) on some directed links: a slow path that stays up."""
        self.vote_delay: tuple[int, int] | None = None
        """vote-delay: the range (ms, end excluded) added to every Vote and pre-vote answer."""

    def heal(self) -> None:
        """Back to a clean network: no partition, no slow link, no loss, delay or duplication."""
        self.blocked.clear()
        self.slow.clear()
        self.drop_p = self.dup_p = self.corrupt_p = 0.0
        self.delay_max = self.jitter_max = 0
        self.vote_delay = None

    def link_ok(self, src: int, dst: int) -> bool:
        return ((src << SHIFT) | dst) not in self.blocked

    def delivery_times(self, now: int, src: int = 0, dst: int = 0) -> list[int]:
        """Delivery times of one message sent now from `src` to `dst`: none when dropped, two when
        duplicated."""
        rng = self.rng
        if self.drop_p and rng.random() < self.drop_p:
            return []
        lat = now + 1 + rng.randrange(3)
        if self.slow:
            lat += self.slow.get((src << SHIFT) | dst, 0)
        if self.delay_max:
            lat += rng.randrange(self.delay_max)
        if self.jitter_max:
            lat += rng.randrange(self.jitter_max)
        if self.dup_p and rng.random() < self.dup_p:
            return [lat, lat + 1 + rng.randrange(20)]
        return [lat]

    def corrupted(self, data: bytes) -> bytes | None:
        """`data` with one byte flipped, at the chance `corrupt_p`; None when it arrives intact."""
        if not data or self.rng.random() >= self.corrupt_p:
            return None
        at = self.rng.randrange(len(data))
        return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]

    def vote_delayed(self, times: list[int]) -> list[int]:
        """`times` (a Vote answer's delivery times) pushed back by the vote-delay range: one draw
        for the message, so that a duplicate still follows its original."""
        assert self.vote_delay is not None
        low, high = self.vote_delay
        extra = self.rng.randrange(low, high)
        return [t + extra for t in times]

    def reply_time(self, now: int) -> int:
        """When a reply sent now reaches its client."""
        return now + 1 + self.rng.randrange(3)

    def partition(self, groups: Sequence[Iterable[int]], nodes: Iterable[int]) -> None:
        """Only nodes sharing a group talk; a node in no group talks to no one."""
        member: dict[int, set[int]] = {}
        for i, group in enumerate(groups):
            for n in group:
                member.setdefault(n, set()).add(i)
        all_nodes = sorted(nodes)
        self.blocked.clear()
        for a in all_nodes:
            for b in all_nodes:
                if a != b and not (member.get(a, set()) & member.get(b, set())):
                    self.blocked.add((a << SHIFT) | b)

    def slow_link(self, src: int, dst: int, extra_ms: int) -> None:
        """Messages from `src` to `dst` (that direction only) take `extra_ms` longer."""
        self.slow[(src << SHIFT) | dst] = extra_ms

    def connect_only(self, edges: Iterable[tuple[int, int]], nodes: Iterable[int]) -> None:
        """Only the given undirected links work (for rings)."""
        ok = {(a << SHIFT) | b for a, b in edges} | {(b << SHIFT) | a for a, b in edges}
        all_nodes = sorted(nodes)
        self.blocked = {
            (a << SHIFT) | b for a in all_nodes for b in all_nodes if a != b
        } - ok
