"""The messages the Raft core exchanges, and the entries of its log.

These are our own frozen, slotted dataclasses, field for field the partition-level data of Kafka's
Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch (KIP-595, KIP-996 for PreVote, KIP-853 for
VoterId), FetchSnapshot (KIP-630) and UpdateRaftVoter (KIP-853). The server host maps them to and from kio's wire types; the simulator passes them as they
are. Topic name and partition index are left out: there is one partition, `__cluster_metadata-0`.

Error codes are Kafka's (`kio.schema.errors.ErrorCode`, re-exported here as `ErrorCode`); the
table of which code answers what: docs/internals/raft.md#messages. The broker messages
(BrokerRegistration, BrokerHeartbeat) are the controller's, not Raft's: the core routes them to
raft/controller.py and raft/lifecycle.py before the rules of that table.

Every response carries `leader_id` / `leader_epoch`: the responder's current knowledge, so that a
stale node learns of the new epoch from any answer (`leader_id` is -1 when no leader is known).
Every request names its `sender` and the `epoch` it claims, whatever Kafka calls those fields.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

__all__ = [
    "NO_LEADER",
    "RESPONSE_TO",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "BrokerHeartbeatRequest",
    "BrokerHeartbeatResponse",
    "BrokerRegistrationRequest",
    "BrokerRegistrationResponse",
    "BrokerRequest",
    "BrokerResponse",
    "DivergingEpoch",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "Entry",
    "EntryKind",
    "ErrorCode",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "LeaderChange",
    "Message",
    "Request",
    "Response",
    "SnapshotId",
    "UpdateVoterRequest",
    "UpdateVoterResponse",
    "VoteRequest",
    "VoteResponse",
    "error_response",
]

NO_LEADER = -1
"""Kafka's value for "no leader known" in LeaderId fields."""


class EntryKind(enum.Enum):
    """What a log entry holds: client data, or a control record."""

    DATA = "data"
    LEADER_CHANGE = "leader-change"
    """Written by a new leader as the first entry of its epoch (KIP-595); lets the HW advance."""
    KRAFT_VERSION = "kraft-version"
    """Kafka's KRaftVersionRecord (KIP-853): the `kraft.version` feature level, as decimal text."""
    VOTERS = "voters"
    """Kafka's VotersRecord (KIP-853): the whole voter set, as `VoterSet.encode()`. In effect from
    the moment it is appended (not committed); undone by a truncation that removes it."""
    CONTROL = "control"
    """Any other control record (a type this node does not interpret, e.g. one a newer Kafka
    writes): replicated and stored byte for byte under its own type, never read as anything else."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One record of the replicated log.

    `offset` is its position (0-based, dense), `epoch` the leader epoch that appended it. For
    `EntryKind.DATA` the payload is the record value as the client gave it (the `append` workload
    uses the ASCII decimal of an integer); for LEADER_CHANGE it is `LeaderChange.encode()`; for
    CONTROL the control record's value as it was written, with its type in `control_type`.
    """

    offset: int
    epoch: int
    kind: EntryKind
    payload: bytes
    control_type: int | None = None
    """Kafka's ControlRecordType of an `EntryKind.CONTROL` entry (None for the other kinds)."""

    @property
    def is_control(self) -> bool:
        return self.kind is not EntryKind.DATA


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The LeaderChange control record's content (Kafka's LeaderChangeMessage): the leader, the
    voters of its epoch, and the voters that granted it their vote (the leader among them).

    Kept as a small text in the entry's payload so that the core stays free of wire codecs; the
    host writes Kafka's LeaderChangeMessage to disk and the wire (server/translate.py).
    """

    leader_id: int
    voters: tuple[int, ...] = ()
    granting_voters: tuple[int, ...] = ()

    def encode(self) -> bytes:
        def ids(values: tuple[int, ...]) -> str:
            return ",".join(str(v) for v in values)

        return f"{self.leader_id};{ids(self.voters)};{ids(self.granting_voters)}".encode()

    @classmethod
    def decode(cls, payload: bytes) -> LeaderChange:
        """The inverse of `encode`; a bare leader id (the older payload) reads as no voters."""
        leader, _, rest = payload.decode().partition(";")
        voters, _, granting = rest.partition(";")

        def ids(text: str) -> tuple[int, ...]:
            return tuple(int(v) for v in text.split(",") if v)

        return cls(int(leader), ids(voters), ids(granting))


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """A snapshot's name (KIP-630): it holds every entry below `end_offset`, the last of which
    has epoch `epoch`. On disk: `<end_offset %020d>-<epoch %010d>.checkpoint`."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    """Fetch response field: the leader's log has epoch `epoch` ending at `end_offset` (exclusive),
    and the fetcher's log diverges after it. The fetcher truncates (see `RaftLog.truncate_to_diverging`)."""

    epoch: int
    end_offset: int


