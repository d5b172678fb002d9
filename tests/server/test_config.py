"""The node's .properties configuration: Kafka names, defaults, and errors that name the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reference_node.config import ConfigError, Endpoint, from_properties
from reference_node.properties import render

BASE = {
    "node.id": "1",
    "process.roles": "controller",
    "controller.quorum.voters": "1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095",
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "metadata.log.dir": "/tmp/x",
}


def test_defaults_are_kafkas() -> None:
    cfg = from_properties(BASE)
    assert cfg.node_id == 1
    assert cfg.voters[2] == Endpoint("127.0.0.1", 19094)
    assert cfg.listen == Endpoint("127.0.0.1", 9093)
    assert (cfg.election_timeout_ms, cfg.fetch_timeout_ms, cfg.election_backoff_max_ms) == (
        1000, 2000, 1000)
    assert (cfg.request_timeout_ms, cfg.retry_backoff_ms, cfg.append_linger_ms) == (2000, 20, 25)
    assert cfg.read_mode == "linearizable"
    assert cfg.metrics_port == 0
    assert cfg.cluster_id is None


def test_voter_and_listen_addresses_differ() -> None:
    cfg = from_properties(BASE)
    # the address others use to reach us (through a proxy) is not where we listen
    assert cfg.voters[1] != cfg.listen
    assert cfg.client_address(1) == cfg.listen
    assert cfg.client_address(2) == Endpoint("127.0.0.1", 19094)
    cfg2 = from_properties({**BASE, "client.voters": "2@127.0.0.1:9094"})
    assert cfg2.client_address(2) == Endpoint("127.0.0.1", 9094)


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("node.idd", "1", "node.id"),
        ("read.mode", "fast", "linearizable | leader"),
        ("controller.quorum.voters", "1:127.0.0.1", "ID@HOST:PORT"),
        ("listeners", "127.0.0.1:9093", "NAME://HOST:PORT"),
        ("controller.quorum.fetch.timeout.ms", "-5", "an integer in"),
        ("metrics.port", "http", "an integer in [0, 65535]"),
        ("process.roles", "broker,broker", "controller | broker | broker,controller"),
        ("process.roles", "zookeeper", "controller | broker | broker,controller"),
    ],
)
def test_bad_key_or_value_names_key_and_accepted(key: str, value: str, accepted: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_properties({**BASE, key: value})
    assert err.value.key == key
    assert accepted in str(err.value)


def test_missing_required_key() -> None:
    props = dict(BASE)
    del props["metadata.log.dir"]
    with pytest.raises(ConfigError, match=r"metadata\.log\.dir"):
        from_properties(props)


def test_cli_bad_config_exits_64(tmp_path: Path) -> None:
    conf = tmp_path / "n.properties"
    conf.write_text(render({**BASE, "read.mode": "eventual"}))
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "node", "--config", str(conf)],
        capture_output=True, text=True, timeout=30,
    )
    assert proc.returncode == 64
    assert "read.mode" in proc.stderr and "linearizable" in proc.stderr


def test_snapshot_keys_are_kafkas_with_kafkas_defaults_and_reach_the_core() -> None:
    from reference_node.server.node import raft_config

    cfg = from_properties(BASE)
    assert (cfg.snapshot_max_record_bytes, cfg.snapshot_interval_ms) == (20 << 20, 3_600_000)
    assert (cfg.retention_bytes, cfg.retention_ms) == (100 << 20, 7 * 24 * 3_600_000)
    custom = from_properties({**BASE,
                              "metadata.log.max.record.bytes.between.snapshots": "2000",
                              "metadata.log.max.snapshot.interval.ms": "0",
                              "metadata.max.retention.bytes": "-1",
                              "metadata.max.retention.ms": "0",
                              "controller.quorum.fetch.snapshot.max.bytes": "300",
                              "metadata.log.segment.bytes": "4096"})
    raft = raft_config(custom)
    assert (raft.snapshot_max_record_bytes, raft.snapshot_interval_ms) == (2000, 0)
    assert (raft.retention_bytes, raft.retention_ms, raft.snapshot_chunk_bytes) == (-1, 0, 300)
    assert custom.segment_bytes == 4096


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("metadata.log.max.record.bytes.between.snapshots", "0", "an integer in [1,"),
        ("metadata.log.max.snapshot.interval.ms", "-1", "an integer in [0,"),
        ("metadata.max.retention.bytes", "-5", "-1 (no limit) or a number of bytes >= 0"),
        ("metadata.max.retention.ms", "7d", "-1 (no limit) or a number of milliseconds >= 0"),
        ("controller.quorum.fetch.snapshot.max.bytes", "2147483648", "[1, 2147483647]"),
        ("controller.quorum.fetch.snapshot.max.bytes", "0", "[1, 2147483647]"),
        ("metadata.log.segment.bytes", "100", "an integer in [1024,"),
    ],
)
def test_bad_snapshot_settings_name_the_key_and_what_it_accepts(key: str, value: str,
                                                                accepted: str) -> None:
    with pytest.raises(ConfigError) as err:
        from_properties({**BASE, key: value})
    assert err.value.key == key
    assert accepted in str(err.value)
