"""What crosses between the core and its host: inputs, the persisted quorum state, and `Ready`.

Imported by the core and re-exported from `reference_node.raft.core`; see `Ready` for the order in
which a host must carry out the core's output.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

from reference_node.raft.image import Image
from reference_node.raft.messages import Entry, ErrorCode, Message, SnapshotId
from reference_node.raft.records import BrokerInfo
from reference_node.raft.voters import Voter, VoterSet

# --- inputs ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tick:
    """Time has passed: the host's clock now reads `now_ms` (monotonic, milliseconds)."""

    now_ms: int


@dataclass(frozen=True, slots=True)
class Receive:
    """A message arrived from node `src` (a request to answer, or a response to one we sent).

    `in_reply_to`: for a response, the request it answers, when the host pairs them by correlation
    id (the server and the simulator do). The core then ignores an answer to a Fetch that is no
    longer the latest in flight, as Kafka's RequestManager does: a DivergingEpoch computed for an
    older fetch offset would truncate what the follower fetched since.
    """

    src: int
    message: Message
    in_reply_to: Message | None = None


@dataclass(frozen=True, slots=True)
class ClientAppend:
    """A client asks to append `payloads` (one entry each). Answered by an `AppendReply` once the
    entries are committed, or at once with an error when this node is not the leader."""

    request_id: int
    payloads: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class ClientRead:
    """A linearizable read of the committed log from `from_offset`, or with `image`, of the
    state machine's kv map and brokers (the `kv` workload's reads, the `__brokers` view on a
    controller). Answered by a `ReadReply`."""

    request_id: int
    from_offset: int
    image: bool = False


@dataclass(frozen=True, slots=True)
class LogFlushed:
    """The host's flush finished: every entry below `end_offset` is durable."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class Shutdown:
    """Graceful shutdown: a leader resigns and sends EndQuorumEpoch to the voters; a broker starts
    its controlled shutdown (heartbeats want_shutdown). The host keeps stepping the core until
    `RaftCore.shutdown_complete` (the next leader is known: the voters have heard, and this node's
    vote was there for the successor; a broker: the controller said should_shut_down) or its
    shutdown timeout passes."""


@dataclass(frozen=True, slots=True)
class SnapshotWritten:
    """The snapshot `Ready.snapshot_write` asked for is durable (written to a temp file, fsynced,
    renamed, directory fsynced): the core may now count it, serve it and delete below it."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class SnapshotLoaded:
    """The snapshot the core downloaded (`Ready.snapshot_received`) passed the host's checks and
    is durable on disk; `image` is its content. The core installs it."""

    snapshot_id: SnapshotId
    image: Image


@dataclass(frozen=True, slots=True)
class SnapshotRefused:
    """The downloaded snapshot failed the host's checks (bad CRC, missing footer, an id its
    content does not match): the core discards it and asks the leader again."""

    snapshot_id: SnapshotId
    reason: str


@dataclass(frozen=True, slots=True)
class AddVoter:
    """KIP-853's AddRaftVoter, on the leader: make replica `voter` (id, directory id, endpoints) a
    voter if it is caught up now. Answered by a `VoterChangeReply` when the new set commits, or
    with Kafka's error (NOT_LEADER_OR_FOLLOWER, UNSUPPORTED_VERSION, REQUEST_TIMED_OUT while
    another change is uncommitted or when the replica is not caught up, DUPLICATE_VOTER)."""

    request_id: int
    voter: Voter
    timeout_ms: int | None = None
    """Kafka's TimeoutMs: how long the server waits for the change to commit (the core checks
    the replica once, as Kafka's AddVoterHandler does); None: the request timeout."""


@dataclass(frozen=True, slots=True)
class RemoveVoter:
    """KIP-853's RemoveRaftVoter, on the leader: the replica (`voter_id`, `directory_id`) stops
    voting. VOTER_NOT_FOUND when it is not a voter, or is the last one. A leader that removes
    itself leads on until the new set commits, then resigns."""

    request_id: int
    voter_id: int
    directory_id: uuid.UUID | None


