"""One small class per Raft state; each holds only what that state needs (its timers, its round).

The epoch, leader and vote are the core's (they are the persisted quorum state); a state object is
replaced wholesale on every transition, so nothing leaks from one state into the next. `deadline()`
is the earliest time at which the state wants a Tick.

Beside them, what a state's handlers keep for it while it waits (`PendingAppend`, ...) and the
core's snapshot bookkeeping (`SnapshotState`, kept across transitions; snapshots.py runs it): the
data the handlers share through `CoreOps` (ops.py), below every handler module.
"""

from __future__ import annotations

import bisect
import uuid
from dataclasses import dataclass, field

from reference_node.raft.api import SnapshotWrite
from reference_node.raft.messages import (
    ApiVersionsRequest,
    BrokerRequest,
    FetchRequest,
    FetchSnapshotRequest,
    SnapshotId,
    UpdateVoterRequest,
)
from reference_node.raft.records import BrokerInfo
from reference_node.raft.voters import Voter

NEVER = 1 << 62


def _fetch_deadline(sent: int | None, retry_at: int, now: int, request_timeout: int) -> int:
    """A fetch in flight times out; a refused one is retried; otherwise the flush report (or a
    response) triggers the next fetch, not the clock."""
    if sent is not None:
        return sent + request_timeout
    return retry_at if retry_at > now else NEVER


def _min_sent(sent: dict[int, int], timeout: int) -> int:
    return min(sent.values()) + timeout if sent else NEVER


@dataclass(slots=True)
class Unattached:
    """No leader known in this epoch (maybe a vote cast). It fetches from a random bootstrap
    server (or voter) until one names the leader; a voter campaigns at `election_deadline`."""

    name = "unattached"
    election_deadline: int = NEVER
    fetch_sent_ms: int | None = None
    fetch_retry_at: int = 0
    fetch_in_flight: FetchRequest | None = None

    def deadline(self, now: int, request_timeout: int) -> int:
        fetch = _fetch_deadline(self.fetch_sent_ms, self.fetch_retry_at, now, request_timeout)
        return min(self.election_deadline, fetch)


@dataclass(slots=True)
class Prospective:
    """Pre-vote (KIP-996): asks whether votes would be granted, without bumping the epoch. Keeps
    the leader it had, so that losing sends it back to that leader."""

    name = "prospective"
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    vote_sent: dict[int, int] = field(default_factory=dict)
    retries: int = 1
    """Kafka's ProspectiveState.retries: the candidacies lost in a row before this round (+ 1),
    carried into the candidacy it wins; 1 unless it follows a lost candidacy."""

    def deadline(self, now: int, request_timeout: int) -> int:
        return min(self.election_deadline, _min_sent(self.vote_sent, request_timeout))


@dataclass(slots=True)
class Candidate:
    """Voted for itself in a new epoch; leader on a majority. Refused by too many to win, it backs
    off (`backoff_until`) and tries again; timed out, it asks again at once with pre-vote, after a
    backoff without (Kafka's pollCandidate after and before KIP-996)."""

    name = "candidate"
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    vote_sent: dict[int, int] = field(default_factory=dict)
    backoff_until: int | None = None
    retries: int = 1
    """Kafka's CandidateState.retries: how many candidacies in a row this one is (the exponent of
    its backoff)."""

    def deadline(self, now: int, request_timeout: int) -> int:
        if self.backoff_until is not None:
            return self.backoff_until
        return min(self.election_deadline, _min_sent(self.vote_sent, request_timeout))


@dataclass(slots=True)
class SnapshotDownload:
    """A snapshot a follower is fetching from its leader (KIP-630), chunk by chunk."""

    snapshot_id: SnapshotId
    data: bytearray = field(default_factory=bytearray)
    size: int | None = None
    """The file's size, as the leader's first chunk said."""
    loading: bool = False
    """Every byte arrived and went to the host (`Ready.snapshot_received`): waiting for its
    `SnapshotLoaded` or `SnapshotRefused`; nothing is fetched meanwhile."""


