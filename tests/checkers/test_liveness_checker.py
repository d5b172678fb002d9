"""The liveness checker (issue 40) on histories made by hand: each way a node can go down in a run
gets the verdict it deserves, and the log-pattern search finds a crash the exits did not show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers import liveness
from checkers.compose import check as compose_check
from checkers.result import UNKNOWN

DESIGNED = [{"pattern": "cannot listen", "why": "refused to start: its port is taken",
             "after": []},
            {"pattern": "disk write failed", "why": "halted on a failed disk",
             "after": ["power-loss"]}]
TEST: dict[str, Any] = {"designed_exits": DESIGNED, "crash_patterns": ["^panic: "]}


def _exit(index: int, node: str, status: int | None, signal: str | None = None,
          log: list[str] | None = None, sent: list[str] | None = None) -> dict[str, Any]:
    return {"index": index, "time": index * 10**9, "process": "nemesis", "type": "info",
            "f": "node-exit", "value": {"node": node, "status": status, "signal": signal,
                                        "sent": sent or [], "log": log or []}}


def _op(index: int, f: str, value: Any, type_: str = "info") -> dict[str, Any]:
    return {"index": index, "time": index * 10**9, "process": "nemesis", "type": type_,
            "f": f, "value": value}


def test_an_exit_with_an_error_is_a_crash_proven_by_its_op() -> None:
    result = liveness.check([_exit(4, "n2", 1, log=["ERROR boom"])], TEST)
    assert result["valid"] is False
    crash = result["anomalies"]["node-crashed"][0]
    assert crash["ops"] == [4] and crash["node"] == "n2" and crash["status"] == 1
    assert "n2 exited with status 1 on its own at 4.0 s" in crash["explanation"]


def test_a_signal_from_within_is_a_crash_one_from_outside_is_doubt() -> None:
    segv = liveness.check([_exit(3, "n1", -11, "SIGSEGV")], TEST)
    assert segv["valid"] is False and "killed by SIGSEGV" in \
        segv["anomalies"]["node-crashed"][0]["explanation"]
    killed = liveness.check([_exit(3, "n1", -9, "SIGKILL")], TEST)
    assert killed["valid"] == UNKNOWN and "anomalies" not in killed
    assert "n1 was ended by SIGKILL, which the harness did not send" in killed["error"]


def test_an_exit_by_design_counts_only_after_the_fault_it_names() -> None:
    halted = _exit(9, "n3", 1, log=["x", "disk write failed: EIO", "stopping"])
    before = liveness.check([halted], TEST)
    assert before["valid"] is False  # no power loss took effect: the node had no cause
    loss = _op(5, "start-power-loss", {"nodes": ["n3"]}, "ok")
    after = liveness.check([loss, halted], TEST)
    assert after["valid"] is True and after["designed_exits"][0]["why"] == \
        "halted on a failed disk"
    failed_loss = _op(5, "start-power-loss", {"nodes": ["n3"]}, "info")
    assert liveness.check([failed_loss, halted], TEST)["valid"] is False
    # a refusal that blames the host is by design at any time
    refused = liveness.check([_exit(2, "n1", 1, log=["cannot listen: in use"])], TEST)
    assert refused["valid"] is True


def test_a_node_not_brought_back_or_down_at_the_end_makes_the_run_unknown() -> None:
    revive = _op(7, "revive", {"nodes": {"n1": "running", "n2": "exited at once"}})
    states = _op(8, "node-states", {"running": ["n1"], "down": ["n2"], "broken": ["n3"]})
    result = liveness.check([revive, states], TEST)
    assert result["valid"] == UNKNOWN
    assert "the heal could not bring n2 back (exited at once)" in result["error"]
    assert "n2 was down at the end of the run" in result["error"]
    assert "n3" not in result["error"]  # down for good by the disk nemesis's design
    up = liveness.check([_op(8, "node-states", {"running": ["n1", "n2"], "down": [],
                                                "broken": []})], TEST)
    assert up["valid"] is True


def test_an_exit_after_the_heal_is_doubt_even_when_by_design() -> None:
    states = _op(8, "node-states", {"running": ["n1"], "down": [], "broken": []})
    late = _exit(9, "n1", 1, log=["cannot listen"])
    result = liveness.check([states, late], TEST)
    assert result["valid"] == UNKNOWN and "n1 went down after the heal" in result["error"]


def test_crash_patterns_are_found_in_every_node_log_once_per_fact(tmp_path: Path) -> None:
    for node in ("n1", "n2"):
        (tmp_path / node).mkdir()
    (tmp_path / "n1" / "node.log").write_text("ok\npanic: runtime error: index out of range\n")
    (tmp_path / "n1" / "faultfs.log").write_text("panic: the harness's own, not the node's\n")
    (tmp_path / "n2" / "node.log").write_text("panic: nil map\n")
    nodes = {"n1": tmp_path / "n1", "n2": tmp_path / "n2"}
    # n2's panic is the one its exit quotes (among the lines that say what went wrong, before a
    # goroutine dump): one crash, not two
    exit = _exit(4, "n2", 2, log=["goroutine 1 [running]:", "main.go:127 +0x33f"])
    exit["value"]["errors"] = ["panic: nil map"]
    result = liveness.check([exit], TEST, nodes)
    crashes = result["anomalies"]["node-crashed"]
    assert result["anomaly_counts"]["node-crashed"] == 2
    assert {(c["node"], c["source"]) for c in crashes} == {("n2", "exit"), ("n1", "log")}
    assert "node.log:2" in next(c for c in crashes if c["source"] == "log")["explanation"]
    assert "its log says: panic: nil map" in next(
        c for c in crashes if c["source"] == "exit")["explanation"]
    assert liveness.check([], {"crash_patterns": ["^never"]}, nodes)["valid"] is True


def test_every_run_with_liveness_ops_is_judged_and_old_runs_are_not() -> None:
    client = [{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "read",
               "value": {"from": 0}},
              {"index": 1, "time": 1, "process": 0, "type": "ok", "f": "read",
               "value": {"from": 0, "hw": 0, "records": []}}]

    def suite(case: Any, verdicts: Any) -> None:
        verdicts.run("toy", lambda: {"valid": True})

    crashed = compose_check([*client, _exit(2, "n2", 70)], {}, None, suite)
    assert crashed["valid"] is False and crashed["anomaly_types"] == ["node-crashed"]
    assert "liveness" not in compose_check(client, {}, None, suite)["checkers"]
    assert not liveness.applies([], {})


def test_the_timeline_draws_a_node_down_on_its_own_until_the_heal_brings_it_back() -> None:
    from checkers import leaders

    history = [_exit(2, "n2", 70), _op(5, "revive", {"nodes": {"n2": "running"}}),
               _exit(7, "n3", -9, "SIGKILL"), _op(9, "node-states", {"running": ["n1"]})]
    bands = [(b.kind, b.start, b.end, b.nodes) for b in leaders.fault_bands(history)]
    assert bands == [("node-exit", 2000.0, 5000.0, "n2"), ("node-exit", 7000.0, 9000.0, "n3")]


def test_the_timeline_page_counts_a_node_exit_apart_from_the_faults() -> None:
    from checkers import timeline

    history = [_op(1, "start-kill", {"nodes": ["n1"]}, "invoke"),
               _op(2, "start-kill", {"nodes": ["n1"]}, "ok"),
               _op(3, "stop-kill", None, "invoke"), _op(4, "stop-kill", None, "ok"),
               _exit(5, "n2", 70), _op(6, "revive", {"nodes": {"n2": "running"}})]
    html = timeline.page(history)
    assert "1 faults · 1 node exit<" in html
    assert "node exited on its own" in html and "fault: node-exit" not in html