Input = (
    Tick | Receive | ClientAppend | ClientRead | LogFlushed | Shutdown | SnapshotWritten
    | SnapshotLoaded | SnapshotRefused | AddVoter | RemoveVoter
)


class SnapshotStore(Protocol):
    """The host's durable snapshots, as the core reads them (synchronously, as it reads
    `StoredEntries`): to answer FetchSnapshot. Only snapshots the host reported durable
    (`SnapshotWritten`, `SnapshotLoaded`, or found valid at start) are asked for."""

    def size(self, snapshot_id: SnapshotId) -> int | None:
        """The snapshot file's size in bytes, or None when the host does not have it."""

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> bytes:
        """Up to `max_bytes` of the file from `position` (fewer only at its end)."""

# --- outputs --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuorumState:
    """The quorum-state file (KIP-595): the current epoch, its leader and this node's vote.

    `leader_epoch` is the node's current epoch, even when the leader is unknown.
    """

    leader_epoch: int = 0
    leader_id: int | None = None
    voted_id: int | None = None


@dataclass(frozen=True, slots=True)
class Send:
    """A message to node `dst`. A response names the request it answers (`in_reply_to`, the very
    object the core received): the host answers that request, whatever order the core answers in
    (a parked Fetch is answered after later requests)."""

    dst: int
    message: Message
    in_reply_to: Message | None = None


@dataclass(frozen=True, slots=True)
class AppendReply:
    """Answer to `ClientAppend`.

    On success `offsets` are the committed offsets (one per payload) and `error` is NONE. On error
    `offsets` is empty; `indeterminate` is True when the entries were appended but this node lost
    leadership before they committed (they may still commit: the harness records `info`), False when
    they were certainly not appended (`fail`). `leader_id` / `leader_epoch` are a hint.
    """

    request_id: int
    error: ErrorCode
    offsets: tuple[int, ...] = ()
    indeterminate: bool = False
    leader_id: int | None = None
    leader_epoch: int = 0
    outcomes: tuple[str | None, ...] = ()
    """On success, per offset: what applying it did (`Image.apply`): "ok", "swapped",
    "not-swapped" for kv commands, None for opaque data."""


@dataclass(frozen=True, slots=True)
class ReadReply:
    """Answer to `ClientRead`: the entries in [from_offset, high_watermark), control records
    included (readers map them to null), or an error with a leader hint."""

    request_id: int
    error: ErrorCode
    high_watermark: int = -1
    records: tuple[Entry, ...] = ()
    leader_id: int | None = None
    leader_epoch: int = 0
    kv: tuple[tuple[Hashable, Any], ...] | None = None
    """For a `ClientRead(image=True)`: the kv map at `high_watermark`, as sorted pairs."""
    brokers: tuple[BrokerInfo, ...] | None = field(default=None, repr=False)
    """For a `ClientRead(image=True)`: the image's brokers at `high_watermark`, ascending id
    (None when it has none: read it as empty)."""


@dataclass(frozen=True, slots=True)
class VoterChangeReply:
    """Answer to `AddVoter` or `RemoveVoter`: NONE once the new voter set is
    committed, else Kafka's error with a one-line `message` (Kafka's ErrorMessage)."""

    request_id: int
    error: ErrorCode
    message: str | None = None
    leader_id: int | None = None
    leader_epoch: int = 0


ClientReply = AppendReply | ReadReply | VoterChangeReply


TRUNCATION_BELOW_HIGH_WATERMARK = "truncation-below-high-watermark"


@dataclass(frozen=True, slots=True)
class Fatal:
    """The core cannot go on without breaking a safety rule (`Ready.fatal`): `name` says which,
    `detail` the facts. The only one: TRUNCATION_BELOW_HIGH_WATERMARK, the leader asked this
    replica to truncate entries it knows are committed (or has applied to its image), evidence
    of a broken quorum (Kafka's `handleFetchResponse` throws a KafkaException there)."""

    name: str
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}"