@dataclass(slots=True)
class Follower:
    """Fetches from the leader; campaigns (a voter) or looks for a leader (an observer) when no
    fetch has succeeded within the fetch timeout."""

    name = "follower"
    fetch_deadline: int
    fetch_sent_ms: int | None = None
    fetch_retry_at: int = 0
    fetch_in_flight: FetchRequest | FetchSnapshotRequest | UpdateVoterRequest | None = None
    """The latest request to the leader (a Fetch, a FetchSnapshot, or a voter's own
    UpdateRaftVoter): one at a time, as Kafka's RequestManager allows; only its answer is acted
    on."""
    last_fetch_ok_ms: int | None = None
    download: SnapshotDownload | None = None
    """The snapshot being fetched instead of the log (the leader's log starts past ours)."""
    update_voter_at: int | None = None
    """When a voter next checks whether the voter set names it as it is (Kafka's
    updateVoterPeriodTimer, 3 x the fetch timeout, started at its first fetch here)."""

    def deadline(self, now: int, request_timeout: int) -> int:
        nxt = _fetch_deadline(self.fetch_sent_ms, self.fetch_retry_at, now, request_timeout)
        return min(self.fetch_deadline, nxt)


OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""Kafka's LeaderState constant: an observer that has not fetched for this long is forgotten."""


@dataclass(slots=True)
class ReplicaProgress:
    """A replica's progress as the leader sees it (Kafka's LeaderState.ReplicaState)."""

    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1
    """The leader's log end offset when this replica last fetched: a fetch that reaches it proves
    the replica was caught up at the time of that earlier fetch."""
    directory_id: uuid.UUID | None = None
    """The directory id the replica fetches with (KIP-853): a voter's row counts toward the high
    watermark only when it matches the voter's."""
    valid_fetch_ms: int = -1
    """The replica's latest VALID fetch (`fetched`), Kafka's ReplicaState.lastFetchTimestamp:
    what the BeginQuorumEpoch heartbeat goes by (`last_fetch_ms` counts any fetch)."""

    def fetched(self, now: int, fetch_offset: int, leader_end: int) -> None:
        """Kafka's updateFollowerState, for a VALID fetch: LastCaughtUpTimestamp is the last time
        the replica's fetch offset reached the leader's end offset, now or as of its previous
        fetch."""
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif 0 < self.leader_end_at_last_fetch <= fetch_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leader_end_at_last_fetch = leader_end
        self.last_fetch_ms = max(self.last_fetch_ms, now)
        self.valid_fetch_ms = max(self.valid_fetch_ms, now)
        self.end_offset = max(self.end_offset, fetch_offset)


@dataclass(slots=True)
class PendingAppend:
    request_id: int
    offsets: tuple[int, ...]


@dataclass(slots=True)
class PendingRead:
    request_id: int
    from_offset: int
    confirmed: set[int]
    image: bool = False
    """A read of the state machine's kv map rather than of the log."""


@dataclass(slots=True)
class PendingVoterChange:
    """An AddRaftVoter or RemoveRaftVoter the leader is carrying out (an UpdateRaftVoter is
    answered as soon as it is appended)."""

    request_id: int
    kind: str
    """"add", "remove" or "update"."""
    voter: Voter
    offset: int | None = None
    """The offset of its VotersRecord, once appended; answered when it commits."""
    asked: ApiVersionsRequest | None = None
    """An add's ApiVersions request to the new voter, while its answer is awaited (Kafka's
    AddVoterHandler): nothing is appended before it comes."""
    asked_until: int = NEVER
    """When the add is refused (REQUEST_TIMED_OUT) if the answer has not come."""


@dataclass(slots=True)
class PendingBrokerAnswer:
    """A BrokerRegistration or BrokerHeartbeat the active controller answers once the records it
    depends on commit (controller.py)."""

    src: int
    request: BrokerRequest
    after: int
    """Answered once the high watermark passes this offset (-1: nothing to wait for)."""
    should_shut_down: bool = False
    """A heartbeat's answer: decided when the request was handled."""
    broker_epoch: int = -1
    """A registration's answer: the broker epoch (an amendment keeps the registered one)."""


