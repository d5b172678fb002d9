"""`kraft test --brokers 2 --workload brokers` end to end on the local backend: real nodes, real
faults; a correct cluster is VALID, and each unsafe switch of issue 17 is caught by its anomaly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def kraft_test(tmp_path: Path, *args: str, backend: str = "local"
               ) -> tuple[subprocess.CompletedProcess[str], Path]:
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--backend", backend, "--nodes", "3",
         "--brokers", "2", "--workload", "brokers", "--results-dir", str(tmp_path / "results"),
         *args],
        env={**os.environ, "KRAFT_LOCAL_DIR": str(tmp_path / "registry"),
             "PYTHONUNBUFFERED": "1"},
        capture_output=True, text=True, timeout=600)
    return done, (tmp_path / "results" / "latest").resolve()


def history(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]


def anomalies(run: Path) -> dict[str, Any]:
    results = json.loads((run / "results.json").read_text())
    found = results.get("anomalies") or {}
    return found if isinstance(found, dict) else {}


def cut_off_answers(ops: list[dict[str, Any]]) -> dict[str, int]:
    """What the brokers cut off by a `broker` partition answered while the cut held (invoked
    after its start completed, done before its stop was invoked), by outcome."""
    counts: dict[str, int] = {}
    isolated, since = None, None
    for op in ops:
        if op.get("f") == "start-partition" and op["type"] == "ok":
            isolated, since = op["value"].get("broker"), op["time"]
        elif op.get("f") == "stop-partition" and op["type"] == "invoke":
            isolated = None
        elif (op.get("f") == "describe" and op["type"] != "invoke" and isolated is not None
              and op.get("node") == isolated and since is not None):
            outcome = "ok" if op["type"] == "ok" else str(op.get("error"))
            counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def test_a_correct_cluster_with_brokers_under_partitions_kills_and_replays_is_valid(
        tmp_path: Path) -> None:
    # One run for three properties of a correct cluster (CI's time is short): VALID under
    # partitions that cut a broker off the controllers, kills (a broker's restart is a new
    # incarnation; the leader's a failover) and replays of a broker's old registration; the
    # cut-off broker, still reached by its clients, refuses once it has fenced itself; and
    # the controller refuses every old incarnation. `kraft test --nemesis partition,kill` on
    # three seeds is in the note and the full campaign.
    done, run = kraft_test(tmp_path, "--nemesis", "partition,kill,stale-incarnation",
                           "--partition-shapes", "broker", "--nemesis-interval", "6",
                           "--time-limit", "40", "--seed", "11")
    assert done.returncode == 0, done.stdout + done.stderr
    test = json.loads((run / "test.json").read_text())
    assert test["brokers"] == ["n4", "n5"]
    assert test["fencing"] == {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500,
                               "broker_timeout_ms": 4500}
    ops = history(run)
    oks = [op for op in ops if op.get("f") == "describe" and op["type"] == "ok"]
    # the brokers served, from their own image, and the leader answered too
    assert {op["node"] for op in oks if op["value"]["role"] == "broker"} == {"n4", "n5"}
    assert any(op["value"]["role"] == "controller" for op in oks)
    for op in oks:
        assert op["value"]["node"] == op["node"]
        assert (op["value"]["self"] is not None) == (op["node"] in ("n4", "n5"))
    finals = {op["node"] for op in ops if op.get("final") and op["type"] != "invoke"}
    assert finals == {"n1", "n2", "n3", "n4", "n5"}
    assert "verdict: VALID" in done.stdout
    # the clients' path is not cut: the broker answers, and refuses once it has fenced itself
    # (a kill or a replay's restart of that broker may overlap the cut: connections to a dead
    # node fail, none times out)
    answers = cut_off_answers(ops)
    assert answers.get("broker-not-available", 0) > 0, answers
    assert "timeout" not in answers, answers
    stops = [op for op in ops if op.get("f") == "stop-stale-incarnation" and op["type"] == "ok"]
    errors = [op["value"]["answer"]["error"] for op in stops]
    # "not-sent": no old incarnation to replay (the broker had not restarted since it was read)
    assert "duplicate_broker_registration" in errors, stops
    assert set(errors) <= {"duplicate_broker_registration", "not-sent"}, stops
    assert any(op.get("f") == "start-kill" and op["type"] == "ok" for op in ops)


SWITCH_RUNS: dict[str, tuple[str, ...]] = {
    "no-self-fence": ("--nemesis", "partition", "--partition-shapes", "broker",
                      "--nemesis-interval", "10", "--time-limit", "30", "--seed", "3"),
    "accept-old-incarnation": ("--nemesis", "stale-incarnation", "--time-limit", "30",
                               "--seed", "4"),
    "unfence-before-caught-up": ("--nemesis", "kill", "--time-limit", "30", "--seed", "5"),
}
"""One run per unsafe switch of issue 17, with the faults that give its defect a window."""


@pytest.fixture(scope="module")
def switch_runs(tmp_path_factory: pytest.TempPathFactory
                ) -> dict[str, tuple[subprocess.CompletedProcess[str], Path]]:
    """The three switch runs, at the same time (each is mostly waiting on its 30 s schedule:
    side by side they cost CI one run's time). Their verdicts are INVALID whatever the load."""
    tmp = tmp_path_factory.mktemp("switches")
    with ThreadPoolExecutor(len(SWITCH_RUNS)) as pool:
        futures = {name: pool.submit(kraft_test, tmp / name, *args, "--node-config",
                                     f"unsafe={name}")
                   for name, args in SWITCH_RUNS.items()}
        return {name: future.result() for name, future in futures.items()}


def test_a_broker_that_keeps_serving_when_cut_off_is_caught(
        switch_runs: dict[str, tuple[subprocess.CompletedProcess[str], Path]]) -> None:
    done, run = switch_runs["no-self-fence"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert "served-while-fenced" in anomalies(run), done.stdout


def test_a_controller_that_takes_back_an_old_incarnation_is_caught(
        switch_runs: dict[str, tuple[subprocess.CompletedProcess[str], Path]]) -> None:
    done, run = switch_runs["accept-old-incarnation"]
    assert done.returncode == 1, done.stdout + done.stderr
    stops = [op for op in history(run)
             if op.get("f") == "stop-stale-incarnation" and op["type"] == "ok"]
    assert any(op["value"]["answer"]["error"] == "none" for op in stops), stops
    assert "stale-incarnation-accepted" in anomalies(run), done.stdout


def test_a_controller_that_unfences_before_catch_up_is_caught(
        switch_runs: dict[str, tuple[subprocess.CompletedProcess[str], Path]]) -> None:
    done, run = switch_runs["unfence-before-caught-up"]
    assert done.returncode == 1, done.stdout + done.stderr
    assert "unfenced-before-caught-up" in anomalies(run), done.stdout


def docker_ready() -> None:
    from harness import images
    from harness.backends.docker import engine_available

    if not engine_available() or not images.image_available():
        pytest.skip("no Docker engine answers, or the node image is not built (kraft images "
                    "build)")


@pytest.mark.docker
def test_on_docker_a_cut_off_broker_still_reached_by_clients_stops_serving(
        tmp_path: Path) -> None:
    docker_ready()
    done, run = kraft_test(tmp_path, "--nemesis", "partition", "--partition-shapes", "broker",
                           "--nemesis-interval", "10", "--time-limit", "30", "--seed", "3",
                           backend="docker")
    assert done.returncode == 0, done.stdout + done.stderr
    answers = cut_off_answers(history(run))
    assert answers.get("broker-not-available", 0) > 0, answers
    assert not set(answers) & {"timeout", "connect-failed"}, answers
