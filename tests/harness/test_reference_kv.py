"""The kv workload's client and the truncated log against three real reference nodes (local
backend), with snapshot thresholds small enough that the log start moves within a test: kv
writes, cas and image reads; an append read below the log start; a lagging follower brought back
by a snapshot; the snapshot files a collect dumps."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts.target import Client
from harness.backends.local import LocalBackend
from harness.targets.reference import ReferenceDB, ReferenceTarget
from nemesis.base import Env
from nemesis.lagging import LaggingFollower
from testkit.targets import deployed, wait_for_leader

pytestmark = pytest.mark.slow
NODES = ["n1", "n2", "n3"]
# ~15 appends of small integers per snapshot (70 bytes of overhead each, raft/config.py), and the
# log start follows every durable snapshot
SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": "1000",
             "metadata.max.retention.bytes": "0"}
Op = dict[str, Any]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalBackend, ReferenceDB]]:
    with deployed(ReferenceTarget(), ReferenceDB, NODES, "reference-kv-test",
                  tmp_path_factory.mktemp("run"), SNAPSHOTS) as deployment:
        yield deployment


def _leader(env: Env) -> str:
    return wait_for_leader(env)


def _client(backend: LocalBackend, node: str, workload: str = "append") -> Client:
    client = ReferenceTarget().client(workload)
    client.open(backend, NODES, node)
    return client


def _until_ok(client: Client, f: str, value: dict[str, Any], seconds: float = 20) -> Op:
    """The op retried while it certainly failed (a follower's refusal, an election)."""
    deadline = time.monotonic() + seconds
    done: Op = {}
    while time.monotonic() < deadline:
        done = client.invoke({"process": 0, "type": "invoke", "f": f, "value": value}, 2.0)
        if done["type"] == "ok":
            return done
        assert done["type"] == "fail", done  # nothing here may leave an outcome unknown
        time.sleep(0.1)
    raise AssertionError(f"{f} {value} never ok: {done}")


def _append(client: Client, values: range) -> None:
    for value in values:
        _until_ok(client, "append", {"value": value})


def test_kv_write_cas_and_read_on_real_nodes(cluster: tuple[LocalBackend, ReferenceDB]) -> None:
    backend, db = cluster
    _leader(Env(backend, db, NODES))
    client = _client(backend, "n3", "kv")
    assert _until_ok(client, "write", {"key": 0, "value": 1})["value"] == {"key": 0, "value": 1}
    swapped = _until_ok(client, "cas", {"key": 0, "from": 1, "to": 2})
    assert swapped["value"]["swapped"] is True
    refused = _until_ok(client, "cas", {"key": 0, "from": 1, "to": 3})
    assert refused["value"] == {"key": 0, "from": 1, "to": 3, "swapped": False}
    absent = _until_ok(client, "cas", {"key": 5, "from": None, "to": 8})
    assert absent["value"]["swapped"] is True  # an empty key holds null
    assert _until_ok(client, "read", {"key": 0})["value"] == {"key": 0, "value": 2}
    assert _until_ok(client, "read", {"key": 5})["value"] == {"key": 5, "value": 8}
    assert _until_ok(client, "read", {"key": 9})["value"] == {"key": 9, "value": None}
    client.close()


def test_a_read_from_zero_starts_at_the_log_start_once_snapshots_truncated_the_log(
        cluster: tuple[LocalBackend, ReferenceDB]) -> None:
    backend, db = cluster
    client = _client(backend, _leader(Env(backend, db, NODES)))
    _append(client, range(10_000, 10_060))
    deadline = time.monotonic() + 30
    read: Op = {}
    while time.monotonic() < deadline:
        read = _until_ok(client, "read", {"from": 0})
        if read["value"]["from"] > 0:
            break
        time.sleep(0.3)
    value = read["value"]
    assert value["from"] > 0, f"the log start never moved: {read}"
    offsets = [o for o, _ in value["records"]]
    assert offsets == list(range(value["from"], value["hw"]))  # the whole log from its start
    assert 10_059 in [v for _, v in value["records"]]
    client.close()


def _events(db: ReferenceDB, backend: LocalBackend, node: str, into: Path) -> list[dict[str, Any]]:
    db.collect(backend, node, into)
    path = into / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_lagging_follower_comes_back_by_installing_a_snapshot(
        cluster: tuple[LocalBackend, ReferenceDB], tmp_path: Path) -> None:
    backend, db = cluster
    env = Env(backend, db, NODES)
    leader = _leader(env)
    fault = LaggingFollower(env, duration=60.0)
    choice = fault.choose(random.Random(1))
    lagging = choice["node"]
    assert lagging != leader
    fault.start(choice)
    try:
        client = _client(backend, leader)
        _append(client, range(20_000, 20_080))  # several snapshots, the log start past it
        client.close()
    finally:
        fault.stop()
    deadline = time.monotonic() + 30
    installs: list[dict[str, Any]] = []
    polls = 0
    while time.monotonic() < deadline and not installs:
        time.sleep(0.5)
        polls += 1
        collected = tmp_path / f"{lagging}-{polls}"  # collect copies events.jsonl once per dir
        events = _events(db, backend, lagging, collected)
        installs = [e for e in events if e.get("type") == "snapshot-install"]
    assert installs, f"{lagging} never installed a snapshot"
    assert any(e.get("type") == "fetch-snapshot" for e in events)
    final = json.loads((collected / "final.json").read_text())
    assert final["log_start_offset"] > 0
    snapshots = collected / "snapshots.jsonl"
    assert snapshots.exists(), "collect wrote no snapshots.jsonl"
    lines = [json.loads(line) for line in snapshots.read_text().splitlines()]
    assert lines and all(line["valid"] for line in lines)
    assert max(line["end_offset"] for line in lines) >= installs[-1]["end_offset"]
