"""How the simulator hosts each node: a `RaftCore` behind a simulated disk and network.

Theory of operation: a host is as thin as the server, and keeps only what a disk would hold: the
quorum state the core last asked to persist, the log from its start offset and how much of it is
flushed (`durable`), and the durable snapshots (the bytes of Kafka's `.checkpoint` files). A crash
rebuilds the core from exactly that (disk.py: the latest valid snapshot, KIP-630's start
validation); a snapshot whose write had not finished is lost with it. After every input the host
carries out the core's `Ready` in the order `Ready` documents (a flush or a snapshot write
completes later, as an event, after the node's disk latency), has the invariants the step may have
broken checked (`Evidence.after_ready`) and queues the tick the core asked for. Every start is a
new incarnation (`inc`): events queued for an older one are stale and dropped.

The faults that act on the hosts rather than on the links are the fault state's (fault_state.py:
`HostFaults`); what the invariants read off each carried-out step is the evidence's (evidence.py).
With KIP-853 on, the voters live in the log and every node has a directory id; with brokers, more
nodes are brokers (raft/lifecycle.py). Details (graceful shutdown, each step of a Ready, the
KIP-853 disk, brokers): docs/internals/simulator.md#host
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reference_node.raft.api import (
    LogFlushed,
    Ready,
    Receive,
    Send,
    Shutdown,
    SnapshotLoaded,
    SnapshotRefused,
    SnapshotWritten,
    Tick,
    VoterChangeReply,
)
from reference_node.raft.config import RaftConfig
from reference_node.raft.core import RaftCore
from reference_node.raft.image import Image
from reference_node.raft.messages import (
    BrokerHeartbeatRequest,
    FetchSnapshotResponse,
    SnapshotId,
    VoteResponse,
)
from reference_node.raft.states import NEVER
from reference_node.raft.voters import VoterSet
from reference_node.sim.brokers import BrokerWatch, identity, incarnation_at
from reference_node.sim.disk import (
    DiskSnapshots,
    SnapshotDir,
    SnapshotEncoder,
    SnapshotError,
    decode,
    recover,
)
from reference_node.sim.events import (
    DROPPED,
    AdminReply,
    ClientReplyDue,
    Deliver,
    Dropped,
    EventQueue,
    Flushed,
    PersistCrash,
    SnapshotDurable,
    SnapshotRefusal,
    TickDue,
)
from reference_node.sim.evidence import Evidence
from reference_node.sim.fault_state import HostFaults
from reference_node.sim.invariants import Invariants
from reference_node.sim.network import Network
from reference_node.sim.node import SimNode, endpoint, new_directory_id
from reference_node.sim.rpc import Rpc

CLUSTER_ID = "sim-cluster"

SHUTDOWN_TIMEOUT_MS = 5000
"""How long a graceful shutdown may last: Kafka's `KafkaRaftClientDriver` gives the raft client's
`shutdown` 5 s, and the node's `shutdown.timeout.ms` defaults to the same."""

BOOTSTRAP_CHECKPOINT = SnapshotId(0, 0)
"""Kafka's bootstrap checkpoint, `00000000000000000000-0000000000.checkpoint`."""


@dataclass(slots=True)
class SnapshotStats:
    """What the run did with snapshots, so that a report shows the feature was exercised."""

    written: int = 0
    """Snapshots a node wrote and saw durable."""
    installed: int = 0
    """Snapshots a follower downloaded and installed (its log reset at them)."""
    refused: int = 0
    """Downloads that failed the host's checks."""
    logs_invalid: int = 0
    """Starts where KIP-630's validation found no snapshot for the log start: refused with static
    voters (`refused_starts`), the log emptied under a new directory id with KIP-853's."""
    refused_starts: int = 0


