"""ZombieStepDown's bookkeeping: since when each voter has been cut off from a majority.

Theory of operation: a voter is cut off while fewer than a majority of the voters (itself
included) are alive and reachable from it both ways. That changes only when the nemesis changes
the network or stops or starts a node, so the nemesis calls `recompute` then; a voter still cut off
keeps the time it was first cut off. After every event `check` asks whether a voter cut off for
longer than twice the leader progress timeout (plus delivery slack) is still leader.

Why twice: check-quorum is Kafka's (`LeaderState.updateCheckQuorumForFollowingVoter`): the leader
collects the voters that fetched since its timer last restarted and restarts it the moment they
make a majority. Fetches from before the cut count toward that set, so one voter still in reach
can complete it up to one timeout after the cut (its first fetch as a follower of this leader,
say), and the restarted timer runs one more timeout: a leader cut off at t may lead until
t + 2 x timeout (issue 21 found it in a run; tests/raft/test_check_quorum.py shows it step by
step).

With KIP-853 (`dynamic`) the voters are whoever a node's own voter set names, so every running
node is judged by the set its core holds (a leader by the set it counts its quorum in, itself
included only if it is in it; a voter only as the replica the set names, so a re-formatted disk
does not count), and a changed set is a change too: the host calls `recompute` then.
"""

from __future__ import annotations

from reference_node.sim.invariants import Invariants
from reference_node.sim.network import Network
from reference_node.sim.node import SimNode
from reference_node.sim.oracle import majority

ZOMBIE_SLACK_MS = 1000
"""Time for the last fetch responses to arrive and be counted, past the progress timeouts."""


class ZombieWatch:
    __slots__ = ("by_id", "cut_since", "dynamic", "inv", "limit_ms", "majority", "net", "voters")

    def __init__(
        self, voters: list[SimNode], net: Network, inv: Invariants, check_quorum_timeout_ms: int,
        dynamic: bool = False,
    ) -> None:
        """`voters`: the static voters, or with `dynamic` every node."""
        self.voters = voters
        self.by_id = {node.id: node for node in voters}
        self.net = net
        self.inv = inv
        self.majority = majority(len(voters))
        self.limit_ms = 2 * check_quorum_timeout_ms + ZOMBIE_SLACK_MS
        self.dynamic = dynamic
        self.cut_since: dict[int, int] = {}
        """The voters cut off now, in voter order, and since when."""

    def recompute(self, now: int) -> None:
        if self.dynamic:
            self._recompute_dynamic(now)
            return
        link = self.net.link_ok
        voters = self.voters
        cut: dict[int, int] = {}
        for node in voters:
            n = node.id
            reach = 1 + sum(
                1 for v in voters if v.id != n and v.alive and link(n, v.id) and link(v.id, n)
            )
            if reach < self.majority:
                cut[n] = self.cut_since.get(n, now)
        self.cut_since = cut

    def _recompute_dynamic(self, now: int) -> None:
        link = self.net.link_ok
        by_id = self.by_id
        cut: dict[int, int] = {}
        for node in self.voters:
            core = node.core
            if core is None:
                continue
            n = node.id
            voters = core.voters
            me = voters.get(n)
            if me is None and not core.is_leader:
                continue  # an observer: it leads nothing, now or before its set changes
            reach = 0
            for v in voters:
                if v.id == n:
                    reach += node.counts_as(v)
                    continue
                other = by_id.get(v.id)
                if other is not None and other.alive and other.counts_as(v) and \
                        link(n, v.id) and link(v.id, n):
                    reach += 1
            if reach < majority(len(voters)):
                cut[n] = self.cut_since.get(n, now)
        self.cut_since = cut

    def check(self, now: int) -> None:
        """ZombieStepDown, for every voter cut off now."""
        if not self.cut_since:
            return
        by_id = self.by_id
        for n, since in self.cut_since.items():
            core = by_id[n].core
            if core is not None and core.is_leader:
                self.inv.zombie(n, now - since, self.limit_ms)