@dataclass(frozen=True, slots=True)
class SnapshotWrite:
    """A snapshot to write: `image` (a copy: the core goes on applying) under `snapshot_id`.

    `snapshot_id` is `image.snapshot_id` but for the `snapshot-off-by-one` switch; `high_watermark`
    is the core's when it asked (a snapshot never goes past it but for `snapshot-uncommitted`)."""

    snapshot_id: SnapshotId
    image: Image
    high_watermark: int


@dataclass(slots=True)
class Ready:
    """Everything the core wants done since the last `advance`. The host MUST act in this order:

    1. `quorum_state`, when not None: write the quorum-state file and fsync it.
    2. `log_reset`, when not None: a downloaded snapshot was installed (it is durable: the host
       said so with `SnapshotLoaded`). Remove the whole log; it now starts, empty, at
       `log_reset.end_offset`; delete every snapshot older than it.
    3. `truncate_to`, when not None: remove every log entry at or after that offset.
    4. `entries`: append them to the log (in order; they follow the truncation).
    5. `flush`: when True, start a flush of the log; when it is done, step `LogFlushed(end)` with
       the log end offset it covered. The flush may finish later: messages need not wait for it.
    6. `snapshot_write`, when not None: write this image as snapshot `snapshot_write.snapshot_id`
       (temp file, fsync, rename, fsync the directory), in the background; step
       `SnapshotWritten(id)` when it is durable.
    7. `snapshot_received`, when not None: the bytes of a snapshot downloaded from the leader.
       Check them (CRC, header, footer, the id against the content), write them durably, and
       step `SnapshotLoaded(id, image)`, or `SnapshotRefused(id, reason)`.
    8. `delete_before`, when not None: the log start offset moves up to
       `delete_before.end_offset` (a durable snapshot covers what is below): delete the segments
       wholly below it and every snapshot older than `delete_before`.
    9. `voters`, when not None: the voter set in effect changed (a VotersRecord was appended,
       truncated away, or came with an installed snapshot): learn the voters' endpoints from it,
       so that this Ready's messages reach a voter just added.
    10. `messages`: send them (only now: a vote or an epoch must be durable before anyone hears it).
    11. `replies`: answer the clients.
    12. `events`: write them to events.jsonl, adding `ts` and `node` (docs/contracts.md).
    13. `fatal`, when not None: the core cannot go on (`Fatal`); what came before it in this
        Ready stands, and its events say why (a `fatal` event). Stop the node (non-zero exit):
        the core steps no input any more and asks for nothing more.

    Then call `advance(ready)`. Step no input between `ready()` and `advance()`.
    """

    quorum_state: QuorumState | None = None
    truncate_to: int | None = None
    entries: list[Entry] = field(default_factory=list)
    flush: bool = False
    snapshot_write: SnapshotWrite | None = None
    snapshot_received: tuple[SnapshotId, bytes] | None = None
    log_reset: SnapshotId | None = None
    delete_before: SnapshotId | None = None
    voters: VoterSet | None = None
    messages: list[Send] = field(default_factory=list)
    replies: list[ClientReply] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    fatal: Fatal | None = None

    def __bool__(self) -> bool:
        return bool(
            self.quorum_state is not None
            or self.truncate_to is not None
            or self.snapshot_write is not None
            or self.snapshot_received is not None
            or self.log_reset is not None
            or self.delete_before is not None
            or self.voters is not None
            or self.entries
            or self.flush
            or self.messages
            or self.replies
            or self.events
            or self.fatal is not None
        )


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """One row of DescribeQuorum: a replica's progress as the leader sees it (-1 when unknown)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """What DescribeQuorum needs. Progress rows are only known on the leader (empty elsewhere)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
    voter_set: VoterSet | None = None
    """The voter set in effect (with endpoints): DescribeQuorum v2's Nodes."""
    kraft_version: int = 0