# --- Vote (KIP-595, PreVote from KIP-996) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """Ask for a vote (or, with `pre_vote`, ask whether a vote would be granted, without any state
    change on the receiver).

    `candidate_epoch` is the sender's current epoch (Kafka's ReplicaEpoch): the one a candidate
    runs in, or a prospective's, unchanged by its pre-vote (Kafka's buildVoteRequest).
    `last_offset_epoch` / `last_offset` describe the candidate's log: the epoch of its last entry and
    its log end offset (Kafka sends the end offset, i.e. last offset + 1). `voter_id` and
    `voter_directory_id` are the intended receiver's replica key as the candidate knows it
    (KIP-853), -1 / None when not set: a replica whose disk was wiped (a new directory id) is not
    the voter it replaced, and must not vote as it. `candidate_directory_id` is the sender's own
    (Kafka's ReplicaDirectoryId, Vote v1+), None when it has none.
    """

    cluster_id: str | None
    candidate_epoch: int
    candidate_id: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool = False
    voter_id: int = -1
    voter_directory_id: uuid.UUID | None = None
    candidate_directory_id: uuid.UUID | None = None

    @property
    def sender(self) -> int:
        return self.candidate_id

    @property
    def epoch(self) -> int:
        return self.candidate_epoch


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool
    pre_vote: bool = False
    """Echo of the request's PreVote flag, so that a late answer is never counted for the wrong
    kind of round (Kafka matches them by correlation id)."""


# --- BeginQuorumEpoch -----------------------------------------------------------------------------


class _FromLeader:
    """BeginQuorumEpoch and EndQuorumEpoch: sent by the leader of the epoch they name."""

    __slots__ = ()
    leader_id: int
    leader_epoch: int

    @property
    def sender(self) -> int:
        return self.leader_id

    @property
    def epoch(self) -> int:
        return self.leader_epoch


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest(_FromLeader):
    """Sent by a leader to each voter when elected, then every fetch timeout / 2 to each voter
    that has not fetched from it in that time (Kafka's heartbeat, KAFKA-16536/16926)."""

    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    voter_id: int = -1
    voter_directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int


# --- EndQuorumEpoch -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest(_FromLeader):
    """Sent by a resigning leader to every voter. `preferred_successors` is ordered by replicated
    offset, most up to date first; a successor's election delay grows with its position."""

    cluster_id: str | None
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]
    successor_directory_ids: tuple[uuid.UUID | None, ...] = ()
    """KIP-853: the directory id of each preferred successor, in that order (Kafka's
    PreferredCandidates, v1+; None: not known); empty when not sent (v0). A listed id whose
    directory is known and not the receiver's is not the receiver (endEpochElectionBackoff)."""


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int


# --- Fetch ----------------------------------------------------------------------------------------


class _FromReplica:
    """Fetch and FetchSnapshot: sent by a follower or observer, in the epoch it believes in."""

    __slots__ = ()
    replica_id: int
    current_leader_epoch: int

    @property
    def sender(self) -> int:
        return self.replica_id

    @property
    def epoch(self) -> int:
        return self.current_leader_epoch


@dataclass(frozen=True, slots=True)
class FetchRequest(_FromReplica):
    """A follower's or observer's pull.

    `replica_id` is the fetcher; `current_leader_epoch` is the epoch the fetcher believes in (Kafka's
    FetchPartition.CurrentLeaderEpoch); `fetch_offset` the next offset it wants (= its flushed log
    end offset); `last_fetched_epoch` the epoch of the entry just before `fetch_offset` (0 for an
    empty log); `max_wait_ms` how long the leader may park the fetch when it has nothing new.
    """

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int = 500
    replica_directory_id: uuid.UUID | None = None
    """KIP-853: the fetcher's directory id (Kafka's ReplicaDirectoryId); None when not sent. The
    leader keys its progress by (`replica_id`, this): AddRaftVoter adds a replica it has seen
    caught up."""


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """`records` are contiguous entries starting at the request's fetch offset (empty when there is
    nothing new, on error, or when `diverging_epoch` is set). `high_watermark` is -1 while the
    leader does not know it yet (no entry of its epoch committed)."""

    error: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int = -1
    log_start_offset: int = 0
    records: tuple[Entry, ...] = ()
    diverging_epoch: DivergingEpoch | None = None
    snapshot_id: SnapshotId | None = None
    """KIP-630: the fetch offset is below the leader's log start offset (or the logs diverge
    below it): fetch this snapshot with FetchSnapshot, install it, and fetch on from its end."""


# --- FetchSnapshot (KIP-630) ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest(_FromReplica):
    """Ask the leader for the bytes of snapshot `snapshot_id` from `position` (at most
    `max_bytes`). Sent by a follower or observer that a Fetch answered with a SnapshotId."""

    cluster_id: str | None
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int
    replica_directory_id: uuid.UUID | None = None
    """KIP-853: the fetcher's directory id (FetchSnapshot v1's ReplicaDirectoryId); None when not
    sent. As for Fetch, the leader counts the contact only from the voter of that directory."""


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """A chunk of a snapshot's file: `data` is its bytes from `position`; `size` is the whole
    file's. Kafka's UnalignedRecords: a chunk need not end on a batch boundary."""

    error: ErrorCode
    leader_id: int
    leader_epoch: int
    snapshot_id: SnapshotId | None = None
    size: int = 0
    position: int = 0
    data: bytes = b""


# --- UpdateRaftVoter (KIP-853) ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """A voter tells the leader where it listens and which `kraft.version` levels it supports,
    when the voter set in effect says otherwise (Kafka's pollFollowerAsVoter). `listeners` are
    (name, host, port); `kraft_versions` the lowest and highest level supported. The leader
    appends a VotersRecord with the voter so updated, and answers at once."""

    cluster_id: str | None
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: uuid.UUID | None
    listeners: tuple[tuple[str, str, int], ...]
    kraft_versions: tuple[int, int]

    @property
    def sender(self) -> int:
        return self.voter_id

    @property
    def epoch(self) -> int:
        return self.current_leader_epoch


@dataclass(frozen=True, slots=True)
class UpdateVoterResponse:
    error: ErrorCode
    leader_id: int
    leader_epoch: int


# --- ApiVersions: the leader's check of a replica it adds (KIP-853) ---------------------------------


@dataclass(frozen=True, slots=True)
class ApiVersionsRequest:
    """Kafka's AddVoterHandler asks the replica it is about to add which `kraft.version` levels it
    supports. The replica is in no voter set yet: `listeners` ((name, host, port), from the
    AddRaftVoter) say where a host reaches it. A core answers it with its own levels; the server
    answers it on the wire, before the core, with the same."""

    listeners: tuple[tuple[str, str, int], ...]


@dataclass(frozen=True, slots=True)
class ApiVersionsResponse:
    error: ErrorCode
    kraft_versions: tuple[int, int] | None = None
    """The replica's supported `kraft.version` levels (its SupportedFeatures' kraft.version),
    lowest and highest; None when it lists none."""


# --- BrokerRegistration / BrokerHeartbeat (the controller's, KIP-631) --------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    """A broker (a metadata-log observer) asks the active controller to register this process:
    its id, which incarnation (a UUID made at process start) and its client listener.
    Answered once the register-broker record commits; its offset is the broker epoch."""

    sender: int
    """The broker id."""
    cluster_id: str | None
    incarnation: uuid.UUID
    host: str
    port: int
    """The broker's client listener (Kafka's Listeners[0])."""


@dataclass(frozen=True, slots=True)
class BrokerRegistrationResponse:
    error: ErrorCode
    broker_epoch: int = -1


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    """A registered broker's periodic heartbeat: renews its session on the controller, reports how
    far it has applied the metadata log, and asks to be fenced or to shut down."""

    sender: int
    """The broker id."""
    broker_epoch: int
    metadata_offset: int
    """The last offset the broker's image applied, inclusive (-1: none); Kafka's
    CurrentMetadataOffset (`lifecycle.last_applied`)."""
    want_fence: bool = False
    want_shutdown: bool = False


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatResponse:
    error: ErrorCode
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shut_down: bool = False


BrokerRequest = BrokerRegistrationRequest | BrokerHeartbeatRequest
BrokerResponse = BrokerRegistrationResponse | BrokerHeartbeatResponse


Request = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest
    | FetchSnapshotRequest | UpdateVoterRequest
)
Response = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse
    | FetchSnapshotResponse | UpdateVoterResponse
)
Message = (
    Request | Response | BrokerRequest | BrokerResponse | ApiVersionsRequest | ApiVersionsResponse
)
"""What the core receives and sends. `Request` and `Response` are Raft's only (they name an epoch
and a leader); the broker messages and ApiVersions are routed apart."""

RESPONSE_TO: dict[type, type] = {
    VoteRequest: VoteResponse,
    BeginQuorumEpochRequest: BeginQuorumEpochResponse,
    EndQuorumEpochRequest: EndQuorumEpochResponse,
    FetchRequest: FetchResponse,
    FetchSnapshotRequest: FetchSnapshotResponse,
    UpdateVoterRequest: UpdateVoterResponse,
    ApiVersionsRequest: ApiVersionsResponse,
    BrokerRegistrationRequest: BrokerRegistrationResponse,
    BrokerHeartbeatRequest: BrokerHeartbeatResponse,
}
"""Each request type and the response type that answers it: the one copy hosts share (the
server pairs answers with waiting requests by it, the simulator drops unasked responses by it)."""


def error_response(request: Request, error: ErrorCode, leader_id: int, epoch: int) -> Response:
    """The answer that refuses `request` with `error`, naming the responder's leader and epoch."""
    if isinstance(request, VoteRequest):
        return VoteResponse(error, leader_id, epoch, False, request.pre_vote)
    response: Response = RESPONSE_TO[type(request)](error, leader_id, epoch)
    return response
