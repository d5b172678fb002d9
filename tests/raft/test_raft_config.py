"""RaftConfig defaults and the unsafe switch vocabulary."""

import pytest

from reference_node.raft.config import UNSAFE_SWITCHES, RaftConfig, parse_unsafe

EXPECTED = {
    "skip-flush", "resume-leader-after-restart", "early-high-watermark", "no-check-quorum",
    "forget-vote", "no-log-check", "observer-campaign", "stale-leader-reads",
}


def test_defaults_are_kafkas() -> None:
    c = RaftConfig()
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms) == (1000, 2000, 1000)
    assert (c.request_timeout_ms, c.retry_backoff_ms, c.append_linger_ms) == (2000, 20, 25)
    assert c.pre_vote and c.unsafe == frozenset()
    assert c.check_quorum_timeout_ms == 3000


def test_switch_names_are_exactly_the_issues() -> None:
    assert set(UNSAFE_SWITCHES) == EXPECTED


def test_parse_comma_list() -> None:
    assert parse_unsafe(" skip-flush, no-check-quorum ,") == {"skip-flush", "no-check-quorum"}
    assert parse_unsafe("") == frozenset()


def test_unknown_switch_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="bogus") as info:
        parse_unsafe("skip-flush,bogus")
    assert "forget-vote" in str(info.value)
    with pytest.raises(ValueError):
        RaftConfig(unsafe=frozenset({"nope"}))
