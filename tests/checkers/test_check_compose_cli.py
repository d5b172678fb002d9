"""Composition of verdicts, `kraft check` on stored runs, plots, timeline and availability."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder
from chk_runs import node_files, write_run

import workloads
from checkers import availability, log_anomalies, timeline
from checkers.faults import windows
from checkers.result import merge_valid
from harness.cli import main as kraft


@pytest.mark.parametrize(("verdicts", "expected"), [
    ([True, True], True),
    ([True, "unknown"], "unknown"),
    (["unknown", False, True], False),
    ([], True),
])
def test_false_beats_unknown_beats_true(verdicts: list[Any], expected: Any) -> None:
    assert merge_valid(verdicts) == expected


def faulty_run() -> Builder:
    b = Builder()
    b.append(1, 10, 0)
    b.nemesis("start-partition")
    b.append(2, 11, None, "info")
    b.append(3, 12, 1)
    b.nemesis("stop-partition")
    b.read(4, 0, 2, [[0, 10], [1, 12]])
    return b


def test_a_checker_that_raises_is_unknown_never_a_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(parsed: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    monkeypatch.setattr(log_anomalies, "check", explode)
    result = workloads.check(faulty_run().ops, {"workload": "append"})
    assert result["valid"] == "unknown"
    assert result["checkers"]["log-anomalies"]["error"] == "RuntimeError: boom"
    assert result["checkers"]["log-linearizable"]["valid"] is True


def test_unknown_workload_is_unknown() -> None:
    result = workloads.check(faulty_run().ops, {"workload": "bank"})
    assert result["valid"] == "unknown"
    assert "bank" in result["checkers"]["workload"]["error"]


def test_results_dict_shape() -> None:
    b = faulty_run()
    b.read(5, 0, 2, [[0, 10], [1, 99]])
    result = workloads.check(b.ops, {})
    assert set(result) == {"valid", "checkers", "anomaly_types", "anomalies", "finding_types",
                           "findings", "stats"}
    assert result["findings"] == {}  # no promises in test.json: every promise holds
    assert result["anomaly_types"] == sorted(result["anomalies"])
    assert result["stats"]["ops"]["append"] == {"ok": 2, "info": 1}
    json.dumps(result)  # results.json must serialise


def test_availability_after_a_fault() -> None:
    b = Builder()
    b.append(1, 1, 0)  # ok at 1 ms
    b.nemesis("start-kill")  # 2 ms
    b.append(2, 2, None, "fail")  # 3-4 ms
    b.append(3, 3, None, "fail")  # 5-6 ms
    b.nemesis("stop-kill")  # 7 ms
    b.append(4, 4, 1)  # ok at 9 ms
    figures = availability.figures(b.ops)
    assert figures["ok_share"] == pytest.approx(0.5)
    [fault] = figures["faults"]
    assert fault["kind"] == "kill"
    assert fault["longest_unavailable_s"] == pytest.approx(0.007)  # from 2 ms to the ok at 9 ms


def test_kraft_check_reproduces_the_stored_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, faulty_run().ops, nodes={"n1": node_files([10, 12], 2)})
    stored = workloads.check_run(run)  # what `kraft test` would have written
    (run / "results.json").write_text(json.dumps(stored))
    assert kraft(["check", str(run)]) == 0
    rewritten = json.loads((run / "results.json").read_text())
    assert rewritten["valid"] == stored["valid"] is True
    assert rewritten["anomalies"] == stored["anomalies"]
    for plot in ("latency-raw.png", "latency-quantiles.png", "rate.png"):
        assert (run / "plots" / plot).read_bytes()[:4] == b"\x89PNG"
    assert "<html" in (run / "timeline.html").read_text()
    out = capsys.readouterr().out
    assert "verdict: VALID" in out and "partition" in out


def test_kraft_check_invalid_run_and_history_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = faulty_run()
    _, bad = b.read(5, 0, 2, [[0, 10], [1, 99]])
    run = write_run(tmp_path, b.ops)
    assert kraft(["check", str(run / "history.jsonl")]) == 1
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is False and "phantom" in results["anomaly_types"]
    assert not (run / "plots").exists()  # a bare history gets no plots
    assert f"#{bad} " in capsys.readouterr().out


def test_kraft_check_register_model(tmp_path: Path) -> None:
    b = Builder()
    b.r_write(1, "x", 1)
    b.r_read(2, "x", 2)
    run = write_run(tmp_path, b.ops)
    assert kraft(["check", "--no-plots", "--model", "register", str(run)]) == 1
    assert kraft(["check", "--no-plots", "--model", "register", "--max-states", "0", str(run)]) == 2
    searched = json.loads((run / "results.json").read_text())["checkers"]["linearizable"]
    assert (searched["states_explored"], searched["max_states"]) == (0, 0)
    assert kraft(["check", "--no-plots", "--max-states", "-1", str(run)]) == 64


def test_a_recheck_writes_the_same_results_json(tmp_path: Path) -> None:
    # No timings, nothing of the machine: the verdict file is a function of the run.
    run = write_run(tmp_path, faulty_run().ops, nodes={"n1": node_files([10, 12], 2)})
    assert kraft(["check", "--no-plots", str(run)]) == 0
    first = (run / "results.json").read_bytes()
    assert kraft(["check", "--no-plots", str(run)]) == 0
    assert (run / "results.json").read_bytes() == first
    assert "seconds" not in first.decode()


def test_kraft_check_bad_history_exits_64_with_the_line(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    b = faulty_run()
    b._add(process=9, type="ok", f="append", value={"value": 50, "offset": 2})
    run = write_run(tmp_path, b.ops)
    assert kraft(["check", str(run)]) == 64
    err = capsys.readouterr().err
    assert f"history.jsonl:{len(b.ops)}:" in err and "with no invoke" in err
    assert kraft(["check", str(tmp_path / "nowhere")]) == 64
    assert not (run / "results.json").exists()


def test_timeline_marks_anomaly_ops() -> None:
    b = faulty_run()
    start, bad = b.read(5, 0, 2, [[0, 10], [1, 99]])
    result = workloads.check(b.ops, {})
    page = timeline.page(b.ops, result["anomalies"])
    assert f"id='op-{start}' class='op anomaly'" in page
    # the phantom read, and the append of 12 whose offset the read contradicts (and so loses)
    assert result["anomaly_types"] == ["inconsistent-offsets", "lost-write", "phantom"]
    assert page.count("class='op anomaly'") == 2
    assert "id='op-5' class='op anomaly'" in page
    assert f"href='#op-{bad}'" in page and f"id='op-{bad}'" in page


def test_fault_windows_pair_start_and_stop_even_as_invoke_info_pairs() -> None:
    b = Builder()
    b._add(process="nemesis", type="invoke", f="start-partition", value=None)
    b._add(process="nemesis", type="info", f="start-partition", value=["n1"])
    b.append(1, 10, 0)
    b._add(process="nemesis", type="invoke", f="stop-partition", value=None)
    b._add(process="nemesis", type="info", f="stop-partition", value=None)
    b.nemesis("start-pause")
    [partition, pause] = windows(b.ops)
    assert (partition.kind, partition.start, partition.end) == ("partition", 0, 5_000_000)
    assert (pause.kind, pause.start, pause.end) == ("pause", 6_000_000, 6_000_000)
    assert partition.stopped and not pause.stopped  # a start with no stop lasts to the end


def test_fault_windows_where_the_old_models_disagreed() -> None:
    # `kraft analyze` used to open a window at each start completion and close it at the next
    # op of its kind if a stop: here it saw a pause from 0 ms to the end of the history (the next
    # pause op is a start), and the partition only from 7 ms, so it put the append invoked at
    # 5 ms under the pause. One model now: a run of starts opens one window, the run of stops
    # after it closes it, and a fault may be in effect from its start's invoke.
    b = Builder()
    b.nemesis("start-pause")  # 0 ms: lone ops, two steps of one pause
    b.nemesis("start-pause")  # 1 ms
    b._add(process="nemesis", type="invoke", f="stop-pause", value=None)  # 2 ms
    b._add(process="nemesis", type="ok", f="stop-pause", value=None)  # 3 ms
    b._add(process="nemesis", type="invoke", f="start-partition", value=None)  # 4 ms
    b.append(1, 10, 0)  # 5-6 ms
    b._add(process="nemesis", type="ok", f="start-partition", value=None)  # 7 ms
    b.append(2, 11, 1)  # 8-9 ms
    [pause, partition] = windows(b.ops)
    assert (pause.kind, pause.start, pause.end, pause.stopped) == ("pause", 0, 3_000_000, True)
    assert (partition.start, partition.end, partition.stopped) == (4_000_000, 9_000_000, False)
    assert [w.kind for w in windows(b.ops) if w.covers(5_000_000)] == ["partition"]


def test_console_script_end_to_end(tmp_path: Path) -> None:
    import subprocess

    b = faulty_run()
    b.read(5, 0, 1, [[0, 10]])  # stale: began after the ack of 12 at offset 1
    run = write_run(tmp_path, b.ops)
    done = subprocess.run(["kraft", "check", "--no-plots", str(run)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr
    assert "stale-read" in done.stdout and "verdict: INVALID" in done.stdout
