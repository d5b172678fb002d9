"""The faults the simulator injects: their names (the `--faults` vocabulary) and a started fault.

The nemesis (nemesis.py) starts one fault at a time, chosen from the nemesis random stream, and
stops it after a random duration; at the heal time every fault stops and every stopped node
restarts, and the liveness clock starts. `membership` is the exception (`ALONGSIDE`): it turns on
KIP-853's voters in the log, and its nemesis (membership.py) acts all along, beside whichever fault
is on. The `broker-*` faults (`BROKER_FAULTS`) act on the brokers of `--brokers N` and are left
out of a run without brokers (the nemesis then draws exactly what it drew before they existed);
with brokers, half of the turns go to them. `fsync-stall` acts on disks rather than on links or
processes: the hosts' fault state (fault_state.py) holds the stalled disks' completions until the
fault stops. `pause` and `leader-stall` stop processes without killing them (the fault state holds
what reaches them), `crash-after-persist` kills them at one precise point of a Ready,
`vote-delay` slows only the answers of elections. The targeted shapes
(`SHAPES`: zombie-rejoin, diverge, observer-lag, chain; sim/shapes.py) act in steps while they
last, watching the cluster for the leader changes they wait for. By default every fault is drawn
alike; `--faults crash:3,drop` weighs the draws, and `heavy` (`MIXES`) is every fault with
partitions and crashes drawn more often (`parse_fault_mix`). A started fault is an `ActiveFault`
object whose identity ties the events it queued (its stop, a vote crash) to it: an event for an earlier
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
    "crash-after-vote": "a bridge partition {A,Y} | X | {B,Z} around the leader X (slow paths "
    "from A's side to X and from X to B's side), which restarts at once and then crashes right "
    "after each vote it grants, back within a few ms",
    "fsync-stall": "the disk of one node, the leader or a minority of voters stalls for 0.5-9 s: "
    "its log flushes and snapshot writes complete only once it ends; messages, reads and ticks "
    "go on",
    "zombie-rejoin": "cut the leader off with clients still reaching it (alone, or with one "
    "follower in 5 or more voters) until the others elect and commit; then heal and kill the new "
    "leader: the old one, a longer log of an older last epoch, rejoins and campaigns",
    "diverge": "cut the leader off with one follower, which takes its uncommitted appends; once "
    "the others commit under a new leader, cut that follower off alone while the leader is killed "
    "again and again (2-3 leader changes with appends); back, it truncates across epochs",
    "observer-lag": "cut an observer off (a broker, a node the membership nemesis added; with none "
    "a follower) while the leader is killed once or twice, then let it back",
    "chain": "fault changes with no heal between them: a partition, then (while it holds) the new "
    "leader killed, or a different partition; the victims restart at the stop",
    "pause": "pause the process (SIGSTOP) of the leader, a random node or a minority for 1-2 s, "
    "less than the request timeout: it keeps its memory, its timers wait, what reaches it waits "
    "and is handled in order once it resumes, its clock jumped",
    "leader-stall": "pause the leader just past the fetch timeout (+0-600 ms): it resumes as a "
    "deposed leader, its late answers and the new epoch's requests waiting for it (KIP-595)",
    "crash-after-persist": "the leader or a random node crashes right after persisting a Ready "
    "(a vote, an epoch, a completed flush) and before sending its messages; back within 1 s",
    "vote-delay": "the leader crashes and restarts at once, and every Vote and pre-vote answer "
    "takes 1-3.5 s, past its candidate's next election: late grants of older rounds",
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

SHAPES = ("zombie-rejoin", "diverge", "observer-lag", "chain")
"""The targeted shapes (sim/shapes.py): faults that act in steps, watching the cluster, to reach
the rare states where the core decides."""

MIXES: dict[str, dict[str, int]] = {
    "heavy": {
        **{name: 1 for name in FAULTS},
        "partition-halves": 3, "partition-isolate": 3, "partition-leader": 3,
        "partition-ring": 2, "partition-bridge": 2, "crash": 4, "shutdown": 2,
        "zombie-rejoin": 2, "diverge": 2, "chain": 3,
    },
}
"""Named weighted mixes for `--faults`: `heavy` is every fault, partitions and crashes (and the
shapes built from them) drawn several times as often as the network faults."""

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
    """`all`, `none`, or a comma list of fault names (weights allowed, and ignored: see
    `parse_fault_mix`). Raises ValueError listing the valid ones."""
    return parse_fault_mix(text)[0]


Weights = tuple[tuple[str, int], ...]
"""The faults whose draws weigh other than 1, with their weights; empty: every fault alike."""


def parse_fault_mix(text: str) -> tuple[tuple[str, ...], Weights]:
    """The faults of `--faults` and their weights: `all`, `none`, a mix of `MIXES` (`heavy`), or a
    comma list whose items are fault names with an optional `:weight` (a positive integer; 1 when
    left out), `all` or a mix: `crash:3,partition-halves:3,drop`, `all,crash:4`. A later item's
    weight replaces an earlier one's. Raises ValueError naming the bad item and the valid names."""
    text = text.strip()
    if text in ("none", ""):
        return (), ()
    weights: dict[str, int] = {}
    unknown: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item == "all":
            weights.update({name: weights.get(name, 1) for name in FAULTS})
            continue
        if item in MIXES:
            weights.update(MIXES[item])
            continue
        name, _, weight_text = item.partition(":")
        name = name.strip()
        if name not in FAULTS:
            unknown.append(name)
            continue
        weights[name] = _weight(item, weight_text.strip()) if weight_text else 1
    if unknown:
        raise ValueError(f"unknown fault(s) {', '.join(unknown)}; valid: all, none, "
                         f"{', '.join(MIXES)}, {', '.join(FAULTS)}")
    names = tuple(weights)
    return names, tuple((name, w) for name, w in weights.items() if w != 1)


def _weight(item: str, text: str) -> int:
    try:
        weight = int(text)
    except ValueError:
        weight = 0
    if weight < 1:
        raise ValueError(f"bad fault weight {item!r}: want name:N with N a positive integer")
    return weight
