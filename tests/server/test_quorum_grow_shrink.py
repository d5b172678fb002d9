"""Issue 16, acceptance 3: a one-node `--standalone` quorum grows to three voters with
`kraft quorum add-controller` and shrinks back to one with `remove-controller`, driven only
through the command line (`kraft node format`, `kraft node`, `kraft quorum`), and judged by what
`kraft quorum describe --status / --replication` print.

The second test goes further: the grown quorum's leader stops, the two added voters elect a new
leader between them (their votes and BeginQuorumEpoch reach each other at the endpoints of the
VotersRecord), and the shrink removes whichever node leads when its turn comes, so a leader that
removes itself resigns once its removal commits (KAFKA-16530)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reference_node.voter_admin import kafka_uuid
from testkit.cluster import CLUSTER_ID

from .test_voter_rpcs import FAST, DynamicCluster

pytestmark = pytest.mark.slow


def kraft(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def quorum(cluster: DynamicCluster, *args: str, nodes: list[int] | None = None
           ) -> subprocess.CompletedProcess[str]:
    bootstrap = ",".join(f"127.0.0.1:{cluster.ports[i]}" for i in nodes or cluster.ids)
    return kraft("quorum", "--bootstrap-controller", bootstrap, "--timeout", "20", *args)


def status(cluster: DynamicCluster, nodes: list[int] | None = None) -> dict[str, Any]:
    """`describe --status`, each line's value (the replica lists as JSON)."""
    out = quorum(cluster, "describe", "--status", nodes=nodes)
    assert out.returncode == 0, out.stderr
    return parse_status(out.stdout)


def status_when(cluster: DynamicCluster, ready: Callable[[dict[str, Any]], bool],
                nodes: list[int] | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """The first `describe --status` that satisfies `ready`; until then the command may fail
    (nodes starting, an election)."""
    def check() -> dict[str, Any] | None:
        out = quorum(cluster, "describe", "--status", nodes=nodes)
        if out.returncode != 0:
            return None
        fields = parse_status(out.stdout)
        return fields if ready(fields) else None

    result: dict[str, Any] = until(check, timeout)
    return result


def parse_status(stdout: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for line in stdout.splitlines():
        name, _, value = line.partition(":")
        value = value.strip()
        fields[name] = json.loads(value) if name.startswith("Current") else value
    return fields


def replication(cluster: DynamicCluster) -> list[list[str]]:
    """`describe --replication`'s rows: NodeId, DirectoryId, ..., Status."""
    out = quorum(cluster, "describe", "--replication")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NodeId", "DirectoryId", "LogEndOffset", "Lag",
                                "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    return [line.split() for line in lines[1:]]


def until(check: Callable[[], Any], timeout: float = 30.0) -> Any:
    """The first truthy `check()`, polled until `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got or time.monotonic() > deadline:
            assert got, f"not within {timeout}s"
            return got
        time.sleep(0.2)


def replica(cluster: DynamicCluster, i: int, endpoint: bool) -> dict[str, Any]:
    """How `describe --status` lists node `i` (Kafka's layout): endpoints for voters only."""
    row: dict[str, Any] = {"id": i, "directoryId": kafka_uuid(cluster.directory_id(i))}
    if endpoint:
        row["endpoints"] = [f"CONTROLLER://127.0.0.1:{cluster.ports[i]}"]
    return row


def grow(cluster: DynamicCluster) -> dict[str, Any]:
    """Start the one-voter quorum and its two observers, add both with `add-controller`; the
    leader's `describe --status` once it has three voters."""
    cluster.start()
    first = status_when(cluster, lambda s: s["LeaderId"] == "1"
                        and len(s["CurrentObservers"]) == 2, nodes=[1])
    assert first["ClusterId"] == CLUSTER_ID
    assert first["CurrentVoters"] == [replica(cluster, 1, True)]
    for i in (2, 3):  # each observer, by its own configuration file
        out = quorum(cluster, "add-controller", "--config", str(cluster.config(i)), nodes=[1])
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == (
            f"Added controller {i} with directory id {kafka_uuid(cluster.directory_id(i))}"
            f" and endpoints: CONTROLLER://127.0.0.1:{cluster.ports[i]}")
    grown = status(cluster)
    assert grown["LeaderId"] == "1"
    assert grown["CurrentVoters"] == [replica(cluster, i, True) for i in (1, 2, 3)]
    assert grown["CurrentObservers"] == []
    rows = replication(cluster)
    assert [(r[0], r[1], r[-1]) for r in rows] == [
        ("1", kafka_uuid(cluster.directory_id(1)), "Leader"),
        ("2", kafka_uuid(cluster.directory_id(2)), "Follower"),
        ("3", kafka_uuid(cluster.directory_id(3)), "Follower")]
    return grown


def shrink(cluster: DynamicCluster, grown: dict[str, Any]) -> None:
    """Remove 2, then 3, with `remove-controller`; node 1 ends as the one voter and leader, the
    removed voters as observers."""
    for i in (2, 3):
        out = quorum(cluster, "remove-controller", "--controller-id", str(i),
                     "--controller-directory-id", kafka_uuid(cluster.directory_id(i)))
        assert out.returncode == 0, out.stderr
        # Kafka's line, its two spaces included ("Removed " + " KRaft controller")
        assert re.fullmatch(rf"Removed +KRaft controller {i} with directory id "
                            rf"{re.escape(kafka_uuid(cluster.directory_id(i)))}",
                            out.stdout.strip()), out.stdout
    shrunk = status_when(cluster, lambda s: s["LeaderId"] == "1"
                         and len(s["CurrentObservers"]) == 2)
    assert shrunk["CurrentVoters"] == [replica(cluster, 1, True)]
    # the removed voters stay on as observers, fetching from the one voter
    assert sorted(o["id"] for o in shrunk["CurrentObservers"]) == [2, 3]
    assert int(shrunk["HighWatermark"]) > int(grown["HighWatermark"])


def test_standalone_quorum_grows_to_three_and_shrinks_back_to_one(tmp_path: Path) -> None:
    cluster = DynamicCluster(tmp_path, extra=FAST)
    try:
        shrink(cluster, grow(cluster))
        # and the last voter cannot be removed: one line, exit 1, nothing changed
        out = quorum(cluster, "remove-controller", "--controller-id", "1",
                     "--controller-directory-id", kafka_uuid(cluster.directory_id(1)))
        assert out.returncode == 1
        assert out.stderr.count("\n") == 1 and "VOTER_NOT_FOUND" in out.stderr
        assert status(cluster)["CurrentVoters"] == [replica(cluster, 1, True)]
    finally:
        cluster.stop_all()


def test_added_voters_elect_a_leader_that_changes_voters(tmp_path: Path) -> None:
    """The grown quorum is a real one: without node 1 the two added voters elect one of them
    (votes and BeginQuorumEpoch reach them at the VotersRecord's endpoints), node 1 comes back
    as a follower, and the shrink removes whoever leads: a leader that removes itself resigns
    once its removal commits."""
    cluster = DynamicCluster(tmp_path, extra=FAST)
    try:
        grown = grow(cluster)
        assert cluster.terminate(1) == 0
        failover = status_when(cluster, lambda s: s["LeaderId"] in ("2", "3"), nodes=[2, 3])
        assert [v["id"] for v in failover["CurrentVoters"]] == [1, 2, 3]
        cluster.start(1)  # back as a follower: the voter set says where the leader is
        until(lambda: any(r[0] == "1" and r[-1] == "Follower" and r[3] == "0"
                          for r in replication(cluster)))
        shrink(cluster, grown)
    finally:
        cluster.stop_all()
