"""The results store's layout and `latest`, and the parsing of test options."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from harness.config import TestConfig, UsageError, parse_list, parse_node_config, parse_nodes
from harness.store import create_run_dir, valid_name


def test_run_dirs_are_named_by_start_time_and_latest_follows(tmp_path: Path) -> None:
    first = create_run_dir(tmp_path, "t", dt.datetime(2026, 1, 2, 3, 4, 5, 6))
    assert first == tmp_path / "t" / "20260102T030405.000006"
    second = create_run_dir(tmp_path, "u", dt.datetime(2026, 1, 2, 3, 4, 6))
    assert (tmp_path / "latest").resolve() == second.resolve()
    assert not (tmp_path / "latest").readlink().is_absolute()
    assert (first / "nodes").is_dir()


def test_options_parse_or_say_what_is_wrong() -> None:
    assert parse_nodes("3") == ["n1", "n2", "n3"]
    assert parse_nodes("a,b") == ["a", "b"]
    assert parse_list("--nemesis", "kill,pause,kill", ("pause", "kill"), True) == ["kill", "pause"]
    assert parse_list("--nemesis", "none", ("pause",), True) == []
    assert parse_node_config(["unsafe=skip-flush", "a = b"]) == {"unsafe": "skip-flush", "a": "b"}
    for bad in (lambda: parse_nodes("a,a"), lambda: parse_nodes("99"),
                lambda: parse_list("--nemesis", "x", ("pause",), True),
                lambda: parse_node_config(["=x"])):
        with pytest.raises(UsageError):
            bad()
    assert not valid_name("latest") and not valid_name("../x") and valid_name("my-test.1")


def test_every_random_choice_derives_from_the_recorded_seed() -> None:
    config = TestConfig(seed=9)
    assert config.seeds() == TestConfig(seed=9).seeds() != TestConfig(seed=10).seeds()
    data = config.to_json()
    assert data["seed"] == 9 and data["seeds"] == config.seeds()
    assert data["concurrency"] == 6 and data["name"] == "reference-append-partition+pause+kill"
