"""RaftConfig defaults and the unsafe switch vocabulary."""

import pytest

from reference_node.raft.config import RaftConfig, Unsafe

EXPECTED = {
    "skip-flush", "resume-leader-after-restart", "early-high-watermark", "no-check-quorum",
    "forget-vote", "no-log-check", "observer-campaign", "stale-leader-reads",
    "snapshot-off-by-one", "snapshot-uncommitted", "delete-before-snapshot",
    "leader-remove-no-resign", "concurrent-voter-changes", "add-unflushed-voter",
    "no-self-fence", "accept-old-incarnation", "unfence-before-caught-up",
}


def test_defaults_are_kafkas() -> None:
    c = RaftConfig()
    assert (c.election_timeout_ms, c.fetch_timeout_ms, c.election_backoff_max_ms) == (1000, 2000, 1000)
    assert (c.request_timeout_ms, c.retry_backoff_ms, c.append_linger_ms) == (2000, 20, 25)
    assert c.pre_vote and c.unsafe == frozenset()
    assert c.check_quorum_timeout_ms == 3000


def test_switch_names_are_exactly_the_issues() -> None:
    assert {switch.value for switch in Unsafe} == EXPECTED
    assert all(switch.description for switch in Unsafe)


def test_parse_comma_list() -> None:
    assert Unsafe.parse(" skip-flush, no-check-quorum ,") == {
        Unsafe.SKIP_FLUSH, Unsafe.NO_CHECK_QUORUM
    }
    assert Unsafe.parse("") == frozenset()


def test_unknown_switch_lists_valid_ones_on_one_line() -> None:
    with pytest.raises(ValueError, match="bogus") as info:
        Unsafe.parse("skip-flush,bogus")
    message = str(info.value)
    assert "\n" not in message
    assert all(name in message for name in EXPECTED)
    with pytest.raises(ValueError, match="nope"):
        RaftConfig(unsafe=frozenset({"nope"}))  # type: ignore[arg-type]


def test_config_holds_members_whether_given_members_or_names() -> None:
    by_member = RaftConfig(unsafe=frozenset({Unsafe.FORGET_VOTE}))
    by_name = RaftConfig(unsafe=frozenset({"forget-vote"}))  # type: ignore[arg-type]
    assert by_member.unsafe == by_name.unsafe == {Unsafe.FORGET_VOTE}
    assert by_name.has(Unsafe.FORGET_VOTE) and not by_name.has(Unsafe.SKIP_FLUSH)


def test_read_mode_leader_is_named_in_the_switch_it_turns_on() -> None:
    assert "read.mode=leader" in Unsafe.STALE_LEADER_READS.description