@dataclass(slots=True)
class Leader:
    """Appends, answers fetches, advances the high watermark, checks it still has a quorum."""

    name = "leader"
    epoch_start: int
    check_quorum_deadline: int
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    begin_quorum_due: int = 0
    """When the BeginQuorumEpoch heartbeat next goes out (Kafka's beginQuorumEpochTimer: at once
    when elected, then every fetch timeout / 2)."""
    begin_sent: dict[int, int] = field(default_factory=dict)
    """Voter -> when the BeginQuorumEpoch in flight to it was sent (one at a time, as Kafka's
    RequestManager allows; dropped when answered)."""
    fetched_since_check: set[int] = field(default_factory=set)
    parked: dict[int, tuple[FetchRequest, int]] = field(default_factory=dict)
    appends: list[PendingAppend] = field(default_factory=list)
    reads: list[PendingRead] = field(default_factory=list)
    hw_known: bool = False
    voter_changes: list[PendingVoterChange] = field(default_factory=list)
    """At most one (but for `concurrent-voter-changes`)."""
    became_ms: int = 0
    """When this node became leader: every broker's session starts here (Kafka's failover rule:
    a new controller gives each registered broker a full session to heartbeat it)."""
    broker_heartbeats: dict[int, int] = field(default_factory=dict)
    """Broker id -> the time of its latest valid heartbeat (or registration) to this leader."""
    broker_view: dict[int, BrokerInfo] = field(default_factory=dict)
    """The brokers whose records this leader appended, as those records left them (committed or
    not); with the image's brokers, the controller's view (`controller.controller_view`)."""
    broker_last_record: dict[int, int] = field(default_factory=dict)
    """Broker id -> the offset of the latest record this leader appended for it."""
    broker_answers: list[PendingBrokerAnswer] = field(default_factory=list)

    def deadline(self, now: int, request_timeout: int) -> int:
        d = min(self.check_quorum_deadline, self.begin_quorum_due)
        for _, expiry in self.parked.values():
            d = min(d, expiry)
        for change in self.voter_changes:
            d = min(d, change.asked_until)
        return d


@dataclass(slots=True)
class Resigned:
    """A leader that stepped down (check-quorum, shutdown, restart): never leads this epoch again;
    tells the voters with EndQuorumEpoch, then campaigns for the next epoch."""

    name = "resigned"
    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacked: set[int] = field(default_factory=set)
    end_sent: dict[int, int] = field(default_factory=dict)

    def deadline(self, now: int, request_timeout: int) -> int:
        return min(self.election_deadline, _min_sent(self.end_sent, request_timeout))


State = Unattached | Prospective | Candidate | Follower | Leader | Resigned


@dataclass(slots=True)
class SnapshotState:
    """The core's snapshot bookkeeping.

    Bytes are counted on one running counter of applied record bytes (`entry_bytes`), from the
    log start the core was built with: the distance between two marks on it is the bytes of the
    log between their offsets.
    """

    durable: list[SnapshotId] = field(default_factory=list)
    """The snapshots the host holds durably, ascending: what the core serves and retains by."""
    taken_ms: dict[SnapshotId, int] = field(default_factory=dict)
    bytes_at: dict[SnapshotId, int] = field(default_factory=dict)
    """The counter at each snapshot's end."""
    sizes: dict[SnapshotId, int] = field(default_factory=dict)
    """Each durable snapshot's file size, once retention asked the host's store for it."""
    applied_bytes: int = 0
    start_bytes: int = 0
    """The counter at the log start offset."""
    start_ms: int = 0
    """When the snapshot at the log start was taken (the core's start when it holds none)."""
    last_end: int = 0
    """The end offset of the latest snapshot written, being written or installed."""
    last_bytes: int = 0
    """The counter when that snapshot was taken."""
    last_ms: int = 0
    writing: SnapshotWrite | None = None
    """The write asked for and not yet reported durable."""
    outcomes: dict[int, str | None] = field(default_factory=dict)
    """The leader's: what applying each offset of a pending client append did."""

    def latest(self) -> SnapshotId | None:
        return self.durable[-1] if self.durable else None

    def serving(self) -> SnapshotId | None:
        """The snapshot a fetcher below the log start is told to fetch: the latest durable one
        (under `delete-before-snapshot`, while none is, the one being written: it is refused
        until it is durable, and the fetcher asks again)."""
        latest = self.latest()
        if latest is None and self.writing is not None:
            return self.writing.snapshot_id
        return latest

    def add_durable(self, snapshot_id: SnapshotId, now: int) -> None:
        if snapshot_id not in self.durable:
            bisect.insort(self.durable, snapshot_id)
        self.taken_ms.setdefault(snapshot_id, now)

    def forget_below(self, snapshot_id: SnapshotId) -> None:
        """The host deletes every snapshot older than `snapshot_id`: so does the bookkeeping."""
        self.durable = [s for s in self.durable if s >= snapshot_id]
        self.taken_ms = {s: t for s, t in self.taken_ms.items() if s >= snapshot_id}
        self.bytes_at = {s: b for s, b in self.bytes_at.items() if s >= snapshot_id}
        self.sizes = {s: n for s, n in self.sizes.items() if s >= snapshot_id}
