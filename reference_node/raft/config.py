"""`RaftConfig`: the core's settings, with Kafka's names and defaults, and the unsafe switches.

Theory of operation: each `Unsafe` switch reproduces a real defect, so that the harness can prove
that it catches it. A switch enters as text (a node's `unsafe=` key, `kraft simulate --unsafe`,
`kraft test --node-config unsafe=...`) and becomes an `Unsafe` member in one place, `Unsafe.parse`,
which refuses any name it does not know: a misspelt switch never silently does nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field


class Unsafe(enum.Enum):
    """A switch that turns a known defect on. The value is its kebab-case name."""

    description: str

    def __new__(cls, name: str, description: str) -> Unsafe:
        member = object.__new__(cls)
        member._value_ = name
        member.description = description
        return member

    # The order is the help texts' (and the simulator digest's) order.
    SKIP_FLUSH = "skip-flush", "acknowledge and count offsets before they are flushed (KAFKA-10533)"
    RESUME_LEADER_AFTER_RESTART = (
        "resume-leader-after-restart",
        "a restarted leader leads again in its old epoch (KAFKA-10527)",
    )
    EARLY_HIGH_WATERMARK = (
        "early-high-watermark",
        "commit before an entry of the leader's own epoch is replicated (KAFKA-12619)",
    )
    NO_CHECK_QUORUM = (
        "no-check-quorum", "a leader cut off from a majority never resigns (KAFKA-15489)"
    )
    FORGET_VOTE = "forget-vote", "grant a vote without persisting it"
    NO_LOG_CHECK = "no-log-check", "grant votes without the log up-to-date comparison"
    OBSERVER_CAMPAIGN = (
        "observer-campaign", "an observer whose fetches time out campaigns (KAFKA-17067)"
    )
    STALE_LEADER_READS = (
        "stale-leader-reads",
        "answer reads without confirming leadership (a node's `read.mode=leader` turns it on)",
    )
    SNAPSHOT_OFF_BY_ONE = (
        "snapshot-off-by-one",
        "a snapshot's id names one offset more than it holds (KAFKA-14618)",
    )
    SNAPSHOT_UNCOMMITTED = (
        "snapshot-uncommitted",
        "the image applies, and snapshots, entries above the high watermark",
    )
    DELETE_BEFORE_SNAPSHOT = (
        "delete-before-snapshot",
        "delete the log below a snapshot before the snapshot is durable",
    )

    LEADER_REMOVE_NO_RESIGN = (
        "leader-remove-no-resign",
        "a leader that removed itself leads on, counting itself toward the HW (KAFKA-16530)",
    )
    CONCURRENT_VOTER_CHANGES = (
        "concurrent-voter-changes",
        "accept a voter change while another is uncommitted",
    )
    ADD_UNFLUSHED_VOTER = (
        "add-unflushed-voter",
        "an observer fetches from its unflushed log end, so a promoted observer's unflushed "
        "entries count toward the HW (KAFKA-17332)",
    )
    NO_SELF_FENCE = (
        "no-self-fence", "a broker cut off from the active controller keeps serving"
    )
    ACCEPT_OLD_INCARNATION = (
        "accept-old-incarnation",
        "the controller accepts a registration from an older incarnation",
    )
    UNFENCE_BEFORE_CAUGHT_UP = (
        "unfence-before-caught-up",
        "the controller unfences a broker before its metadata offset reaches its registration",
    )

    @classmethod
    def names(cls) -> str:
        """The valid names, comma-separated, for help texts and error messages."""
        return ", ".join(switch.value for switch in cls)

    @classmethod
    def of(cls, switches: Iterable[Unsafe | str]) -> frozenset[Unsafe]:
        """Members, or their names, as switches; ValueError (one line) for an unknown name."""
        items = list(switches)
        by_name = {switch.value: switch for switch in cls}
        unknown = sorted(s for s in items if not isinstance(s, Unsafe) and s not in by_name)
        if unknown:
            raise ValueError(
                f"unknown unsafe switch(es) {', '.join(unknown)}; valid: {cls.names()}"
            )
        return frozenset(s if isinstance(s, Unsafe) else by_name[s] for s in items)

    @classmethod
    def parse(cls, text: str) -> frozenset[Unsafe]:
        """A comma list of names (`"skip-flush, no-check-quorum"`; empty gives none)."""
        return cls.of([part.strip() for part in text.split(",") if part.strip()])


@dataclass(frozen=True, slots=True)
class RaftConfig:
    """Kafka's `controller.quorum.*` settings (milliseconds) plus our switches.

    The check-quorum (leader progress) timeout is Kafka's: 1.5 x fetch timeout.
    """

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    append_linger_ms: int = 25
    """Kafka's default; the host honours it (reference_node/server/linger.py), the core has no
    clock of its own to linger with."""
    fetch_max_wait_ms: int = 500
    fetch_max_entries: int = 64
    """How many entries one Fetch response carries at most (Kafka bounds it by bytes)."""
    pre_vote: bool = True
    controller_listener: str | None = None
    """Kafka's default listener, the first of `controller.listener.names`: an UpdateRaftVoter
    must name the voter's endpoint on it (INVALID_REQUEST otherwise); None: any endpoint will
    do."""
    snapshot_max_record_bytes: int = 20 * 1024 * 1024
    """Kafka's `metadata.log.max.record.bytes.between.snapshots`: snapshot once this many bytes
    of records were applied since the last snapshot (record bytes as `entry_bytes` counts them)."""
    snapshot_interval_ms: int = 60 * 60 * 1000
    """Kafka's `metadata.log.max.snapshot.interval.ms`: snapshot once this long has passed since
    the last one, if anything was applied since (0 turns the timer off)."""
    retention_bytes: int = 100 * 1024 * 1024
    """Kafka's `metadata.max.retention.bytes`: while the log and the snapshots together hold
    more, the oldest snapshot goes and the log start offset moves up to the next one, never past
    the latest (-1: no limit)."""
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    """Kafka's `metadata.max.retention.ms`: while the snapshot at the log start offset is older,
    it goes and the log start offset moves up to the next one, never past the latest (-1: no
    limit)."""
    snapshot_chunk_bytes: int = 1024 * 1024
    """FetchSnapshot's MaxBytes: the most a follower asks for in one chunk."""
    broker_session_timeout_ms: int = 9000
    """`broker.session.timeout.ms`: the active controller fences a broker that has not
    heartbeaten for this long."""
    broker_heartbeat_interval_ms: int = 2000
    """`broker.heartbeat.interval.ms`: how often a broker heartbeats."""
    broker_heartbeat_timeout_ms: int = 12000
    """`broker.heartbeat.timeout.ms`: a broker fences itself after this long without an answered
    heartbeat. Longer than the session timeout (the proposal): the controller fences a silent
    broker before the broker stops serving, never the other way round."""
    unsafe: frozenset[Unsafe] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        # Names are accepted too (tests and older callers), but only names `Unsafe` knows.
        object.__setattr__(self, "unsafe", Unsafe.of(self.unsafe))
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms",
                     "snapshot_max_record_bytes", "snapshot_chunk_bytes",
                     "broker_session_timeout_ms", "broker_heartbeat_interval_ms",
                     "broker_heartbeat_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.broker_heartbeat_timeout_ms <= self.broker_session_timeout_ms:
            raise ValueError(
                f"broker.heartbeat.timeout.ms ({self.broker_heartbeat_timeout_ms}) must be longer "
                f"than broker.session.timeout.ms ({self.broker_session_timeout_ms}): a broker "
                "would fence itself before the controller fences it"
            )

    @property
    def check_quorum_timeout_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2

    def has(self, switch: Unsafe) -> bool:
        return switch in self.unsafe


RECORD_OVERHEAD_BYTES = 70
"""What one record costs beyond its value, as the snapshot and retention thresholds count bytes:
about a one-record batch's header and the record's own framing in Kafka's format."""


def entry_bytes(payload: bytes) -> int:
    """A record's size as the snapshot and retention thresholds count it."""
    return len(payload) + RECORD_OVERHEAD_BYTES
