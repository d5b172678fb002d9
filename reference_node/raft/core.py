"""`RaftCore`: the host-facing KIP-595 state machine (no I/O, no clock, no global random).

A host builds it from what it loaded from disk, then loops:

    core.step(input)            # Tick, Receive, ClientAppend, ClientRead, LogFlushed, Shutdown
    ready = core.ready()        # carry it out in the order written on `Ready`
    core.advance(ready)
    ... wake up at core.next_deadline_ms() and step Tick(now) ...

This module holds the shared rules, the transitions and the timers. Every message passes through
`on_message` first, as every message passes through etcd's `Step`: a request is refused in Kafka's
order (cluster id, its own header, a stale epoch, a voter-only request's voter set) before any
handler sees it, and a response that names a newer epoch or a leader we did not know moves the core
there before its handler runs. `election` holds Vote / BeginQuorumEpoch / EndQuorumEpoch handling
and `replication` Fetch, the high watermark and client requests; both see the core only as the
`CoreOps` Protocol (ops.py). The broker messages are routed before the shared rules (how, and
the combined roles: docs/internals/raft.md#core).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from reference_node.raft import controller, election, membership, replication
from reference_node.raft import snapshots as snapshotting
from reference_node.raft.api import (
    TRUNCATION_BELOW_HIGH_WATERMARK,
    AddVoter,
    AppendReply,
    ClientAppend,
    ClientRead,
    ClientReply,
    Fatal,
    Input,
    LogFlushed,
    QuorumDescription,
    QuorumState,
    ReadReply,
    Ready,
    Receive,
    RemoveVoter,
    ReplicaDescription,
    Send,
    Shutdown,
    SnapshotLoaded,
    SnapshotRefused,
    SnapshotStore,
    SnapshotWrite,
    SnapshotWritten,
    Tick,
    VoterChangeReply,
)
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.image import Image
from reference_node.raft.lifecycle import BrokerIdentity, BrokerLifecycle, BrokerStatus
from reference_node.raft.log import LogView, RaftLog
from reference_node.raft.messages import (
    NO_LEADER,
    ApiVersionsRequest,
    ApiVersionsResponse,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    BrokerRequest,
    BrokerResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChange,
    Message,
    Request,
    Response,
    SnapshotId,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
    error_response,
)
from reference_node.raft.records import BrokerInfo
from reference_node.raft.states import (
    NEVER,
    OBSERVER_SESSION_TIMEOUT_MS,
    Candidate,
    Follower,
    Leader,
    Prospective,
    ReplicaProgress,
    Resigned,
    State,
    Unattached,
)
from reference_node.raft.voters import (
    SUPPORTED_KRAFT_VERSIONS,
    Voter,
    VoterEndpoint,
    VoterHistory,
    VoterSet,
)

__all__ = [
    "AddVoter",
    "AppendReply",
    "BrokerIdentity",
    "BrokerInfo",
    "BrokerStatus",
    "ClientAppend",
    "ClientRead",
    "ErrorCode",
    "Input",
    "LogFlushed",
    "QuorumDescription",
    "QuorumState",
    "RaftCore",
    "ReadReply",
    "Ready",
    "Receive",
    "RemoveVoter",
    "Send",
    "Shutdown",
    "SnapshotLoaded",
    "SnapshotRefused",
    "SnapshotWritten",
    "Tick",
    "VoterChangeReply",
]

_BACKOFF_BASE_MS = 100
"""Kafka's RETRY_BACKOFF_BASE_MS: the unit of a lost candidacy's random backoff."""

MAX_EPOCH = 2**31 - 2
"""The highest epoch a node holds. Epochs are int32 on the wire and in the log, and a candidacy
runs in the epoch after the current one: a node that adopted 2**31 - 1 (from a forged Vote, say)
could never campaign again, and its next Vote would not even encode. So a request naming a higher
epoch is refused (`_refusal`), and a node at MAX_EPOCH does not campaign. Kafka has no such bound:
its `epoch + 1` would wrap to a negative epoch."""


class RaftCore:
    """One node's Raft: construct from persisted state, then `step` / `ready` / `advance`.

    From disk: the quorum state, the log (from `log_start_offset`, just after an entry of
    `log_start_epoch`), and KIP-630's snapshots: `snapshots` the durable, valid snapshot ids
    (ascending), `image` the state machine decoded from the latest one (None: the empty image,
    for a log that starts at 0), `snapshot_store` to read them from when a follower fetches one.
    The log start is 0 or a snapshot's end offset; the image ends within the log.

    Voters (KIP-853): `voters` is the static set (`controller.quorum.voters`, kraft.version 0), or
    None when there is none; the image's voter set (a snapshot's, or a bootstrap checkpoint's) and
    the VotersRecords of the log take its place (`VoterHistory`). `directory_id` is this replica's;
    `bootstrap` are ids (negative, as Kafka numbers its bootstrap servers from -2) the host maps to
    `controller.quorum.bootstrap.servers`: an observer that knows no leader fetches from one.
    `endpoints` are where this replica is reached, as it would name itself in a VotersRecord (its
    advertised controller listeners; none: it never announces itself), and `kraft_versions` the
    `kraft.version` levels it supports: a voter whose entry in the voter set says otherwise sends
    the leader UpdateRaftVoter (Kafka's pollFollowerAsVoter), a leader writes the entry anew at
    the start of its epoch.

    Brokers: `broker` makes this node a broker (it registers with the active controller and
    heartbeats it, lifecycle.py): an observer, or a voter with combined roles.
    """

    def __init__(
        self,
        node_id: int,
        voters: VoterSet | Iterable[int] | None,
        cluster_id: str | None,
        config: RaftConfig,
        rng: random.Random,
        now_ms: int,
        quorum_state: QuorumState | None = None,
        log: Sequence[Entry] = (),
        log_start_offset: int = 0,
        log_start_epoch: int = 0,
        image: Image | None = None,
        snapshots: Sequence[SnapshotId] = (),
        snapshot_store: SnapshotStore | None = None,
        directory_id: uuid.UUID | None = None,
        bootstrap: Sequence[int] = (),
        broker: BrokerIdentity | None = None,
        endpoints: Sequence[VoterEndpoint] = (),
        kraft_versions: tuple[int, int] = SUPPORTED_KRAFT_VERSIONS,
    ) -> None:
        self.node_id = node_id
        self.directory_id = directory_id
        self.bootstrap = tuple(bootstrap)
        self.endpoints = tuple(endpoints)
        self.kraft_versions = kraft_versions
        if voters is None:
            self.static_voters = VoterSet()
        else:
            self.static_voters = voters if isinstance(voters, VoterSet) else VoterSet.of(voters)
        self.cluster_id = cluster_id
        self.config = config
        self.rng = rng
        self.now = now_ms
        self.log = RaftLog(log, log_start_offset, log_start_epoch)
        self.image = image if image is not None else Image()
        _check_image(self.image, self.log)
        self.snapshot_store = snapshot_store
        self.snapshot_state = snapshotting.initial_state(self.log, self.image, list(snapshots),
                                                      now_ms)
        self.hw = max(log_start_offset, self.image.end_offset)
        self.voter_history = _voter_history(self.static_voters, self.image, self.log)
        self.shutting_down = False
        self.halted: Fatal | None = None
        """Set once the core cannot go on (`Ready.fatal`): it steps no input any more."""
        self._out = Ready()
        qs = quorum_state or QuorumState()
        self.epoch = qs.leader_epoch
        self.leader_id: int | None = qs.leader_id
        self.voted_id: int | None = qs.voted_id
        self.state: State = Unattached()
        self.broker_lifecycle: BrokerLifecycle | None = None
        self._handling: tuple[int, Message] | None = None
        """The message `on_message` is handling, and its sender (for the events it causes)."""
        self._loopback: list[tuple[Message, Message | None]] = []
        """Broker messages between this node's broker and its own active controller (combined
        roles, the node leading): delivered at the end of the step, never sent."""
        if broker is not None:
            self.broker_lifecycle = BrokerLifecycle(broker)
        self._initialize()
        self._poll_broker()

    # --- construction -------------------------------------------------------------------------

    def _initialize(self) -> None:
        if self.log.last_epoch > self.epoch:
            # The quorum-state file lags the log (e.g. lost on a crash): never go below the log.
            self.epoch, self.leader_id, self.voted_id = self.log.last_epoch, None, None
            self.persist()
        if self.leader_id == self.node_id and self.is_voter:
            if self.config.has(Unsafe.RESUME_LEADER_AFTER_RESTART):
                self._become_leader(restart=True)
            else:
                # Kafka's pollResigned tells the voters at once, in its first poll: a follower
                # still fetching from this node hears that the epoch is over (and starts its
                # election after the backoff a successor not listed waits) rather than after
                # its fetch timeout.
                self._set_state(self._new_resigned(()))
                election.send_end_quorum(self)
        elif self.leader_id is not None and self.leader_id != self.node_id:
            self._set_state(Follower(fetch_deadline=self.now + self.config.fetch_timeout_ms))
        elif self.voted_id == self.node_id and self.is_voter:
            cand = Candidate(election_deadline=self.now + self.random_election_timeout())
            cand.granted.add(self.node_id)
            self._set_state(cand)
            election.request_votes(self, pre_vote=False)
        else:
            self._set_state(self._new_unattached())
        replication.maybe_fetch(self)

    # --- voters (KIP-853) -----------------------------------------------------------------------

    @property
    def voters(self) -> VoterSet:
        """The voter set in effect: the latest in the log, committed or not."""
        return self.voter_history.latest()

    @property
    def is_voter(self) -> bool:
        return self.voter_history.latest().is_voter(self.node_id, self.directory_id)

    @property
    def local_voter(self) -> Voter | None:
        """This replica as it would name itself in a VotersRecord (Kafka's localVoterNode), or
        None when it has no endpoints or no directory id to name itself with."""
        if not self.endpoints or self.directory_id is None:
            return None
        return Voter(self.node_id, self.directory_id, self.endpoints, self.kraft_versions)

    @property
    def kraft_version(self) -> int:
        return self.voter_history.kraft_version

    def _note_voter_entries(self, entries: Sequence[Entry]) -> None:
        """Appended entries: a VotersRecord takes effect now, before it commits (KIP-853)."""
        was_voter, before = self.is_voter, self.voters
        self.voter_history.add_entries(entries)
        if self.voters != before:
            self._voters_changed(was_voter)

    def reset_voters(self, image: Image) -> None:
        """A snapshot was installed: its voter set (or the static one) is the set in effect."""
        was_voter, before = self.is_voter, self.voters
        base = image.voters if image.voters is not None else self.static_voters
        self.voter_history.reset(base, image.kraft_version)
        if self.voters != before:
            self._voters_changed(was_voter)

    def _voters_changed(self, was_voter: bool) -> None:
        """The set in effect changed (appended, truncated away, installed): the leader tracks and
        tells its new voters; a replica that joined or left the set changes role."""
        voters = self.voters
        self._out.voters = voters
        self.event(type="voters", epoch=self.epoch, voters=voters.sorted(),
                   offset=self.voter_history.latest_offset(), end_offset=self.log.end_offset)
        state = self.state
        if isinstance(state, Leader):
            for v in voters.ids:
                if v != self.node_id:
                    replication.replica_progress(state, v)
            # Fetches counted toward the old set's majority prove nothing of the new one's. A new
            # voter hears from the heartbeat if it does not fetch (it has, as an observer).
            state.fetched_since_check = {self.node_id}
            replication.wake_parked(self)  # the followers hear of the new set at once
            return
        if was_voter == self.is_voter:
            return
        if self.is_voter:
            # Promoted: it campaigns from now on when it hears from no leader.
            if isinstance(state, Unattached):
                state.election_deadline = self.now + self.random_election_timeout()
            self._state_event(state.name)
            return
        # Removed: an observer from now on; a round it had open cannot count.
        if isinstance(state, Prospective | Candidate):
            self.become_unattached(self.epoch)
            return
        if isinstance(state, Unattached):
            state.election_deadline = NEVER
            replication.maybe_fetch(self)
        self._state_event("observer" if isinstance(state, Unattached | Follower) else state.name)

    # --- host API -----------------------------------------------------------------------------

    def step(self, inp: Input, now_ms: int | None = None) -> None:
        """Feed one input. Cheap; the output accumulates until `ready()`.

        `now_ms`, when given, is the host's clock as the input arrives: the core's clock moves
        there first (never backwards), so handlers see the time without a `Tick`'s timer work.
        """
        handler = _INPUTS.get(type(inp))
        if handler is None:
            raise TypeError(f"RaftCore.step: not an input: {inp!r}")
        if self.halted is not None:
            return  # the host is stopping the node (Ready.fatal): nothing more may happen
        if now_ms is not None and now_ms > self.now:
            self.now = now_ms
        handler(self, inp)
        if self.halted is None:
            self._poll_broker()

    def _poll_broker(self) -> None:
        """A broker sends what is due (a leader found, an answer, a timer). With combined roles
        on the leader, its requests and the answers reach it here, as messages would."""
        lifecycle = self.broker_lifecycle
        if lifecycle is None:
            return
        lifecycle.poll(self)
        while self._loopback:
            message, in_reply_to = self._loopback.pop(0)
            self.on_message(self.node_id, message, in_reply_to)
            lifecycle.poll(self)

    def ready(self) -> Ready:
        """What the host must do now (see `Ready` for the order)."""
        return self._out

    def has_ready(self) -> bool:
        return bool(self._out)

    def advance(self, ready: Ready) -> None:
        """The host carried out `ready`."""
        if ready is not self._out:
            raise ValueError("advance() takes the Ready that ready() returned, once")
        self._out = Ready()

    def next_deadline_ms(self) -> int:
        """The time at which the core next wants a Tick (it may be in the past: tick at once)."""
        if self.shutdown_complete or self.halted is not None:
            return NEVER  # nothing is left to say: a timer would only spin
        deadline = min(self.state.deadline(self.now, self.config.request_timeout_ms),
                       snapshotting.deadline(self), controller.leader_deadline(self))
        if self.broker_lifecycle is not None:
            deadline = min(deadline, self.broker_lifecycle.deadline(self))
        return deadline

    @property
    def shutdown_complete(self) -> bool:
        """After `Shutdown`: True once the node may go, as Kafka's `maybeCompleteShutdown` decides:
        it is an observer or the only voter, or it knows a leader other than itself.

        Until then it stays, and what it still does is what the next election needs: a resigned
        leader resends EndQuorumEpoch to each voter that has not answered, and votes. Its vote
        often decides the election: in three voters, the successor needs one more grant, and
        the other voter refuses pre-votes while it heard from the old leader within the fetch
        timeout (KIP-996). Leaving once every voter had answered cost a failover up to the fetch
        timeout whenever the successor's pre-vote came after the exit (bench/bench_failover.py).
        A candidate finishes its election (`on_shutdown`). The host bounds the wait with its own
        shutdown timeout: with no leader coming (its peers down or stopping too), it waits it out.

        A broker waits, besides, for its controlled shutdown: the controller's should_shut_down.
        """
        if not self.shutting_down:
            return False
        if self.broker_lifecycle is not None and self.broker_lifecycle.state != "stopped":
            return False
        if not self.is_voter or self.voters.ids == {self.node_id}:
            return True
        return self.leader_id is not None and self.leader_id != self.node_id

    # --- read-only views ------------------------------------------------------------------------

    @property
    def log_view(self) -> LogView:
        """The log as hosts may see it: read-only (the host's own copy is on disk)."""
        return self.log

    @property
    def state_name(self) -> str:
        return self.state.name

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, Leader)

    @property
    def high_watermark(self) -> int:
        return self.hw

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    @property
    def snapshot_ids(self) -> tuple[SnapshotId, ...]:
        """The durable snapshots the core counts (serves, retains by), ascending."""
        return tuple(self.snapshot_state.durable)

    @property
    def last_epoch(self) -> int:
        return self.log.last_epoch

    def quorum_state(self) -> QuorumState:
        return QuorumState(self.epoch, self.leader_id, self.voted_id)

    def broker_status(self) -> BrokerStatus | None:
        """This broker's own view of itself (None: the node is not a broker)."""
        lifecycle = self.broker_lifecycle
        return lifecycle.status(self) if lifecycle is not None else None

    def brokers_view(self) -> dict[int, BrokerInfo]:
        """The registered brokers as this node's image has them (committed records only)."""
        return dict(self.image.brokers)

    def describe_quorum(self) -> QuorumDescription:
        """DescribeQuorum: per-replica progress is the leader's (others report only themselves)."""
        state = self.state
        hw = self.hw
        rows: dict[int, ReplicaDescription] = {}
        if isinstance(state, Leader):
            for rid, prog in state.progress.items():
                if rid not in self.voters and _observer_expired(prog, self.now):
                    continue
                rows[rid] = ReplicaDescription(
                    rid, prog.end_offset, prog.last_fetch_ms, prog.last_caught_up_ms,
                    prog.directory_id,
                )
            # The leader's own end offset is what it has flushed, as Kafka's LeaderState counts
            # it (the same offset the high watermark counts for it).
            rows[self.node_id] = ReplicaDescription(
                self.node_id, replication.own_offset(self), self.now, self.now, self.directory_id
            )
            hw = self.hw if state.hw_known else -1
        vs = self.voters
        voters = tuple(
            replace(rows[v.id], directory_id=v.directory_id) if v.id in rows
            else ReplicaDescription(v.id, -1, -1, -1, v.directory_id)
            for v in vs
        )
        observers = tuple(rows[r] for r in sorted(rows) if r not in vs)
        leader = self.leader_id if self.leader_id is not None else NO_LEADER
        return QuorumDescription(leader, self.epoch, hw, voters, observers, vs,
                                 self.kraft_version)

    # --- output helpers (used by election / replication) ----------------------------------------

    def send(self, dst: int, message: Message) -> None:
        if dst == self.node_id and isinstance(message, BrokerRequest):
            self._loopback.append((message, None))  # combined roles: to its own controller
            return
        self._out.messages.append(Send(dst, message))

    def answer(self, dst: int, request: Request | BrokerRequest | ApiVersionsRequest,
               response: Message) -> None:
        """Send `response` to `request` (received from `dst`)."""
        if dst == self.node_id and isinstance(response, BrokerResponse):
            self._loopback.append((response, request))  # combined roles: to its own broker
            return
        self._out.messages.append(Send(dst, response, request))

    def refuse(self, dst: int, request: Request, error: ErrorCode) -> None:
        """Answer `request` with `error` and nothing else."""
        self.answer(dst, request,
                    error_response(request, error, self.responder_leader(), self.epoch))

    def reply(self, reply: ClientReply) -> None:
        image_brokers = self.image.brokers
        if isinstance(reply, ReadReply) and reply.kv is not None and image_brokers:
            # An image read (replication builds its kv): the brokers of that same image. None
            # when there are none, so that a reply of a cluster without brokers is as it was.
            reply = replace(reply, brokers=tuple(image_brokers[b] for b in sorted(image_brokers)))
        self._out.replies.append(reply)

    def event(self, **fields: Any) -> None:
        self._out.events.append(fields)

    def persist(self) -> None:
        """Ask the host to make the quorum state durable before any message of this Ready."""
        qs = self.quorum_state()
        if self.config.has(Unsafe.FORGET_VOTE) and qs.voted_id != self.node_id:
            qs = QuorumState(qs.leader_epoch, qs.leader_id, None)
        self._out.quorum_state = qs

    def append_entries(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            self.log.append(entry)
        self._out.entries.extend(entries)
        self._out.flush = True
        if any(e.kind is EntryKind.VOTERS or e.kind is EntryKind.KRAFT_VERSION for e in entries):
            self._note_voter_entries(entries)
        if self.config.has(Unsafe.SNAPSHOT_UNCOMMITTED):
            snapshotting.apply_committed(self)  # the defect: applied before it is committed

    def truncate(self, offset: int, reason: str) -> bool:
        """Remove the log from `offset` on; False when that would remove an entry this replica
        knows is committed (below its high watermark) or has applied to its image: it refuses
        and halts instead (`Fatal`), as Kafka's `handleFetchResponse` throws. Only a broken
        quorum asks that (a committed entry missing from a leader's log), and truncating would
        leave the image holding entries the log no longer has."""
        if offset >= self.log.end_offset:
            return True
        applied = max(self.hw, self.image.end_offset)
        if offset < applied:
            self.halt(Fatal(
                TRUNCATION_BELOW_HIGH_WATERMARK,
                f"asked ({reason}, leader {self.leader_id}, epoch {self.epoch}) to truncate the "
                f"log to offset {offset}, below its high watermark {self.hw} (image applied to "
                f"{self.image.end_offset}): a committed entry would be lost",
            ))
            return False
        self.log.truncate(offset)
        was_voter = self.is_voter
        if self.voter_history.truncate(offset):
            self._voters_changed(was_voter)  # an uncommitted VotersRecord is undone (KIP-853)
        out = self._out
        # Entries of this very Ready at or past `offset` never reach the disk.
        out.entries = [e for e in out.entries if e.offset < offset]
        if not out.entries or out.truncate_to is not None:
            out.truncate_to = offset if out.truncate_to is None else min(out.truncate_to, offset)
        else:
            out.truncate_to = offset
        self.event(type="truncate", epoch=self.epoch, offset=offset, reason=reason)
        return True

    def halt(self, fatal: Fatal) -> None:
        """The core cannot go on: say why (a `fatal` event) and ask the host to stop the node
        (`Ready.fatal`); no input is stepped any more. The sans-I/O form of Kafka's exceptions
        that end the raft thread: the host owns the process, the core only says it must end."""
        if self.halted is not None:
            return
        self.halted = fatal
        self.event(type="fatal", name=fatal.name, detail=fatal.detail, epoch=self.epoch,
                   hw=self.hw)
        self._out.fatal = fatal

    def set_hw(self, hw: int) -> None:
        if hw > self.hw:
            self.hw = hw
            self.event(type="high-watermark", epoch=self.epoch, hw=hw)
            snapshotting.apply_committed(self)
            if isinstance(self.state, Leader):
                controller.on_commit(self, self.state)

    # --- snapshot output (snapshots.py) -------------------------------------------------------------

    def write_snapshot(self, write: SnapshotWrite) -> None:
        self._out.snapshot_write = write

    def receive_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        self._out.snapshot_received = (snapshot_id, data)

    def reset_log(self, snapshot_id: SnapshotId) -> None:
        """Install: the log restarts empty at the snapshot. The host resets it before anything
        else of this Ready, so what this Ready had for the old log is dropped."""
        self.log.reset(snapshot_id.end_offset, snapshot_id.epoch)
        out = self._out
        out.log_reset = snapshot_id
        out.truncate_to, out.entries, out.snapshot_write = None, [], None
        if out.delete_before is not None and out.delete_before < snapshot_id:
            out.delete_before = None

    def delete_log_before(self, snapshot_id: SnapshotId) -> None:
        """Retention: the log start moves up to the snapshot."""
        self.log.advance_start(snapshot_id.end_offset, snapshot_id.epoch)
        self.voter_history.trim_below(snapshot_id.end_offset)
        out = self._out
        if out.delete_before is None or out.delete_before < snapshot_id:
            out.delete_before = snapshot_id

    def random_election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return self.rng.randrange(t, 2 * t)

    def election_backoff(self, retries: int) -> int:
        """A lost candidacy's backoff: Kafka's binaryExponentialElectionBackoffMs, random in
        100 ms steps below 100 x 2^retries, capped at the backoff maximum (and floored at the
        retry backoff)."""
        limit = 2 << min(max(retries, 1) - 1, 20)
        return max(
            self.config.retry_backoff_ms,
            min(_BACKOFF_BASE_MS * self.rng.randrange(limit), self.config.election_backoff_max_ms),
        )

    def responder_leader(self) -> int:
        return self.leader_id if self.leader_id is not None else NO_LEADER

    def cluster_ok(self, cluster_id: str | None) -> bool:
        return cluster_id is None or self.cluster_id is None or cluster_id == self.cluster_id

    # --- the rules every message shares -----------------------------------------------------------

    def on_message(self, src: int, msg: Message, in_reply_to: Message | None = None) -> None:
        """Dispatch: the shared rules first, then the message's handler (see the module doc).
        `in_reply_to` is the request a response answers, when the host knows it. The broker
        messages go to controller.py or lifecycle.py first: the shared rules are Raft's (epochs,
        leaders)."""
        self._handling = (src, msg)
        broker_route = _BROKER_MESSAGES.get(type(msg))
        if broker_route is not None:
            broker_route(self, src, msg, in_reply_to)
            return
        if isinstance(msg, Response):
            if isinstance(msg, FetchResponse | FetchSnapshotResponse | UpdateVoterResponse) and \
                    replication.answers_an_older_fetch(self, in_reply_to):
                return
            if isinstance(msg, VoteResponse) and election.answers_another_round(self, in_reply_to):
                self.observe_leader(msg.leader_id, msg.leader_epoch)
                return
            self._on_response(src, msg)
        elif isinstance(msg, Request):
            self._on_request(src, msg)
        else:
            raise TypeError(f"RaftCore: not a Raft message: {msg!r}")

    def _on_request(self, src: int, req: Request) -> None:
        route = _REQUESTS[type(req)]
        error = self._refusal(req, route)
        if error is not None:
            self.refuse(src, req, error)
            return
        # A newer epoch is each handler's to apply: a Vote unattaches, a BeginQuorumEpoch follows
        # its sender, a Fetch is refused; no one rule gives all three Kafka's outputs.
        route.handle(self, src, req)

    def _refusal(self, req: Request, route: _RequestRoute) -> ErrorCode | None:
        """Why `req` is refused before its handler runs, in Kafka's order, or None."""
        if not self.cluster_ok(req.cluster_id):
            return ErrorCode.inconsistent_cluster_id
        if req.epoch > MAX_EPOCH:
            # Adopting it would end this node's elections (see MAX_EPOCH); refused before
            # anything is persisted. Kafka has no such check (INVALID_REQUEST is its code for a
            # field no correct peer sends).
            return ErrorCode.invalid_request
        header_error = route.header(self, req) if route.header is not None else None
        if header_error is not None:
            return header_error
        if req.epoch < self.epoch:
            return ErrorCode.fenced_leader_epoch
        if req.sender < 0 or req.sender == self.node_id:
            # Kafka's validateVoterOnlyRequest refuses a negative id. A request in our own name
            # is forged (a node never sends to itself): on its word we would vote for, or follow,
            # ourselves.
            return ErrorCode.invalid_request
        if route.voters_only and self.kraft_version < 1 and \
                (not self.is_voter or req.sender not in self.voters):
            # kraft.version 0 (static voters) only, as Kafka up to 3.7 refused it; Kafka 3.8+'s
            # validateVoterOnlyRequest checks no voter set at all (docs/contracts.md). With
            # voters in the log a replica may not have the record that made the sender, or
            # itself, a voter yet (a new voter gets the leader's BeginQuorumEpoch, and may
            # campaign, before every voter has fetched its VotersRecord): there we do as Kafka.
            # The voter key still names the receiver, and a candidate counts only its own
            # voters' grants. A static set is the same on every node by configuration: a request
            # from outside it is a stray or misconfigured replica, refused before its epoch.
            return ErrorCode.inconsistent_voter_set
        return None

    def _on_response(self, src: int, resp: Response) -> None:
        if self.observe_leader(resp.leader_id, resp.leader_epoch):
            return
        # A stale response still reaches its handler: what it means differs (a pre-vote counts
        # it, a BeginQuorumEpoch or Fetch is retried), so no one rule drops it.
        _RESPONSES[type(resp)](self, src, resp)

    def observe_leader(self, leader_id: int, epoch: int) -> bool:
        """Every response names the responder's epoch and leader: a newer epoch, or a leader for our
        epoch when we know none, moves us there. Returns True when it changed the state. Another
        leader for our epoch than the one we know is noted (`inconsistent_leader`)."""
        if epoch == self.epoch and leader_id != NO_LEADER and self.leader_id is not None \
                and leader_id != self.leader_id:
            self.inconsistent_leader(leader_id)
            return False
        if epoch > self.epoch:
            if leader_id not in (NO_LEADER, self.node_id):
                self.become_follower(epoch, leader_id)
            else:
                self.become_unattached(epoch)
            return True
        if (
            epoch == self.epoch
            and leader_id not in (NO_LEADER, self.node_id)
            and self.leader_id is None
        ):
            self.become_follower(epoch, leader_id)
            return True
        return False

    def inconsistent_leader(self, claimed: int) -> None:
        """The message being handled names `claimed` leader of our epoch, whose leader we know
        is another: two leaders in one epoch, evidence of a broken quorum (Kafka's
        `hasConsistentLeader` fails, and it throws an IllegalStateException). Our leader stays
        (the message changes nothing); an `inconsistent-leader` event, which the raft-invariants
        checker reports, says it."""
        source, message = self._handling if self._handling is not None else (None, None)
        self.event(type="inconsistent-leader", epoch=self.epoch, leader=self.leader_id,
                   claimed=claimed, source=source,
                   message=type(message).__name__ if message is not None else None)

    # --- transitions ----------------------------------------------------------------------------

    def _set_state(self, state: State) -> None:
        old = self.state
        self.state = state
        if isinstance(old, Leader) and not isinstance(state, Leader):
            replication.fail_pending(self, old)
            controller.fail_pending(self, old)
        name = state.name
        if not self.is_voter and name in ("unattached", "follower"):
            name = "observer"
        self._state_event(name)

    def _state_event(self, name: str) -> None:
        self.event(type="state", state=name, epoch=self.epoch, leader=self.leader_id,
                   voted_for=self.voted_id)

    def grant_vote(self, candidate: int) -> None:
        """Vote for `candidate` in this epoch: durable before the response leaves (unless the
        forget-vote switch drops it from the persisted state). The voter's election timer starts
        again (Kafka's unattachedAddVotedState, prospectiveAddVotedState): the candidate it chose
        has at least its own chance of winning, so it gives it a full election timeout."""
        self.voted_id = candidate
        self.persist()
        state = self.state
        if isinstance(state, Unattached | Prospective) and state.election_deadline != NEVER:
            state.election_deadline = self.now + self.random_election_timeout()
        self._state_event(state.name)

    @property
    def may_campaign(self) -> bool:
        """Voters campaign; an observer only under the observer-campaign switch (KAFKA-17067)."""
        return self.is_voter or self.config.has(Unsafe.OBSERVER_CAMPAIGN)

    def _new_unattached(self) -> Unattached:
        if self.is_voter:
            return Unattached(election_deadline=self.now + self.random_election_timeout())
        return Unattached()

    def become_unattached(self, epoch: int, new_timeout: bool = False) -> None:
        """Unattached in `epoch` (the vote kept in the same epoch). A voter's election timer is a
        new random one from any other state, or when `new_timeout` (a rejected pre-vote)."""
        if epoch > self.epoch:
            self.epoch, self.voted_id = epoch, None
        self.leader_id = None
        self.persist()
        old = self.state
        state = self._new_unattached()
        if self.is_voter and not new_timeout and isinstance(old, Unattached | Prospective | Candidate):
            # Kafka's QuorumState.transitionToUnattached: a voter already waiting to campaign
            # keeps its remaining election time. Restarting it on every newer epoch lets a
            # candidate whose log loses every vote, retrying within its backoff (< the election
            # timeout), keep the voters with better logs from ever campaigning: a livelock.
            state.election_deadline = old.election_deadline
        self._set_state(state)
        replication.maybe_fetch(self)

    def become_follower(self, epoch: int, leader_id: int) -> None:
        if epoch > self.epoch:
            self.voted_id = None
        self.epoch, self.leader_id = epoch, leader_id
        self.persist()
        self._set_state(Follower(fetch_deadline=self.now + self.config.fetch_timeout_ms))
        replication.maybe_fetch(self)

    def start_election(self) -> None:
        """The election timer fired: pre-vote first when enabled, else a real candidacy."""
        if self.shutting_down:
            self._stand_down()
            return
        if not self.may_campaign or self.epoch >= MAX_EPOCH:
            return  # at MAX_EPOCH: no epoch left to run in; it still votes and follows
        if self.config.pre_vote:
            # Kafka's transitionToProspective: a lost candidacy's count goes on into the next.
            old = self.state
            state = Prospective(
                election_deadline=self.now + self.random_election_timeout(),
                retries=old.retries + 1 if isinstance(old, Candidate) else 1,
            )
            state.granted.add(self.node_id)
            self._set_state(state)
            election.request_votes(self, pre_vote=True)
            election.maybe_win(self)
        else:
            self.become_candidate()

    def become_candidate(self) -> None:
        if self.shutting_down:
            return  # a stopping node never opens an epoch it would not stay to lead
        if self.epoch >= MAX_EPOCH:
            return  # the next epoch would not fit an int32 (see MAX_EPOCH)
        old = self.state
        if isinstance(old, Prospective):
            retries = old.retries  # Kafka's transitionToCandidate
        else:  # without pre-vote: the candidacies in a row, as before KIP-996
            retries = old.retries + 1 if isinstance(old, Candidate) else 1
        self.epoch, self.leader_id, self.voted_id = self.epoch + 1, None, self.node_id
        self.persist()
        state = Candidate(election_deadline=self.now + self.random_election_timeout(),
                          retries=retries)
        state.granted.add(self.node_id)
        self._set_state(state)
        election.request_votes(self, pre_vote=False)
        election.maybe_win(self)

    def _become_leader(self, restart: bool = False) -> None:
        self.leader_id = self.node_id
        self.persist()
        start = self.log.epoch_start(self.epoch) if restart else None
        if start is None:
            start = self.log.end_offset
            # Kafka's LeaderChangeMessage: the epoch's voters and who granted the vote.
            granted = self.state.granted if isinstance(self.state, Candidate) else set()
            change = LeaderChange(
                self.node_id,
                tuple(self.voters.sorted()),
                tuple(sorted(v for v in granted | {self.node_id} if v in self.voters)),
            )
            entries = [Entry(start, self.epoch, EntryKind.LEADER_CHANGE, change.encode())]
            voters = self._voters_at_epoch_start()
            if voters is not None:
                entries.append(Entry(start + 1, self.epoch, EntryKind.KRAFT_VERSION,
                                     str(self.kraft_version).encode()))
                entries.append(Entry(start + 2, self.epoch, EntryKind.VOTERS, voters.encode()))
            self.append_entries(entries)
        state = Leader(
            epoch_start=start,
            check_quorum_deadline=self.now + self.config.check_quorum_timeout_ms,
        )
        # KAFKA-12619: the HW was exposed before the LeaderChange record was committed.
        state.hw_known = self.config.has(Unsafe.EARLY_HIGH_WATERMARK)
        state.became_ms = self.now  # every broker's session starts now (controller.py)
        for v in self.voters.ids:
            if v != self.node_id:
                state.progress[v] = ReplicaProgress()
        state.fetched_since_check.add(self.node_id)
        self._set_state(state)
        election.send_begin_quorum(self)
        replication.update_hw(self)

    def _voters_at_epoch_start(self) -> VoterSet | None:
        """Kafka's appendStartOfEpochControlRecords: the voter set a new leader writes after its
        LeaderChange, or None. With kraft.version 1, when the voters came from the bootstrap
        checkpoint, which is never replicated (the log must hold them, or a replica that joins
        from offset 0 would never learn who votes), or when the set names this leader otherwise
        than it is now (its endpoints or kraft.version range changed: it updates itself, as a
        follower does with UpdateRaftVoter)."""
        if self.kraft_version < 1:
            return None
        local = self.local_voter
        if local is not None and self.voters.needs_update(local):
            return self.voters.updated(local)
        if self.voter_history.latest_offset() is None and self.log.start_offset == 0:
            return self.voters
        return None

    def become_leader(self) -> None:
        """A won election: lead it, or, once shutting down, end the epoch without leading it."""
        if self.shutting_down:
            self._resign_elected()
            return
        self._become_leader()

    def _new_resigned(self, successors: tuple[int, ...]) -> Resigned:
        state = Resigned(
            election_deadline=self.now + self.random_election_timeout(),
            preferred_successors=successors,
        )
        state.unacked = {v for v in self.voters.ids if v != self.node_id}
        return state

    def back_to_resigned(self, backoff: int) -> None:
        """The leader of this epoch (it resigned: check-quorum, or a restart) lost its pre-vote:
        it is the resigned leader of the epoch again, and runs again after `backoff`. Its leader
        id and vote stay as persisted, so that a restart comes back Resigned (Kafka's
        `QuorumState.initialize`), never a candidate of the epoch it led, whose voters granted it
        their vote in that epoch and would elect it again: a second leader of one epoch, whose
        new entries may take offsets the first wrote. The voters were told already: it asks
        nothing of them."""
        resigned = Resigned(
            election_deadline=NEVER if self.shutting_down else self.now + backoff,
            preferred_successors=(),
        )
        self._set_state(resigned)

    def resign(self) -> None:
        """Leader -> Resigned: tell the voters, most caught-up successor first."""
        state = self.state
        successors: tuple[int, ...] = ()
        if isinstance(state, Leader):
            successors = tuple(
                sorted(state.progress, key=lambda v: (-state.progress[v].end_offset, v))
            )
            successors = tuple(v for v in successors if v in self.voters)
            # Kafka's transitionToResigned: parked fetches are answered now, not left to expire.
            # Responses go back in request order, so a vote the successor asks of us on the
            # same connection would otherwise wait behind its parked fetch.
            for rid in sorted(state.parked):
                self.refuse(rid, state.parked[rid][0], ErrorCode.not_leader_or_follower)
            state.parked = {}
        self._set_state(self._new_resigned(successors))
        election.send_end_quorum(self)

    def _resign_elected(self) -> None:
        """Candidate -> Resigned, shutting down: a majority granted the epoch, so it is this node's
        to end, and the voters trust its EndQuorumEpoch as they would a leader's. Successors: the
        voters that granted (they answered: likely up), then the rest, each in id order; a new
        leader knows no one's fetch offset yet to rank them by."""
        state = self.state
        assert isinstance(state, Candidate)
        granted = sorted(v for v in state.granted if v in self.voters and v != self.node_id)
        rest = [v for v in self.voters.sorted() if v != self.node_id and v not in granted]
        self.leader_id = self.node_id
        self.persist()
        resigned = self._new_resigned(tuple(granted + rest))
        resigned.election_deadline = NEVER
        self._set_state(resigned)
        election.send_end_quorum(self)

    # --- time and shutdown ----------------------------------------------------------------------

    def tick(self, now_ms: int) -> None:
        if now_ms > self.now:
            self.now = now_ms
        snapshotting.on_tick(self)
        _TICKS[type(self.state)](self)

    def on_shutdown(self) -> None:
        """Graceful shutdown (Kafka's `GracefulShutdown`): from now on the node never campaigns and
        never leads; the host keeps stepping it until `shutdown_complete` (a leader is known).

        A leader resigns: EndQuorumEpoch to every voter, most caught-up successor first, resent on
        the request timeout (sooner after a refusal) to each voter that has not answered. A
        resigned node (check-quorum) carries on telling the voters, and no longer campaigns.

        A candidate finishes the election it is in, as Kafka's `pollCandidate` does, rather than
        abandon it: the voters that granted it are bound to it for this epoch, and abandoned they
        would sit out an election timeout before anyone else could win. As in Kafka, its election
        timeout no longer applies: it asks the voters that have not answered, each request
        timeout, until the round is decided. Won, it ends the epoch at once with EndQuorumEpoch
        (`_resign_elected`), so the voters elect a successor without waiting; Kafka becomes leader
        and resigns on its next poll, but a stopping node has no use for leading (a LeaderChange
        record no one would commit, client writes it would fail). Lost (a majority refused), it
        asks no more and opens no next round.

        A prospective abandons its pre-vote: it holds no one's vote and bumps no epoch, so no one
        waits on it, and winning it would only start a campaign. Any voter without a leader stays
        to vote for the next one (Kafka's `pollUnattachedAsVoter`).
        """
        if self.shutting_down:
            return
        self.shutting_down = True
        if self.broker_lifecycle is not None:
            self.broker_lifecycle.on_shutdown(self)
        if isinstance(self.state, Leader):
            self.resign()
        self._stand_down()
        if isinstance(self.state, Prospective):
            self.state.vote_sent.clear()  # abandoned: nothing to ask again

    def _stand_down(self) -> None:
        """Shutting down: the timer that would start an election is put out for good (it would
        only fire again, for nothing). The node stays to vote, never to run."""
        state = self.state
        if isinstance(state, Follower):
            state.fetch_deadline = NEVER
        elif not isinstance(state, Leader):
            state.election_deadline = NEVER
        if isinstance(state, Unattached) and self.is_voter:
            # Nor does it look for a leader (Kafka's pollUnattachedAsVoter): the fetch in
            # flight is given up, though its answer still names the leader it learns of.
            state.fetch_sent_ms, state.fetch_retry_at = None, NEVER


def _voter_history(static: VoterSet, image: Image, log: RaftLog) -> VoterHistory:
    """The voter sets at start: the image's (it applied every VotersRecord below its end) or the
    static set, then the VotersRecords of the log past the image, read once."""
    history = VoterHistory(image.voters if image.voters is not None else static,
                           image.kraft_version)
    offset = max(log.start_offset, image.end_offset)
    while offset < log.end_offset:
        chunk = log.read(offset, log.end_offset, 1024)
        history.add_entries(chunk)
        offset = chunk[-1].offset + 1
    return history


def _check_image(image: Image, log: RaftLog) -> None:
    """The image the host loaded must sit on the log: within it, and never below its start."""
    if not log.start_offset <= image.end_offset <= log.end_offset:
        raise ValueError(
            f"RaftCore: the image ends at offset {image.end_offset}, outside the log "
            f"[{log.start_offset}, {log.end_offset}); start the log at the latest snapshot "
            "(KIP-630: a snapshot past the log end restarts the log empty there)"
        )


def _tick_unattached(core: RaftCore) -> None:
    state = core.state
    assert isinstance(state, Unattached)
    due = state.election_deadline != NEVER and core.now >= state.election_deadline
    if core.may_campaign and due:
        core.start_election()
        return
    replication.maybe_fetch(core)


def _tick_follower(core: RaftCore) -> None:
    state = core.state
    assert isinstance(state, Follower)
    if core.now >= state.fetch_deadline:
        if core.may_campaign:
            core.start_election()
        else:
            core.become_unattached(core.epoch)
            replication.maybe_fetch(core)
        return
    replication.maybe_fetch(core)


def _tick_prospective(core: RaftCore) -> None:
    state = core.state
    assert isinstance(state, Prospective)
    if core.shutting_down:
        return  # the pre-vote is abandoned (on_shutdown)
    if core.now >= state.election_deadline:
        election.lose_prevote(core, rejected=False)
        return
    election.resend_votes(core, pre_vote=True)


def _tick_candidate(core: RaftCore) -> None:
    state = core.state
    assert isinstance(state, Candidate)
    if core.shutting_down:
        # Finish this round (on_shutdown): ask on until it is decided, never back off into another.
        if state.backoff_until is None:
            election.resend_votes(core, pre_vote=False)
        else:
            state.backoff_until = NEVER  # lost: no next round, so no timer for one
        return
    if state.backoff_until is not None:
        if core.now >= state.backoff_until:
            core.start_election() if core.config.pre_vote else core.become_candidate()
        return
    if core.now >= state.election_deadline:
        # Kafka's pollCandidate: a round that timed out undecided goes back to pre-vote at once
        # (the backoff is for a round lost, `election.maybe_win`); before KIP-996, it backed off.
        if core.config.pre_vote:
            core.start_election()
        else:
            state.backoff_until = core.now + core.election_backoff(state.retries)
        return
    election.resend_votes(core, pre_vote=False)


def _tick_leader(core: RaftCore) -> None:
    state = core.state
    assert isinstance(state, Leader)
    if len(core.voters) == 1 and core.is_voter:
        # The leader is a majority by itself (a one-voter set): it has its quorum with no Fetch
        # (Kafka's timeUntilCheckQuorumExpires). With more voters only fetches renew it.
        state.check_quorum_deadline = core.now + core.config.check_quorum_timeout_ms
    if core.now >= state.check_quorum_deadline and not core.config.has(Unsafe.NO_CHECK_QUORUM):
        core.resign()
        return
    if core.now >= state.check_quorum_deadline:
        state.check_quorum_deadline = core.now + core.config.check_quorum_timeout_ms
    election.send_begin_quorum(core)
    replication.expire_parked(core)
    membership.expire_asked(core, state)
    for rid in [r for r, p in state.progress.items() if r not in core.voters]:
        if _observer_expired(state.progress[rid], core.now):
            del state.progress[rid]  # Kafka's clearInactiveObservers
    _appending(core, lambda: controller.on_leader_tick(core, state))


def _appending(core: RaftCore, handle: Callable[[], None]) -> None:
    """Run a broker handler; the records it appended go out (and, alone, commit) at once, as a
    client append's do."""
    end = core.log.end_offset
    handle()
    if core.log.end_offset > end:
        replication.update_hw(core)
        replication.wake_parked(core)


def _observer_expired(progress: ReplicaProgress, now: int) -> bool:
    return now - progress.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS


def _tick_resigned(core: RaftCore) -> None:
    state = core.state
    assert isinstance(state, Resigned)
    if core.now >= state.election_deadline and not core.shutting_down:
        if not core.is_voter:
            # A leader that removed itself (KIP-853): an observer now; it looks for the leader
            # in the next epoch, as Kafka's pollResigned does. Staying in the epoch it led, it
            # would take a Fetch answer naming itself the leader of that epoch for the truth.
            core.become_unattached(min(core.epoch + 1, MAX_EPOCH))
            return
        core.start_election()
        return
    election.send_end_quorum(core)


_TICKS = {
    Unattached: _tick_unattached,
    Follower: _tick_follower,
    Prospective: _tick_prospective,
    Candidate: _tick_candidate,
    Leader: _tick_leader,
    Resigned: _tick_resigned,
}

# --- the dispatch tables --------------------------------------------------------------------------


def _receive(core: RaftCore, inp: Receive) -> None:
    core.on_message(inp.src, inp.message, inp.in_reply_to)


def _tick(core: RaftCore, inp: Tick) -> None:
    core.tick(inp.now_ms)


def _flushed(core: RaftCore, inp: LogFlushed) -> None:
    replication.on_flushed(core, inp.end_offset)


def _shutdown(core: RaftCore, inp: Shutdown) -> None:
    core.on_shutdown()


_INPUTS: dict[type, Callable[[RaftCore, Any], None]] = {
    Receive: _receive,
    Tick: _tick,
    LogFlushed: _flushed,
    ClientAppend: replication.on_client_append,
    ClientRead: replication.on_client_read,
    Shutdown: _shutdown,
    SnapshotWritten: snapshotting.on_snapshot_written,
    SnapshotLoaded: snapshotting.on_snapshot_loaded,
    SnapshotRefused: snapshotting.on_snapshot_refused,
    AddVoter: membership.on_add_voter,
    RemoveVoter: membership.on_remove_voter,
}


def _voter_key_error(
    core: RaftCore, req: VoteRequest | BeginQuorumEpochRequest
) -> ErrorCode | None:
    """KIP-853: a request meant for another voter (VoterId -1: meant for whoever receives it), or
    for another replica of this id (Kafka's isValidVoterKey: a directory id, when both sides know
    one, must be this one's; a wiped disk must not vote or endorse as the voter it replaced)."""
    if req.voter_id >= 0 and req.voter_id != core.node_id:
        return ErrorCode.invalid_voter_key
    wanted = req.voter_directory_id
    if wanted is not None and core.directory_id is not None and wanted != core.directory_id:
        return ErrorCode.invalid_voter_key
    return None


def _malformed_fetch_error(core: RaftCore, req: FetchRequest) -> ErrorCode | None:
    # Kafka's handleFetchRequest refuses a negative MaxWaitMs with the fields malformed_fetch checks.
    malformed = replication.malformed_fetch(req) or req.max_wait_ms < 0
    return ErrorCode.invalid_request if malformed else None


def _vote_header_error(core: RaftCore, req: VoteRequest) -> ErrorCode | None:
    """Kafka's handleVoteRequest: a log no candidate has is INVALID_REQUEST, before the epoch;
    then the voter key. No log has a negative end or last epoch; a candidate's last epoch is below
    the one it runs in (it bumped it), a prospective's at most its current one (KIP-996: it may
    have followed a leader of that very epoch)."""
    if req.pre_vote:
        impossible = req.last_offset_epoch > req.candidate_epoch
    else:
        impossible = req.last_offset_epoch >= req.candidate_epoch
    if req.last_offset < 0 or req.last_offset_epoch < 0 or impossible:
        return ErrorCode.invalid_request
    return _voter_key_error(core, req)


@dataclass(frozen=True, slots=True)
class _RequestRoute:
    """How one request type is checked before, and handled after, the shared rules."""

    handle: Callable[[RaftCore, int, Any], None]
    header: Callable[[RaftCore, Any], ErrorCode | None] | None
    """The request's own checks that Kafka runs before the epoch's."""
    voters_only: bool
    """Refused (INCONSISTENT_VOTER_SET) unless both ends are voters."""


_REQUESTS: dict[type, _RequestRoute] = {
    VoteRequest: _RequestRoute(election.on_vote_request, _vote_header_error, voters_only=True),
    BeginQuorumEpochRequest: _RequestRoute(
        election.on_begin_quorum_request, _voter_key_error, voters_only=True
    ),
    EndQuorumEpochRequest: _RequestRoute(election.on_end_quorum_request, None, voters_only=True),
    FetchRequest: _RequestRoute(
        replication.on_fetch_request, _malformed_fetch_error, voters_only=False
    ),
    FetchSnapshotRequest: _RequestRoute(
        snapshotting.on_fetch_snapshot_request, snapshotting.malformed_fetch_snapshot,
        voters_only=False,
    ),
    UpdateVoterRequest: _RequestRoute(
        membership.on_update_voter_request, None, voters_only=False
    ),
}

def _broker_registration(core: RaftCore, src: int, msg: BrokerRegistrationRequest,
                         in_reply_to: Message | None) -> None:
    _appending(core, lambda: controller.on_registration_request(core, src, msg))


def _broker_heartbeat(core: RaftCore, src: int, msg: BrokerHeartbeatRequest,
                      in_reply_to: Message | None) -> None:
    _appending(core, lambda: controller.on_heartbeat_request(core, src, msg))


def _broker_response(core: RaftCore, src: int,
                     msg: BrokerRegistrationResponse | BrokerHeartbeatResponse,
                     in_reply_to: Message | None) -> None:
    """The host pairs answers with requests (`in_reply_to`): the lifecycle ignores one that does
    not answer its request in flight. A node that is no broker asked nothing."""
    if core.broker_lifecycle is not None:
        core.broker_lifecycle.on_response(core, src, msg, in_reply_to)


def _api_versions_request(core: RaftCore, src: int, msg: ApiVersionsRequest,
                          in_reply_to: Message | None) -> None:
    """A leader about to add this replica asks what it supports: the `kraft.version` levels
    (the server answers ApiVersions on the wire, with the same levels, before the core)."""
    core.answer(src, msg, ApiVersionsResponse(ErrorCode.none, core.kraft_versions))


def _api_versions_response(core: RaftCore, src: int, msg: ApiVersionsResponse,
                           in_reply_to: Message | None) -> None:
    membership.on_api_versions_response(core, src, msg, in_reply_to)


_BROKER_MESSAGES: dict[type, Callable[[RaftCore, int, Any, Message | None], None]] = {
    BrokerRegistrationRequest: _broker_registration,
    BrokerHeartbeatRequest: _broker_heartbeat,
    BrokerRegistrationResponse: _broker_response,
    BrokerHeartbeatResponse: _broker_response,
    ApiVersionsRequest: _api_versions_request,
    ApiVersionsResponse: _api_versions_response,
}
"""The broker messages and ApiVersions, routed before the Raft rules (they name no epoch and no
leader)."""

_RESPONSES: dict[type, Callable[[RaftCore, int, Any], None]] = {
    VoteResponse: election.on_vote_response,
    BeginQuorumEpochResponse: election.on_begin_quorum_response,
    EndQuorumEpochResponse: election.on_end_quorum_response,
    FetchResponse: replication.on_fetch_response,
    FetchSnapshotResponse: snapshotting.on_fetch_snapshot_response,
    UpdateVoterResponse: replication.on_update_voter_response,
}
