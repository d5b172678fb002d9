"""A Hypothesis state machine over three voter cores and an observer (testkit/raft_cluster.py).

Theory of operation: Hypothesis writes a program of rules (deliver one message in flight or all of
them; let time pass and tick a node, by some milliseconds or to its next deadline; complete a
node's flush; let the network, and maybe the disks, settle; a fault: drop or duplicate a message,
crash a node; restart a node; append from a client) and runs it against an in-memory cluster whose
hosts carry out every `Ready` as its docstring says, so that a crash loses exactly what a real
disk would. After every rule the invariants below are checked against everything seen so far in
the run; a broken one raises the simulator's `Violation`, and Hypothesis shrinks the program to a
short one that still breaks it. The `settle` rule is what lets short programs reach deep states (an
election, a commit, a new epoch) often enough for the faults in between to matter.

The invariants are the simulator's (`reference_node.sim.invariants.Invariants`, with its own
models of the committed state, sim/oracle.py), fed what the hosts show: one copy of each rule.

| invariant | holds when |
| --- | --- |
| SingleLeader | no two nodes ever lead the same epoch |
| MonotonicEpoch | a node's epoch never goes down, across restarts too |
| MonotonicHighWatermark | while a node runs, its high watermark never goes down |
| ConsistentCommittedData | below its high watermark, every node holds the entries any node committed there (looked at again after every rule, not only as the high watermark moves), and its image is the committed log's fold |
| NoAckedAppendLost | an acknowledged append is committed at its offset; and every leader of the acknowledging epoch or a later one holds it (the machine's own check: its programs are too short for the simulator's, an overwrite that commits) |
| OnlyVotersCampaign | the observer is never prospective, candidate or leader (the machine's own: the simulator judges the harm at the end of a run, ObserversFollow) |

The other tests run the same machine with unsafe switches that break one of them, to show that
the machine finds real defects rather than passing for want of trying.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from reference_node.raft.api import AppendReply, Ready
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.messages import ErrorCode
from reference_node.sim.invariants import Invariants, Violation
from testkit.raft_cluster import Cluster

VOTERS = (1, 2, 3)
OBSERVERS = (4,)
PICK = st.integers(min_value=0, max_value=255)
"""Which of the eligible messages or nodes a rule acts on (modulo their number; shrinks to 0)."""
ELAPSED_MS = st.sampled_from((0, 1, 20, 100, 500, 1000, 2000, 3000))
"""Around the core's timers: retry backoff, fetch wait, election, fetch and check-quorum timeouts."""
SETTLE_ROUNDS = 10
CAMPAIGNING = frozenset({"prospective", "candidate", "leader"})


class Fault(enum.Enum):
    DROP = "drop"
    DUPLICATE = "duplicate"
    CRASH = "crash"


@dataclass(frozen=True, slots=True)
class Ack:
    """An append the leader of `epoch` acknowledged: `payload` committed at `offset`."""

    offset: int
    epoch: int
    payload: bytes


