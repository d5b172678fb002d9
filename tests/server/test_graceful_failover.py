"""Graceful shutdown of real node processes: a SIGTERM'd leader tells the voters (EndQuorumEpoch)
and stays until they answered, so the others elect at once; a SIGKILL'd one leaves them to their
fetch timeout."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from testkit.cluster import Cluster

pytestmark = pytest.mark.slow

FETCH_TIMEOUT_MS = 2000  # Kafka's controller.quorum.fetch.timeout.ms, the nodes' default


def elected_after(cluster: Cluster, leader: int, since_ms: float, timeout: float = 15.0) -> float:
    """Milliseconds from `since_ms` (wall clock) to the moment a node other than `leader`
    recorded becoming leader (its events.jsonl), waiting up to `timeout` s for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for i in cluster.procs:
            for e in cluster.events(i):
                if e["type"] == "state" and e["state"] == "leader" and e["ts"] > since_ms:
                    return float(e["ts"]) - since_ms
        time.sleep(0.05)
    raise TimeoutError(f"no new leader after {leader} stopped; logs in {cluster.root}")


def resigned_at(events: list[dict[str, Any]]) -> float:
    return float(next(e["ts"] for e in reversed(events)
                      if e["type"] == "state" and e["state"] == "resigned"))


def test_sigterm_of_the_leader_fails_over_well_before_a_sigkill_does(tmp_path: Path) -> None:
    with Cluster(tmp_path) as cluster:
        cluster.start()
        cluster.wait_leader(timeout=30.0)
        time.sleep(1.0)  # the followers fetch: the leader ranks its successors by their offsets
        # the leader now: on a loaded machine a follower may have timed out meanwhile
        leader = cluster.wait_leader(timeout=30.0)
        assert cluster.terminate(leader) == 0
        graceful_ms = elected_after(cluster, leader, resigned_at(cluster.events(leader)))
        cluster.start(leader)
        second = cluster.wait_leader(timeout=30.0, exclude=leader)
        time.sleep(1.0)
        killed_ms_at = time.time() * 1000.0
        cluster.kill(second)
        crash_ms = elected_after(cluster, second, killed_ms_at)
    # EndQuorumEpoch sends the first successor campaigning at once; after a crash nobody moves
    # before its fetch timeout (counted from its last fetch, at most one long poll earlier).
    assert graceful_ms < FETCH_TIMEOUT_MS / 2, graceful_ms
    assert crash_ms > FETCH_TIMEOUT_MS / 2, crash_ms
    assert graceful_ms < crash_ms


def test_a_stopping_leader_stays_until_the_voters_answer(tmp_path: Path) -> None:
    """The followers are paused when the leader gets SIGTERM: it keeps asking rather than exit
    after one send, and exits as soon as they answer, well within its shutdown timeout."""
    with Cluster(tmp_path, extra={"shutdown.timeout.ms": "30000"}) as cluster:
        cluster.start()
        leader = cluster.wait_leader(timeout=30.0)
        followers = [i for i in cluster.ids if i != leader]
        for i in followers:
            cluster.procs[i].send_signal(signal.SIGSTOP)
        proc = cluster.procs.pop(leader)
        try:
            proc.send_signal(signal.SIGTERM)
            with pytest.raises(subprocess.TimeoutExpired):
                proc.wait(2.5)  # past one request timeout: it resent, still unanswered
        finally:
            for i in followers:
                cluster.procs[i].send_signal(signal.SIGCONT)
        resumed = time.monotonic()
        assert proc.wait(15) == 0
        took = time.monotonic() - resumed
        assert took < 10.0, took  # once a leader is elected, not the 30 s timeout
        new = cluster.wait_leader(timeout=10.0, exclude=leader)
        assert new in followers
        log = (tmp_path / f"node{leader}.log").read_text()
        assert "graceful shutdown timed out" not in log
