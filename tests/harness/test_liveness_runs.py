"""A node that dies in a run is part of its verdict (issue 40), with real processes on the local
backend: a node that crashes is `node-crashed` (INVALID), one killed by hand is never VALID, and
one a heal could not bring back (its port taken meanwhile) makes the run unknown."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import workloads
from harness import runner, targets
from harness.backends.local import LocalBackend
from harness.config import TestConfig

HERE = Path(__file__).parent
TOY = "toy_target:ToyTarget"


@pytest.fixture(autouse=True)
def toys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.syspath_prepend(str(HERE))
    yield


def _config(tmp_path: Path, **given: Any) -> TestConfig:
    settings: dict[str, Any] = {"backend": "local", "target": TOY, "nemesis": [],
                                "time_limit": 5, "rate": 20, "recovery_time": 3, "seed": 7,
                                "results_dir": str(tmp_path / "results"), **given}
    return TestConfig(**settings)


def _run(config: TestConfig, backend: LocalBackend) -> runner.Outcome:
    return runner.run(config, backend, targets.get(TOY), workloads.get("append"),
                      out=io.StringIO())


def _nemesis_ops(outcome: runner.Outcome, f: str) -> list[dict[str, Any]]:
    ops = [json.loads(line) for line in (outcome.run_dir / "history.jsonl").open()]
    return [op for op in ops if op["process"] == "nemesis" and op["f"] == f]


def _after(seconds: float, action: Any) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


@pytest.mark.slow
def test_a_node_that_exits_with_an_error_is_node_crashed(tmp_path: Path) -> None:
    outcome = _run(_config(tmp_path, node_config={"crash": "n2:1.5"}), LocalBackend())
    exits = _nemesis_ops(outcome, "node-exit")
    assert exits and exits[0]["value"]["node"] == "n2" and exits[0]["value"]["status"] == 70
    assert exits[0]["value"]["sent"] == [] and "toy: fatal" in exits[0]["value"]["log"][-1]
    results = outcome.results
    assert results["valid"] is False and outcome.exit_code == 1
    crashes = results["anomalies"]["node-crashed"]
    assert crashes[0]["node"] == "n2" and crashes[0]["status"] == 70
    assert crashes[0]["ops"] == [exits[0]["index"]]
    assert "n2 exited with status 70, not by the harness" in outcome.summary
    assert "verdict: INVALID" in outcome.summary


@pytest.mark.slow
def test_a_node_killed_by_hand_is_never_valid_and_is_started_again_at_the_heal(
        tmp_path: Path) -> None:
    backend = LocalBackend()

    def kill_by_hand() -> None:
        # as a user at another terminal would: the harness's own levers are not used
        os.killpg(backend._procs["n3"].pid, signal.SIGKILL)

    _after(2.0, kill_by_hand)
    outcome = _run(_config(tmp_path), backend)
    exits = _nemesis_ops(outcome, "node-exit")
    assert [(op["value"]["node"], op["value"]["signal"]) for op in exits] == [("n3", "SIGKILL")]
    assert _nemesis_ops(outcome, "revive")[0]["value"]["nodes"] == {"n3": "running"}
    results = outcome.results
    assert results["valid"] == "unknown" and outcome.exit_code == 2
    assert "n3 was ended by SIGKILL, which the harness did not send" in results["reason"]
    assert "verdict: VALID" not in outcome.summary
    assert "n3 killed by SIGKILL, not by the harness" in outcome.summary


@pytest.mark.slow
def test_a_node_whose_restart_fails_is_unknown_never_valid(tmp_path: Path) -> None:
    backend = LocalBackend()
    taken: list[socket.socket] = []
    done = threading.Event()

    def take_the_port_of_a_killed_node() -> None:
        # once the kill nemesis has taken a node down, another program takes its port
        while not done.is_set() and not taken:
            for node in ("n1", "n2", "n3"):
                if node in backend._procs and not backend.is_running(node):
                    squatter = socket.socket()
                    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    squatter.bind(backend.bind_address(node, "toy"))
                    squatter.listen()
                    taken.append(squatter)
                    break
            time.sleep(0.02)

    threading.Thread(target=take_the_port_of_a_killed_node, daemon=True).start()
    try:
        outcome = _run(_config(tmp_path, nemesis=["kill"], nemesis_interval=1.0, time_limit=4),
                       backend)
    finally:
        done.set()
        for squatter in taken:
            squatter.close()
    assert taken, "the kill nemesis never took a node down"
    results = outcome.results
    assert results["valid"] == "unknown" and outcome.exit_code == 2, results.get("reason")
    # the heal's restart, or the final one, was refused (which of them saw it first varies)
    assert "down at the end of the run" in results["reason"] \
        or "went down after the heal" in results["reason"], results["reason"]
    # the refusal to start is the node's by design (the host was at fault), not a crash
    assert "node-crashed" not in results["anomalies"]
    designed = results["checkers"]["liveness"]["designed_exits"]
    assert designed and designed[0]["why"] == "refused to start: its port is taken"
    assert "verdict: VALID" not in outcome.summary