class RaftMachine(RuleBasedStateMachine):
    config = RaftConfig()

    def __init__(self) -> None:
        super().__init__()
        self.inv = Invariants()
        self.acks: list[Ack] = []
        self.acks_checked = 0
        """How many of `acks` the invariants were told of."""
        self.requests: dict[int, tuple[bytes, ...]] = {}
        self.epochs: dict[int, int] = {}
        self.high_watermarks: dict[tuple[int, int], int] = {}
        self.next_payload = 0
        self.cluster = Cluster(VOTERS, OBSERVERS, self.config, on_ready=self.observe)

    # --- what the hosts report ------------------------------------------------------------------

    def observe(self, node: int, ready: Ready) -> None:
        """Every state a node passes through (even within one step) and every acknowledgement."""
        for event in ready.events:
            if event["type"] == "state":
                self.entered(node, event["state"], event["epoch"])
        for reply in ready.replies:
            if isinstance(reply, AppendReply) and reply.error == ErrorCode.none:
                payloads = self.requests[reply.request_id]
                self.acks.extend(Ack(offset, reply.leader_epoch, payload)
                                 for offset, payload in zip(reply.offsets, payloads, strict=True))

    def entered(self, node: int, state: str, epoch: int) -> None:
        if node in OBSERVERS and state in CAMPAIGNING:
            raise Violation("OnlyVotersCampaign",
                            f"observer {node} became {state} in epoch {epoch}")
        if state == "leader":
            self.inv.leader(node, epoch)

    # --- choosing among what is eligible --------------------------------------------------------

    def up(self) -> list[int]:
        return [n for n, host in self.cluster.hosts.items() if host.up]

    def leaders_first(self) -> list[int]:
        """The running nodes, leaders first: the choice a shrunk program makes (0) is the one a
        client that found the leader makes."""
        return sorted(self.up(), key=lambda n: not self.cluster.core(n).is_leader)

    def down(self) -> list[int]:
        return [n for n, host in self.cluster.hosts.items() if not host.up]

    def flush_due(self) -> list[int]:
        return [n for n, host in self.cluster.hosts.items() if host.up and host.disk.flush_due]

    # --- rules ----------------------------------------------------------------------------------

    @precondition(lambda self: self.cluster.in_flight)
    @rule(pick=PICK)
    def deliver(self, pick: int) -> None:
        self.cluster.deliver(pick % len(self.cluster.in_flight))

    @precondition(lambda self: self.cluster.in_flight)
    @rule()
    def deliver_all(self) -> None:
        """Everything now on the wire arrives, oldest first (a healthy network's round)."""
        for _ in range(len(self.cluster.in_flight)):
            self.cluster.deliver(0)

    @precondition(lambda self: self.up())
    @rule(pick=PICK, elapsed=ELAPSED_MS)
    def tick(self, pick: int, elapsed: int) -> None:
        up = self.up()
        self.cluster.tick(up[pick % len(up)], elapsed)

    @precondition(lambda self: self.up())
    @rule(pick=PICK)
    def tick_at_deadline(self, pick: int) -> None:
        """Time passes until the node's next timer, as a host's event loop would wake it."""
        up = self.up()
        node = up[pick % len(up)]
        deadline = self.cluster.core(node).next_deadline_ms()
        self.cluster.tick(node, max(0, deadline - self.cluster.now))

    @precondition(lambda self: self.cluster.in_flight or self.flush_due())
    @rule(flush=st.booleans())
    def settle(self, flush: bool) -> None:
        """The network catches up, and the disks too when `flush`: round after round, flushes
        complete and every message in flight arrives, until nothing is left to do (or a round
        limit, as fetches may go on)."""
        for _ in range(SETTLE_ROUNDS):
            due = self.flush_due() if flush else []
            if not self.cluster.in_flight and not due:
                return
            for node in due:
                self.cluster.flush(node)
            for _ in range(len(self.cluster.in_flight)):
                self.cluster.deliver(0)

    @precondition(lambda self: self.flush_due())
    @rule(pick=PICK)
    def flush(self, pick: int) -> None:
        due = self.flush_due()
        self.cluster.flush(due[pick % len(due)])

    @rule(fault=st.sampled_from(Fault), pick=PICK)
    def fault(self, fault: Fault, pick: int) -> None:
        """One rule for every fault, so that faults are as frequent as any one healthy step."""
        cluster = self.cluster
        if fault is Fault.CRASH and self.up():
            up = self.up()
            cluster.crash(up[pick % len(up)])
        elif fault is Fault.DROP and cluster.in_flight:
            cluster.drop(pick % len(cluster.in_flight))
        elif fault is Fault.DUPLICATE and cluster.in_flight:
            cluster.duplicate(pick % len(cluster.in_flight))

    @precondition(lambda self: self.down())
    @rule(pick=PICK)
    def restart(self, pick: int) -> None:
        down = self.down()
        self.cluster.start(down[pick % len(down)])

    @precondition(lambda self: self.up())
    @rule(pick=PICK)
    def append(self, pick: int) -> None:
        up = self.leaders_first()
        self.next_payload += 1
        payloads = (str(self.next_payload).encode(),)
        self.requests[self.cluster.append(up[pick % len(up)], payloads)] = payloads

    # --- invariants -----------------------------------------------------------------------------

    @invariant()
    def invariants_hold(self) -> None:
        """After every rule, in this order: each running node's epoch and high watermark (and
        what it holds below it), then the appends acknowledged since the last rule (committed by
        then: the leader that acknowledged them is still up, its high watermark past them)."""
        inv = self.inv
        for node in self.up():
            core = self.cluster.core(node)
            before = self.epochs.get(node, 0)
            inv.epoch(node, before, core.epoch)
            self.epochs[node] = core.epoch
            key = (node, self.cluster.hosts[node].incarnation)
            low, hw = self.high_watermarks.get(key, 0), core.high_watermark
            log = core.log_view
            inv.high_watermark(node, low, hw, log.get, log.start_offset, core.image)
            inv.holds_committed(node, log.start_offset, low, hw, log.get)
            self.high_watermarks[key] = hw
        for ack in self.acks[self.acks_checked :]:
            inv.acknowledged(ack.offset, ack.payload)
        self.acks_checked = len(self.acks)
        self.leaders_hold_acknowledged()

    def leaders_hold_acknowledged(self) -> None:
        """NoAckedAppendLost on the leaders' logs: a leader that lacks an acknowledged entry would
        overwrite it (Raft's Leader Completeness)."""
        cores = {n: self.cluster.core(n) for n in self.up()}
        leaders = {n: core for n, core in cores.items() if core.is_leader}
        for ack in self.acks:
            for node, leader in leaders.items():
                if leader.epoch < ack.epoch:
                    continue  # an older leader that has not heard of the newer epoch yet
                entry = leader.log_view.get(ack.offset)
                if entry is None or entry.payload != ack.payload:
                    raise Violation("NoAckedAppendLost",
                                    f"{ack.payload!r} was acknowledged at {ack.offset} in epoch "
                                    f"{ack.epoch}; leader {node} of epoch {leader.epoch} holds "
                                    f"{entry}")


