"""Kill and pause with real processes on the local backend prove what they did (issue 40): a pause
of a node that is dead is recorded info/no-effect, not ok, and a run whose faults all had no
effect is not VALID."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import workloads
from checkers.faults import windows
from contracts.backend import ClusterSpec
from contracts.history import History
from harness import runner, targets
from harness.backends.local import LocalBackend
from harness.config import TestConfig
from nemesis.base import Env
from nemesis.process import Kill, Pause
from nemesis.schedule import Schedule

HERE = Path(__file__).parent
TOY = "toy_target:ToyTarget"
NODES = ["n1", "n2", "n3"]


@pytest.fixture
def toys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.syspath_prepend(str(HERE))
    yield


def aimed(fault: Any, *nodes: str) -> None:
    """The fault's next choice is `nodes`, whatever its draw."""
    fault.choose = lambda _rng: {"target": "one", "nodes": list(nodes)}


@pytest.mark.slow
@pytest.mark.usefixtures("toys")
def test_a_pause_of_a_killed_node_is_no_effect_and_one_of_a_live_node_is_proven(
        tmp_path: Path) -> None:
    from toy_target import ToyDB  # on the path the fixture gave

    backend, db = LocalBackend(), ToyDB()
    backend.setup(ClusterSpec(run_id="evidence", nodes=NODES, ports={"toy": 7000},
                              run_dir=tmp_path))
    try:
        db.setup(backend, NODES, {})
        env = Env(backend, db, list(NODES))
        kill, pause = Kill(env, ["one"]), Pause(env, ["one"])
        history = History()
        schedule = Schedule([kill, pause], 1.0, seed=1, history=history)
        aimed(kill, "n3")
        schedule._do(kill, "start")
        aimed(pause, "n3")
        schedule._do(pause, "start")  # n3 is dead: no SIGSTOP reaches anything
        aimed(pause, "n1")
        schedule._do(pause, "start")
        assert backend.process_state("n1") == "stopped"
        schedule._do(pause, "stop")
        schedule._do(kill, "stop")
        ops = history.ops()
        done = [op for op in ops if op["type"] != "invoke"]
        assert [(op["f"], op["type"], op.get("error")) for op in done] == [
            ("start-kill", "ok", None), ("start-pause", "info", "no-effect"),
            ("start-pause", "ok", None), ("stop-pause", "ok", None), ("stop-kill", "ok", None)]
        killed, dead_pause, paused, resumed, restarted = (op["value"] for op in done)
        assert killed["evidence"] == {"n3": "gone"}
        assert dead_pause["evidence"] == {"n3": "already gone"}
        assert "n3 already gone" in done[1]["detail"]
        assert paused["nodes"] == ["n1"] and paused["evidence"] == {"n1": "stopped"}
        assert resumed["evidence"] == {"n1": "running"}
        assert restarted["evidence"] == {"n3": "running"} and backend.is_running("n3")
        # the pause's window is the one that took effect, from its invoke
        [kill_window, pause_window] = windows(ops)
        assert pause_window.kind == "pause" and ops[pause_window.start_index]["value"] == {
            "target": "one", "nodes": ["n1"]}
        assert kill_window.kind == "kill"
    finally:
        db.teardown(backend, NODES)
        backend.teardown()


@pytest.mark.slow
@pytest.mark.usefixtures("toys")
def test_a_run_whose_faults_all_had_no_effect_is_unknown(tmp_path: Path) -> None:
    # `down=true`: no node ever runs, so every kill and pause finds its node gone
    config = TestConfig(backend="local", target=TOY, nemesis=["pause", "kill"],
                        nemesis_interval=0.3, time_limit=2, rate=20, recovery_time=1, seed=40,
                        node_config={"down": "true"}, results_dir=str(tmp_path / "results"))
    outcome = runner.run(config, LocalBackend(), targets.get(TOY), workloads.get("append"),
                         out=io.StringIO())
    starts = [json.loads(line) for line in (outcome.run_dir / "history.jsonl").open()]
    starts = [op for op in starts if op["process"] == "nemesis" and op["type"] != "invoke"
              and op["f"].startswith("start-")]
    assert {op["f"] for op in starts} == {"start-pause", "start-kill"}, starts
    assert all(op["type"] == "info" and op["error"] == "no-effect" for op in starts), starts
    assert all(set(op["value"]["evidence"].values()) == {"already gone"} for op in starts)
    results = outcome.results
    assert results["valid"] == "unknown"
    assert "no fault took effect: the run asked for pause, kill, and none of its " in \
        results["reason"]
    assert results["stats"]["availability"]["faults"] == []
    assert "verdict: VALID" not in outcome.summary
    assert "[info: no-effect: no node could be" in outcome.summary


@pytest.mark.slow
@pytest.mark.usefixtures("toys")
def test_a_run_shorter_than_its_first_fault_is_unknown_with_the_reason(tmp_path: Path) -> None:
    # `kraft test --time-limit 5` with the default nemesis interval: the first fault would come
    # after the run's end, so the run was never tested under the faults its name promises
    config = TestConfig(backend="local", target=TOY, nemesis=["pause", "kill"],
                        nemesis_interval=10.0, time_limit=3, rate=20, recovery_time=1, seed=5,
                        results_dir=str(tmp_path / "results"))
    outcome = runner.run(config, LocalBackend(), targets.get(TOY), workloads.get("append"),
                         out=io.StringIO())
    assert outcome.results["valid"] == "unknown" and outcome.exit_code == 2
    reason = ("no fault took effect: the run asked for pause, kill, and none started (the first "
              "waits for the nemesis interval)")
    assert reason in outcome.results["reason"]
    assert reason in outcome.summary and "verdict: VALID" not in outcome.summary
