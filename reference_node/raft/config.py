"""`RaftConfig`: the core's settings, with Kafka's names and defaults, and the unsafe switches."""

from __future__ import annotations

from dataclasses import dataclass, field

UNSAFE_SWITCHES: dict[str, str] = {
    "skip-flush": "acknowledge and count offsets before they are flushed (KAFKA-10533)",
    "resume-leader-after-restart": "a restarted leader leads again in its old epoch (KAFKA-10527)",
    "early-high-watermark": "commit before an entry of the leader's own epoch is replicated "
    "(KAFKA-12619)",
    "no-check-quorum": "a leader cut off from a majority never resigns (KAFKA-15489)",
    "forget-vote": "grant a vote without persisting it",
    "no-log-check": "grant votes without the log up-to-date comparison",
    "observer-campaign": "an observer whose fetches time out campaigns (KAFKA-17067)",
    "stale-leader-reads": "answer reads without confirming leadership",
}
"""Each switch reproduces a real defect, so that the harness can prove that it catches it."""


def validate_unsafe(names: frozenset[str]) -> frozenset[str]:
    unknown = sorted(names - UNSAFE_SWITCHES.keys())
    if unknown:
        raise ValueError(
            f"unknown unsafe switch(es) {', '.join(unknown)}; valid: {', '.join(UNSAFE_SWITCHES)}"
        )
    return names


def parse_unsafe(text: str) -> frozenset[str]:
    """Parse a comma list of switch names (`"skip-flush, no-check-quorum"`; empty gives none)."""
    names = frozenset(part.strip() for part in text.split(",") if part.strip())
    return validate_unsafe(names)


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
    fetch_max_wait_ms: int = 500
    fetch_max_entries: int = 64
    """How many entries one Fetch response carries at most (Kafka bounds it by bytes)."""
    pre_vote: bool = True
    unsafe: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        validate_unsafe(frozenset(self.unsafe))
        for name in ("election_timeout_ms", "fetch_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def check_quorum_timeout_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2

    def has(self, switch: str) -> bool:
        return switch in self.unsafe