def machine_settings(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        stateful_step_count=60,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def test_invariants_hold_under_random_messages_ticks_and_crashes() -> None:
    run_state_machine_as_test(RaftMachine, settings=machine_settings(400))


def find_defect(switch: Unsafe, max_examples: int) -> None:
    """Run the machine with `switch` on until it breaks an invariant; fail if it never does."""

    class WithSwitch(RaftMachine):
        config = RaftConfig(unsafe=frozenset({switch}))

    # Generation only: the test needs a violation, not its shortest form.
    search = settings(machine_settings(max_examples), phases=[Phase.generate],
                      report_multiple_bugs=False)
    with pytest.raises(Violation):
        run_state_machine_as_test(WithSwitch, settings=search)


@pytest.mark.parametrize("switch", [Unsafe.NO_LOG_CHECK, Unsafe.OBSERVER_CAMPAIGN],
                         ids=lambda switch: switch.value)
def test_the_machine_finds_a_defect(switch: Unsafe) -> None:
    """no-log-check grants votes without comparing logs (KIP-595 Vote handling, step 4.2), so a
    voter that missed an acknowledged append can be elected and overwrite it; observer-campaign
    lets the observer campaign. Over random seeds this machine finds the first after 30 to 700
    examples (about 100 typically), the second within a handful: the limit leaves room."""
    find_defect(switch, 3000)


@pytest.mark.slow
def test_the_machine_finds_a_deeper_defect() -> None:
    """skip-flush commits entries that a crash of a majority loses: a longer program, found after
    about 400-900 examples. (resume-leader-after-restart, a leader that lost unflushed entries
    leading on, is also within this machine's reach, but only after 2,000 to more than 8,000
    examples, minutes of search: the simulator finds it at seed 3, tests/raft/test_raft_simulation.)"""
    find_defect(Unsafe.SKIP_FLUSH, 8000)
