"""The faults the simulator injects: their names (the `--faults` vocabulary) and a started fault.

The nemesis (nemesis.py) starts one fault at a time, chosen from the nemesis random stream, and
stops it after a random duration; at the heal time every fault stops and every stopped node
restarts, and the liveness clock starts. `membership` is the exception (`ALONGSIDE`): it turns on
KIP-853's voters in the log, and its nemesis (membership.py) acts all along, beside whichever fault
is on. The `broker-*` faults (`BROKER_FAULTS`) act on the brokers of `--brokers N` and are left
out of a run without brokers (the nemesis then draws exactly what it drew before they existed);
with brokers, half of the turns go to them. `fsync-stall` acts on disks rather than on links or processes: the host holds the stalled
disks' completions until the fault stops (host.py). A started fault is an `ActiveFault` object
whose identity ties the events it queued (its stop, a vote crash) to it: an event for an earlier
fault finds a different object and does nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULTS: dict[str, str] = {
    "drop": "lose messages at random",
    "delay": "add up to 200 ms to every message",
    "delay-long": "add up to 3 s to every message, longer than an election round and the "
    "request timeout: answers arrive after their request was retried",
    "duplicate": "deliver some messages twice",
    "reorder": "random jitter, so messages overtake each other",
    "partition-halves": "split the nodes in two random halves",
    "partition-isolate": "cut one random node off",
    "partition-leader": "cut the leader off from the other nodes (clients still reach it)",
    "partition-ring": "a majority ring: each node reaches only its two neighbours",
    "partition-bridge": "two halves joined by one bridge node",
    "crash": "kill nodes (one, the leader, or a majority at once), losing unflushed data; "
    "restart later",
    "shutdown": "graceful shutdown (a leader resigns with EndQuorumEpoch); restart later",
    "lagging-follower": "cut one follower off for 2.5-4.5 s, long enough for the leader to "
    "snapshot past it and delete the log it needs: back, it must install a snapshot (KIP-630)",
    "corrupt-snapshot": "a lagging follower that comes back through a link flipping a byte in a "
    "third of the FetchSnapshot chunks: its checks (CRC, header, footer, id) refuse each bad "
    "download and it asks again",
    "crash-after-vote": "a bridge partition {A,Y} | X | {B,Z} around the leader X, which "
    "restarts at once and then crashes right after each vote it grants, back within a few ms",
    "fsync-stall": "the disk of one node, the leader or a minority of voters stalls for 0.5-9 s: "
    "its log flushes and snapshot writes complete only once it ends; messages, reads and ticks "
    "go on",
    "membership": "voters in the log (KIP-853, kraft.version 1, bootstrap checkpoint), and all "
    "along the other faults: the leader is asked to add an observer (caught up or not) and to "
    "remove a voter (itself too), a removed node restarts as an observer, a disk is wiped (a new "
    "directory id)",
    "broker-isolate": "(with --brokers) cut one broker off from every other node for 1-9 s: past "
    "the controller's session timeout and the broker's own heartbeat timeout, or not",
    "broker-crash": "(with --brokers) kill a broker; it restarts later as a new incarnation",
    "broker-shutdown": "(with --brokers) controlled shutdown of a broker (it heartbeats wanting "
    "to shut down until the controller lets it go); it restarts later as a new incarnation",
    "broker-stale-registration": "(with --brokers) kill a broker, restart it (a new "
    "incarnation), then deliver its previous incarnation's registration to the leader: a late "
    "duplicate from the network",
}

NETWORK_FAULTS = ("drop", "delay", "delay-long", "duplicate", "reorder")

BROKER_FAULTS = ("broker-isolate", "broker-crash", "broker-shutdown", "broker-stale-registration")
"""Faults of the brokers (`kraft simulate --brokers N`): left out of a run without brokers, so that
such a run draws exactly the schedule it drew before brokers existed."""

ALONGSIDE = ("membership",)
"""Faults that run all along the run, beside the one-at-a-time faults, rather than taking turns
with them: voter changes mixed with every other fault."""


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class ActiveFault:
    """One started fault. Compared by identity only (`is`): two crashes of the same node are
    different faults."""

    name: str
    victims: tuple[int, ...] | None = None
    """The nodes a node fault stopped (restarted when it stops); None for the others."""
    stalled: tuple[int, ...] | None = None
    """The nodes whose disk `fsync-stall` stalls (running on: nothing restarts them)."""

    def __repr__(self) -> str:
        # The trace shows a fault as `['crash', [2, 4]]`, or `['drop']` without victims;
        # `['fsync-stall', [2, 4]]` names the stalled disks.
        shown: list[object] = [self.name]
        if self.victims is not None:
            shown.append(list(self.victims))
        if self.stalled is not None:
            shown.append(list(self.stalled))
        return repr(shown)


def parse_faults(text: str) -> tuple[str, ...]:
    """`all`, `none`, or a comma list of fault names. Raises ValueError listing the valid ones."""
    text = text.strip()
    if text == "all":
        return tuple(FAULTS)
    if text in ("none", ""):
        return ()
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise ValueError(
            f"unknown fault(s) {', '.join(unknown)}; valid: all, none, {', '.join(FAULTS)}"
        )
    return tuple(dict.fromkeys(names))
