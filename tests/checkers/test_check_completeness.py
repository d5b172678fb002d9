"""VALID only when something was checked; partial histories are judged, and said to be partial."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder
from chk_runs import write_run

import workloads
from checkers import compose
from harness.cli import main as kraft


def healthy() -> Builder:
    b = Builder()
    b.append(1, 10, 0)
    b.append(2, 11, 1)
    b.read(3, 0, 2, [[0, 10], [1, 11]], final=True)
    return b


def reason(result: dict[str, Any]) -> str:
    return str(result["checkers"]["completeness"].get("error", ""))


def test_a_healthy_history_is_valid_and_says_what_was_checked() -> None:
    result = workloads.check(healthy().ops, {"workload": "append"})
    assert result["valid"] is True, result
    completeness = result["checkers"]["completeness"]
    assert (completeness["ok_ops"], completeness["final_reads"], completeness["partial"]) == (2, 1, False)


def test_an_empty_history_is_unknown() -> None:
    result = workloads.check([], {"workload": "append"})
    assert result["valid"] == "unknown"
    assert "the history is empty" in result["reason"]


def test_a_run_in_which_no_operation_succeeded_is_unknown() -> None:
    # what a cluster that never elects a leader gives: every op fails, the log is "consistent"
    b = Builder()
    b.nemesis("start-partition")
    b.append(1, 10, None, "fail")
    b.append(2, 11, None, "info")
    b.read(3, 0, 0, [])  # set to fail below
    b.ops[-1].update(type="fail", value=None, error="not-leader")
    b.nemesis("stop-partition")
    b.invoke(4, "read", {"from": 0}, final=True)
    b.complete(4, "fail", final=True)
    result = workloads.check(b.ops, {"workload": "append"})
    assert result["valid"] == "unknown"
    assert "no operation succeeded" in reason(result)
    assert "no final read succeeded" in reason(result)


def test_no_final_read_is_unknown_since_lost_writes_cannot_be_ruled_out() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.nemesis("start-kill")
    b.append(2, 11, 1)
    b.nemesis("stop-kill")
    b.invoke(3, "read", {"from": 0}, final=True)
    b.complete(3, "fail", final=True)
    result = workloads.check(b.ops, {"workload": "append"})
    assert result["valid"] == "unknown"
    assert reason(result) == "no final read succeeded: lost writes cannot be ruled out"


def test_a_register_history_with_no_ok_op_is_unknown() -> None:
    b = Builder()
    b.r_write(1, "k", 1, "fail")
    result = workloads.check(b.ops, {"workload": "register"})
    assert result["valid"] == "unknown" and "no operation succeeded" in reason(result)


def test_a_kv_history_without_an_ok_final_read_is_unknown_and_one_final_read_makes_it_valid(
) -> None:
    b = Builder()
    b.r_write(1, "k", 1)
    b.invoke(2, "read", {"key": "k"}, final=True)
    b.complete(2, "fail", final=True)
    result = workloads.check(b.ops, {"workload": "kv"})
    assert result["valid"] == "unknown"
    assert "no final read of any key succeeded" in reason(result)
    b.invoke(3, "read", {"key": "k"}, final=True)
    b.complete(3, "ok", {"key": "k", "value": 1}, final=True)
    assert workloads.check(b.ops, {"workload": "kv"})["valid"] is True


def test_an_append_the_history_ends_before_completing_is_indeterminate_not_a_phantom() -> None:
    # Process 5 appended 12 and the history ends before its completion (an interrupted run);
    # the final read shows 12: the append took effect, which an indeterminate op may do.
    b = Builder()
    b.append(1, 10, 0)
    b.append_invoke(5, 12)
    b.read(3, 0, 2, [[0, 10], [1, 12]], final=True)
    result = workloads.check(b.ops, {"workload": "append"})
    assert result["valid"] is True, result
    assert result["checkers"]["completeness"]["indeterminate"] == 1
    assert result["checkers"]["completeness"]["partial"] is True


def test_an_uncompleted_register_write_may_take_effect() -> None:
    b = Builder()
    b.r_write(1, "k", 1)
    b.invoke(2, "write", {"key": "k", "value": 2})  # never completes
    b.r_read(3, "k", 2)
    result = workloads.check(b.ops, {"workload": "register"})
    assert result["valid"] is True, result
    b.r_read(4, "k", 3)  # but a value nobody wrote is still caught
    assert workloads.check(b.ops, {"workload": "register"})["valid"] is False


def test_kraft_check_on_an_empty_history_is_unknown_with_the_reason(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, [])
    assert kraft(["check", "--no-plots", str(run)]) == 2
    stored = json.loads((run / "results.json").read_text())
    assert stored["valid"] == "unknown" and "the history is empty" in stored["reason"]
    assert "verdict: UNKNOWN: the history is empty" in capsys.readouterr().out


def interrupted(tmp_path: Path, test: dict[str, Any] | None = None) -> Path:
    """A run cut by Ctrl-C during its final reads: one final read made, one append in flight."""
    b = healthy()
    b.append_invoke(4, 13)
    return write_run(tmp_path, b.ops, test if test is not None
                     else {"outcome": "interrupted", "error": "interrupted"})


def test_rechecking_an_interrupted_run_keeps_it_partial_and_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = interrupted(tmp_path)
    for _ in range(2):  # a re-check of the re-check too
        assert kraft(["check", "--no-plots", str(run)]) == 2
        stored = json.loads((run / "results.json").read_text())
        assert stored["valid"] == "unknown" and stored["error"] == "interrupted"
        assert "the run was interrupted" in stored["reason"]
        out = capsys.readouterr().out
        assert "history: partial (the run was interrupted)" in out
        assert "1 operation(s) invoked and never completed" in out


def test_a_run_stored_before_test_json_had_its_outcome_keeps_results_json_error(
        tmp_path: Path) -> None:
    run = interrupted(tmp_path, test={})
    (run / "results.json").write_text(json.dumps({"valid": "unknown", "error": "interrupted",
                                                  "checkers": {}}))
    assert workloads.check_run(run)["valid"] == "unknown"
    assert kraft(["check", "--no-plots", str(run)]) == 2
    assert kraft(["check", "--no-plots", str(run)]) == 2  # results.json kept the mark


def test_a_run_whose_harness_died_is_partial(tmp_path: Path) -> None:
    run = write_run(tmp_path, healthy().ops, {"outcome": "running"})
    result = workloads.check_run(run)
    assert result["valid"] == "unknown" and "never finished" in result["reason"]


def test_kraft_check_on_a_binary_file_names_it(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert kraft(["check", str(binary)]) == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kraft check: {binary}: not a history") and "\n" not in err


def test_a_crash_in_kraft_check_exits_3_never_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    def crash(*_args: Any) -> dict[str, Any]:
        raise RuntimeError("a bug")

    monkeypatch.setattr(compose, "check", crash)
    run = write_run(tmp_path, healthy().ops)
    assert kraft(["check", "--no-plots", str(run)]) == 3
    assert "RuntimeError: a bug" in capsys.readouterr().err


# -- faults: each kind a run asked for took effect, or the run is not VALID -------------------------


def nemesis_step(b: Builder, f: str, type_: str, value: Any = None,
                 error: str | None = None) -> None:
    """A nemesis step as the schedule records it: its invoke, then its completion."""
    b._add(process="nemesis", type="invoke", f=f, value=value)
    b._add(process="nemesis", type=type_, f=f, value=value, error=error)


def with_faults(*steps: tuple[str, str, str | None]) -> Builder:
    """A healthy history after nemesis steps (f, completion type, error)."""
    b = Builder()
    for f, type_, error in steps:
        nemesis_step(b, f, type_, {"nodes": ["n1"]}, error)
    tail = healthy()
    for op in tail.ops:
        b._add(**{k: v for k, v in op.items() if k not in ("index", "time")})
    return b


def test_a_kind_asked_for_that_never_started_makes_the_run_unknown_though_others_did() -> None:
    b = with_faults(("start-partition", "ok", None), ("stop-partition", "ok", None),
                    ("start-kill", "info", "no-effect"), ("start-kill", "info", "fault-failed"),
                    ("start-pause", "ok", None))
    result = workloads.check(b.ops, {"workload": "append",
                                     "nemesis": ["partition", "kill", "pause", "membership"]})
    assert result["valid"] == "unknown"
    assert reason(result) == "no fault took effect for membership: it never started"
    completeness = result["checkers"]["completeness"]
    assert completeness["faults_done"] == 2
    # kill was tried and did nothing, while others took effect: said, not a reason for doubt
    assert completeness["faults_not_done"] == ["kill", "membership"]
    assert completeness["faults_not_done_why"] == {
        "kill": "none of its 2 starts took effect", "membership": "it never started"}


def test_a_kind_that_started_without_effect_beside_others_is_said_not_doubted() -> None:
    b = with_faults(("start-partition", "ok", None))
    b._add(process="nemesis", type="invoke", f="start-kill", value={"nodes": ["n2"]})
    result = workloads.check(b.ops, {"workload": "append", "nemesis": ["partition", "kill"]})
    assert result["valid"] is True, result
    completeness = result["checkers"]["completeness"]
    assert completeness["faults_not_done_why"] == {"kill": "its first start never completed"}


def test_a_run_in_which_every_kind_asked_for_took_effect_is_valid() -> None:
    b = with_faults(("start-partition", "info", "no-effect"), ("start-partition", "ok", None),
                    ("start-kill", "ok", None), ("stop-kill", "ok", None))
    result = workloads.check(b.ops, {"workload": "append", "nemesis": ["partition", "kill"]})
    assert result["valid"] is True, result
    assert "faults_not_done" not in result["checkers"]["completeness"]
    # a kind that was not asked for does not count for one that was
    asked_pause = workloads.check(b.ops, {"workload": "append", "nemesis": ["kill", "pause"]})
    assert reason(asked_pause) == "no fault took effect for pause: it never started"


def test_when_no_kind_took_effect_the_reason_speaks_of_the_whole_run() -> None:
    b = with_faults(("start-kill", "info", "no-effect"))
    result = workloads.check(b.ops, {"workload": "append", "nemesis": ["pause", "kill"]})
    assert reason(result) == ("no fault took effect: the run asked for pause, kill, and none of "
                              "its 1 start took effect")
    assert result["checkers"]["completeness"]["faults_not_done"] == ["kill", "pause"]