class Cluster:
    """Every node's host, and the events that reach a node: deliveries, ticks, flushes."""

    def __init__(
        self,
        config: RaftConfig,
        voter_ids: list[int],
        node_ids: list[int],
        queue: EventQueue,
        net: Network,
        inv: Invariants,
        node_rng: random.Random,
        disk_rng: random.Random,
        membership_rng: random.Random | None = None,
        broker_ids: Sequence[int] = (),
        broker_rng: random.Random | None = None,
    ) -> None:
        """`node_ids`: every node, the brokers' (`broker_ids`, the last ones) included;
        `broker_rng` draws the brokers' incarnations."""
        self.config = config
        self.voter_ids = voter_ids
        self.node_ids = node_ids
        self.broker_ids = list(broker_ids)
        self.controller_ids = [n for n in node_ids if n not in self.broker_ids]
        """Every node but the brokers: the voters, the observers, the spares."""
        self.broker_rng = broker_rng if broker_rng is not None else random.Random(0)
        self.queue = queue
        self.net = net
        self.inv = inv
        self.node_rng = node_rng
        """Seeds each incarnation's core."""
        self.disk_rng = disk_rng
        self.request_ids = itertools.count(1)
        self.encoder = SnapshotEncoder()
        self.nodes = {n: SimNode(n, n in voter_ids, Rpc(self.request_ids),
                                 SnapshotDir(self.encoder), n in self.broker_ids)
                      for n in node_ids}
        # Disks differ: a leader on a slow disk is where unflushed-but-replicated data lives.
        self.disk_speed = {n: disk_rng.randrange(1, 30) for n in node_ids}
        self.faults = HostFaults(queue, self.nodes, self.disk_time)
        """What the active fault does to the hosts: stalled disks, paused processes, crashers."""
        self.stats = SnapshotStats()
        self.dynamic = membership_rng is not None
        """KIP-853: the voters are in the log (the `membership` fault is on)."""
        self.bootstrap_servers: dict[int, int] = {}
        """`controller.quorum.bootstrap.servers`: pseudo id -> the node it reaches."""
        self.brokers = (BrokerWatch(config, self.nodes, self.broker_ids, inv)
                        if self.broker_ids else None)
        """The broker invariants' watch (None without brokers)."""
        self.evidence = Evidence(inv, self.nodes, queue, VoterSet.of(voter_ids), self.dynamic,
                                 self.brokers)
        """What the invariants read off each carried-out step."""
        if membership_rng is not None:
            self._format_dynamic(membership_rng)

    def _format_dynamic(self, rng: random.Random) -> None:
        """`kraft node format --initial-controllers` on every node (the spares too: formatted as
        non-voters, they know the initial set): a directory id each, the bootstrap checkpoint."""
        for node in self.nodes.values():
            node.directory_id = new_directory_id(rng)
        initial = VoterSet(self.nodes[n].voter() for n in self.voter_ids)
        checkpoint = Image(voters=initial, kraft_version=1)
        for node in self.nodes.values():
            node.snapshots.write_image(BOOTSTRAP_CHECKPOINT, checkpoint.copy())
        self.bootstrap_servers = {-2 - i: n for i, n in enumerate(self.controller_ids)}

    # --- start and stop -------------------------------------------------------------------------

    def start(self, node: SimNode) -> None:
        """Start a new incarnation from what the disk holds (ending a shutdown under way)."""
        if node.core is not None:
            self._exit(node)
        held = node.log_start + len(node.saved_log)
        disk = recover(node.log_start, node.saved_log, node.snapshots)
        if any(note["type"] == "log-invalid" for note in disk.notes):
            self.stats.logs_invalid += 1
            if not self.dynamic:
                # Static voters: the node refuses to start (Kafka's recoverSnapshots), and stays
                # down with its disk as it was; emptied, its vote could lose a committed entry.
                self.stats.refused_starts += 1
                return
            # KIP-853: emptied, it is a new replica (a new directory id), in no voter set.
            self.evidence.wiped(node)
            node.directory_id = new_directory_id(self.node_rng)
        else:
            self.inv.kept_at_start(node.id, held, disk.start_offset + len(disk.entries))
        node.inc += 1
        for sid in disk.deleted:
            del node.snapshots[sid]
        self.inv.log_start(node.id, disk.start_offset, node.snapshots, "restart")
        broker: dict[str, Any] = {}
        if node.is_broker:
            node.incarnation = incarnation_at(self.queue.now, self.broker_rng)
            broker["broker"] = identity(node.id, node.incarnation)
        core = RaftCore(
            node.id, None if self.dynamic else self.voter_ids, CLUSTER_ID, self.config,
            random.Random(self.node_rng.getrandbits(64)), self.queue.now,
            node.qs, disk.entries, log_start_offset=disk.start_offset,
            log_start_epoch=disk.start_epoch, image=disk.image, snapshots=disk.snapshots,
            snapshot_store=DiskSnapshots(node.snapshots), directory_id=node.directory_id,
            bootstrap=tuple(self.bootstrap_servers), endpoints=(endpoint(node.id),), **broker,
        )
        if node.is_broker and self.brokers is not None:
            self.brokers.started(node)
        node.boot(core, Rpc(self.request_ids), disk.start_offset,
                  disk.start_offset + len(disk.entries))
        # A start's own Ready is no crash point of crash-after-persist: dying there would only
        # loop through restarts.
        faults = self.faults
        crasher, faults.persist_crasher = faults.persist_crasher, None
        self.carry_out(node)
        faults.persist_crasher = crasher

    def stop(self, node: SimNode, graceful: bool) -> None:
        """Crash (unflushed entries and unfinished snapshot writes are lost), or begin a graceful
        shutdown: the node stops serving at once, and its process exits once the core has said
        goodbye (`_exit`)."""
        core = node.core
        assert core is not None
        if not graceful:
            node.halt(list(core.log_view.read(node.log_start, node.durable)))
            return
        if node.held is not None:
            # The stop signal wakes a paused process; what waited comes after.
            self.faults.resume(node)
        node.alive = False
        node.stop_by = self.queue.now + SHUTDOWN_TIMEOUT_MS
        core.step(Shutdown(), now_ms=self.queue.now)
        self.carry_out(node)

    def _exit(self, node: SimNode) -> None:
        """The end of a graceful shutdown: the log is flushed and the process exits (a snapshot
        write still under way is abandoned, as a process exit abandons its temp file). On a
        stalled disk the last flush never completes: the exit loses what a crash would."""
        core = node.core
        assert core is not None
        if node.id not in self.faults.stalled:
            node.durable = core.log_view.end_offset
        node.halt(list(core.log_view.read(node.log_start, node.durable)))

    def wipe(self, node: SimNode, directory_id: uuid.UUID) -> None:
        """Crash `node` and re-format its disk empty with a new directory id
        (`--no-initial-controllers`: it learns the voters from the log or a snapshot); start it."""
        if node.core is not None:
            node.halt(list(node.core.log_view.read(node.log_start, node.durable)))
        self.evidence.wiped(node)
        node.wipe(SnapshotDir(self.encoder), directory_id)
        self.start(node)

    def leader_id(self) -> int | None:
        """The node leading the highest epoch, if any (a voter, but for a leader that removed
        itself and leads until that commits)."""
        best: tuple[int, int] | None = None
        for n in self.node_ids if self.dynamic else self.voter_ids:
            core = self.nodes[n].core
            if core is not None and core.is_leader and (best is None or core.epoch > best[0]):
                best = (core.epoch, n)
        return best[1] if best else None

    def current_voters(self) -> list[int]:
        """The voter ids as the leader of the highest epoch (or, with none, the running core of
        the highest epoch and longest log) has them: the static ones without KIP-853."""
        if not self.dynamic:
            return self.voter_ids
        best: tuple[bool, int, int] | None = None
        chosen: RaftCore | None = None
        for node in self.nodes.values():
            core = node.core
            if core is None:
                continue
            key = (core.is_leader, core.epoch, core.log_end_offset)
            if best is None or key > best:
                best, chosen = key, core
        if chosen is None:
            return self.voter_ids
        return [n for n in chosen.voters.sorted() if n in self.nodes] or self.voter_ids

    def is_voter_now(self, node: SimNode) -> bool:
        """Does `node` vote, as its own core (or, while it is down, its static role) says?"""
        if self.dynamic and node.core is not None:
            return node.core.is_voter
        return node.is_voter

    # --- events that reach a node ---------------------------------------------------------------

    def on_deliver(self, event: Deliver) -> SimNode | Dropped:
        node = self.nodes[event.dst]
        if node.core is None or node.inc != event.inc or not self.net.link_ok(event.src, event.dst):
            return DROPPED
        if node.hold(event):
            return DROPPED  # arrived: it waits in the paused process's socket buffer
        request = node.rpc.request_of(event.rid)
        if not node.rpc.admit(event.src, event.msg, event.rid):
            return DROPPED
        if node.is_broker and request is not None and self.brokers is not None:
            self.brokers.answered(node, request, event.msg)
        core = node.core
        assert core is not None
        message = event.msg
        if self.brokers is not None and type(message) is BrokerHeartbeatRequest:
            self.brokers.delivered(node, message, self.queue.now)
        # The invariants of behaviour (invariants.py, `Behaviour`) step the message into the core
        # themselves, to compare its public state before and after: one call per delivery.
        self.inv.behaviour.receive(node.id, node.directory_id, core,
                                   Receive(event.src, message, request), self.queue.now)
        return node

    def on_tick(self, event: TickDue) -> SimNode | Dropped:
        node = self.nodes[event.node]
        now = self.queue.now
        if node.core is None or node.inc != event.inc or node.tick_at != now:
            return DROPPED
        if node.held is not None:
            return DROPPED  # due while paused: `resume` fires it (tick_at stays as it is)
        node.tick_at = NEVER
        core = node.core
        assert core is not None
        core.step(Tick(now))
        return node

    def on_flushed(self, event: Flushed) -> SimNode | Dropped | None:
        node = self.nodes[event.node]
        if node.core is None or node.inc != event.inc:
            return None
        faults = self.faults
        if faults.stalled and faults.hold_completion(node, event):
            return DROPPED
        if node.hold(event):
            return DROPPED
        node.flushing = False
        node.durable = max(node.durable, node.flush_target)
        core = node.core
        assert core is not None
        if faults.persist_crasher is not None:
            faults.flushed_now = node
        core.step(LogFlushed(node.flush_target))
        if node.flush_again:
            node.flush_again = False
            self.request_flush(node)
        return node

    def on_snapshot_durable(self, event: SnapshotDurable) -> SimNode | Dropped:
        """A snapshot reached the disk: from now on a crash keeps it. (A write its incarnation
        did not live to finish never reached it: the crash lost it.)"""
        node = self.nodes[event.node]
        if node.core is None or node.inc != event.inc:
            return DROPPED
        faults = self.faults
        if faults.stalled and faults.hold_completion(node, event):
            return DROPPED
        if node.hold(event):
            return DROPPED
        if event.data is None:
            node.snapshots.write_image(event.snapshot_id, event.image)
            self.stats.written += 1
            node.core.step(SnapshotWritten(event.snapshot_id), now_ms=self.queue.now)
        else:
            node.snapshots[event.snapshot_id] = event.data
            # A copy: the core applies onto it, the invariants keep the original.
            node.core.step(SnapshotLoaded(event.snapshot_id, event.image.copy()),
                           now_ms=self.queue.now)
        return node

    def on_snapshot_refusal(self, event: SnapshotRefusal) -> SimNode | Dropped:
        node = self.nodes[event.node]
        if node.core is None or node.inc != event.inc or node.hold(event):
            return DROPPED
        self.stats.refused += 1
        node.core.step(SnapshotRefused(event.snapshot_id, event.reason), now_ms=self.queue.now)
        return node

    # --- carrying out a Ready -------------------------------------------------------------------

    def carry_out(self, node: SimNode) -> None:
        """Carry out the core's Ready as a disk and a network would, check the invariants
        (`Evidence`), and queue the tick the core asks for."""
        core = node.core
        assert core is not None
        ready = core.ready()
        if ready:
            if not self._carry_out(node, ready):
                return  # crashed between persisting and sending (crash-after-persist)
            core.advance(ready)
        else:
            self.faults.flushed_now = None  # a completed flush whose step asked for nothing
        self.evidence.after_ready(node, core, ready)
        deadline = core.next_deadline_ms()
        if node.stop_by != NEVER:
            if core.shutdown_complete or self.queue.now >= node.stop_by:
                self._exit(node)
                return
            deadline = min(deadline, node.stop_by)
        if deadline < node.tick_at:
            deadline = max(deadline, self.queue.now + 1)
            if deadline < node.tick_at:
                node.tick_at = deadline
                self.queue.push(deadline, TickDue(node.id, node.inc))

    def _carry_out(self, node: SimNode, ready: Ready) -> bool:
        """`ready`, in its order; False if the node crashed before its messages (it is down)."""
        inv = self.inv
        if ready.fatal is not None:
            inv.halted(node.id, ready.fatal)  # a node that stops on its own: a violation
        if ready.quorum_state is not None:
            node.qs = ready.quorum_state
        if ready.log_reset is not None:
            self._reset_log(node, ready.log_reset)
        if ready.truncate_to is not None:
            inv.truncated(node.id, ready.truncate_to, node.last_hw)
            node.durable = min(node.durable, ready.truncate_to)
            node.flush_target = min(node.flush_target, ready.truncate_to)
        if ready.flush:
            self.request_flush(node)
        if ready.snapshot_write is not None:
            sid, image = ready.snapshot_write.snapshot_id, ready.snapshot_write.image
            self.queue.push(self.disk_time(node),
                            SnapshotDurable(node.id, node.inc, sid, image, None))
        if ready.snapshot_received is not None:
            self._check_download(node, *ready.snapshot_received)
        if ready.delete_before is not None:
            # Segments below the snapshot go now; with `delete-before-snapshot` the snapshot is
            # not durable yet, and a crash before it is leaves a log no snapshot vouches for.
            sid = ready.delete_before
            if sid.end_offset > node.log_start:
                node.log_start = sid.end_offset
                inv.log_start(node.id, sid.end_offset, node.snapshots, "deleting the log below it")
            node.delete_snapshots_before(sid)
        crasher = self.faults.persist_crasher
        if crasher is not None and self.faults.crashes_after_persist(node, ready):
            self.stop(node, graceful=False)
            self.queue.push(self.queue.now, PersistCrash(crasher.fault, node.id, node.inc))
            return False
        if ready.messages:
            self._send(node, ready.messages)
        for reply in ready.replies:
            if type(reply) is VoterChangeReply:
                # The membership nemesis's (its own request ids): never a client's.
                self.queue.push(self.queue.now + 1, AdminReply(node.id, reply))
                continue
            client = node.pending.pop(reply.request_id, None)
            if client is not None:
                self.queue.push(self.net.reply_time(self.queue.now),
                                ClientReplyDue(client, reply, node.id))
        for ev in ready.events:
            if ev["type"] == "state" and ev["state"] == "leader":
                inv.leader(node.id, ev["epoch"])
            elif ev["type"] == "inconsistent-leader":
                inv.inconsistent_leader(node.id, ev)
        if self.brokers is not None and ready.events:
            self.brokers.on_events(node, ready.events, self.queue.now)
        return True

    def _reset_log(self, node: SimNode, sid: SnapshotId) -> None:
        """An installed snapshot: the log is empty from its end offset; older snapshots go."""
        self.stats.installed += 1
        node.log_start = sid.end_offset
        self.inv.log_start(node.id, sid.end_offset, node.snapshots, "installing a snapshot")
        node.durable = sid.end_offset
        node.flush_target = min(node.flush_target, sid.end_offset)
        node.delete_snapshots_before(sid)

    def _check_download(self, node: SimNode, sid: SnapshotId, data: bytes) -> None:
        """What a host does with a downloaded snapshot: decode it (CRC, header, footer, the id
        against the content); a good one is written durably, then loaded; a bad one refused."""
        try:
            image = decode(data, sid)
        except ValueError as exc:
            # The codec's contract is SnapshotError; any other ValueError is still bytes from the
            # network that are not a snapshot, which a host refuses rather than crash on.
            reason = str(exc) if isinstance(exc, SnapshotError) else f"{type(exc).__name__}: {exc}"
            self.queue.push(self.queue.now, SnapshotRefusal(node.id, node.inc, sid, reason))
            return
        self.inv.snapshot_seen(node.id, sid, image)
        self.queue.push(self.disk_time(node), SnapshotDurable(node.id, node.inc, sid, image, data))

    def _send(self, node: SimNode, sends: Sequence[Send]) -> None:
        nodes = self.nodes
        now = self.queue.now
        push = self.queue.push
        net = self.net
        delivery_times = net.delivery_times
        bootstrap = self.bootstrap_servers
        if node.is_broker and self.brokers is not None:
            for send in sends:
                self.brokers.sent(node, send.message, now)
        for send in sends:
            to = bootstrap.get(send.dst, send.dst) if bootstrap else send.dst
            dst = nodes.get(to)
            if dst is None:
                continue
            message = send.message
            rid = node.rpc.correlate(send.dst, message, send.in_reply_to)
            if net.corrupt_p and type(message) is FetchSnapshotResponse:
                bad = net.corrupted(message.data)
                if bad is not None:
                    message = dataclasses.replace(message, data=bad)
            times = delivery_times(now, node.id, to)
            if times and net.vote_delay is not None and type(message) is VoteResponse:
                times = net.vote_delayed(times)
            if times:
                event = Deliver(to, dst.inc, node.id, message, rid)
                for at_ms in times:
                    push(at_ms, event)
        if self.faults.vote_crasher is not None:
            self.faults.crash_if_voted(node, sends)

    def request_flush(self, node: SimNode) -> None:
        """Flush the log to its current end; one flush at a time, as on a real disk."""
        core = node.core
        assert core is not None
        if node.flushing:
            node.flush_again = True
            return
        node.flushing = True
        node.flush_target = core.log_view.end_offset
        self.queue.push(self.disk_time(node), Flushed(node.id, node.inc))

    def disk_time(self, node: SimNode) -> int:
        """When a write started now on `node`'s disk is durable."""
        base = self.disk_speed[node.id]
        return self.queue.now + base + self.disk_rng.randrange(base + 1)
