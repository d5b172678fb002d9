"""Promises and findings (checkers/promises.py): the same history, judged under targets that make
different promises. An anomaly a target does not promise to avoid is a finding beside the verdict;
every other anomaly fails the run as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chk_histories import Builder
from chk_runs import node_files, write_run

import workloads
from checkers import promises
from contracts.target import PROMISES

EVERY = sorted(PROMISES)


def judged(b: Builder, promised: list[str] | None, **test: Any) -> dict[str, Any]:
    if promised is not None:
        test["promises"] = promised
    return workloads.check(b.ops, {"workload": "append", **test})


def without(*dropped: str) -> list[str]:
    return [p for p in EVERY if p not in dropped]


def stale_read() -> tuple[Builder, list[int]]:
    """An append acknowledged before a read began, which the read does not see."""
    b = Builder()
    b.append(1, 10, 0)
    _, ack = b.append(1, 11, 1)
    start, done = b.read(2, 0, 1, [[0, 10]])
    b.read(3, 0, 2, [[0, 10], [1, 11]])
    return b, [ack, start, done]


def test_a_stale_read_fails_a_target_that_promises_linearizable_reads() -> None:
    b, ops = stale_read()
    result = judged(b, EVERY)
    assert result["valid"] is False
    assert result["anomaly_types"] == ["stale-read"]
    assert [a["ops"] for a in result["anomalies"]["stale-read"]] == [ops]
    assert result["findings"] == {} and result["finding_types"] == []


def test_a_stale_read_is_a_finding_for_a_target_that_does_not_promise_it() -> None:
    b, ops = stale_read()
    strict = judged(b, EVERY)
    result = judged(b, without("linearizable-reads"))
    assert result["valid"] is True
    assert result["anomalies"] == {} and result["anomaly_types"] == []
    assert result["finding_types"] == ["stale-read"]
    [finding] = result["findings"]["stale-read"]
    # the same evidence as the anomaly, and which promise was not made
    assert finding == {**strict["anomalies"]["stale-read"][0], "promise": "linearizable-reads"}
    assert finding["ops"] == ops
    log = result["checkers"]["log-linearizable"]
    assert log["valid"] is True
    assert log["finding_types"] == ["stale-read"] and log["anomaly_types"] == []
    assert log["finding_counts"] == {"stale-read": 1} and log["anomaly_counts"] == {}


def test_a_lost_write_is_a_finding_for_a_target_that_does_not_promise_durability() -> None:
    b = Builder()
    _, ack = b.append(1, 10, 0)
    b.append(1, 11, 1)
    _, read = b.read(2, 0, 2, [[0, None], [1, 11]])
    assert judged(b, EVERY)["anomaly_types"] == ["lost-write"]
    result = judged(b, without("acked-writes-durable"))
    assert result["valid"] is True
    assert result["finding_types"] == ["lost-write"]
    finding = result["findings"]["lost-write"][0]
    assert {ack, read} <= set(finding["ops"])
    assert finding["promise"] == "acked-writes-durable"
    # the summary counts it among the findings as it would among the anomalies
    from checkers import summary
    assert "  lost-write: 1 of 2 acknowledged appends lost (promise not made: " \
        "acked-writes-durable)\n" in summary.render(result, b.ops)


def test_a_duplicate_is_a_finding_only_without_the_no_duplicates_promise() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 2, [[0, 10], [1, 10]])
    assert judged(b, EVERY)["anomaly_types"] == ["duplicate"]
    result = judged(b, without("no-duplicates"))
    assert result["valid"] is True and result["finding_types"] == ["duplicate"]


def test_always_judged_kinds_stay_anomalies_whatever_the_promises() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 2, [[0, 10], [1, 99]])
    b.read(3, 0, 2, [[0, 12], [1, 99]])  # offset 0 holds 10 and 12
    result = judged(b, [])
    assert result["valid"] is False
    assert {"phantom", "inconsistent-offsets"} <= set(result["anomaly_types"])
    assert not {"phantom", "inconsistent-offsets"} & set(result["finding_types"])


def test_a_checker_with_a_kept_anomaly_stays_invalid_beside_its_findings() -> None:
    # one read shows a phantom and misses an acknowledged value: log-anomalies finds both
    b = Builder()
    b.append(1, 10, 0)
    b.append(1, 11, 1)
    b.read(2, 0, 2, [[0, 99], [1, 11]])
    result = judged(b, without("acked-writes-durable"))
    anomalies = result["checkers"]["log-anomalies"]
    assert anomalies["valid"] is False
    assert "phantom" in anomalies["anomaly_types"]
    assert "lost-write" in anomalies["finding_types"]
    assert "lost-write" not in anomalies["anomalies"]
    assert result["valid"] is False


def test_nonlinearizable_kv_is_a_finding_without_the_linearizable_promise() -> None:
    b = Builder()
    b.r_write(1, "x", 1)
    b.r_write(1, "x", 2)
    _, stale = b.r_read(2, "x", 1)
    test: dict[str, Any] = {"workload": "kv"}
    assert workloads.check(b.ops, {**test, "promises": EVERY})["valid"] is False
    result = workloads.check(b.ops, {**test, "promises": without("linearizable")})
    assert result["valid"] is True
    assert stale in result["findings"]["nonlinearizable"][0]["ops"]


def test_unknown_stays_unknown() -> None:
    # the pure function never turns an undecided checker into a pass
    undecided = {"valid": "unknown", "error": "search budget spent",
                 "anomalies": {"stale-read": [{"ops": [1, 2], "explanation": "x"}]}}
    assert promises.judge({"c": undecided}, [])["c"]["valid"] == "unknown"
    # and a run that did not finish stays unknown with its findings reported
    b, _ = stale_read()
    result = judged(b, without("linearizable-reads"), outcome="interrupted")
    assert result["valid"] == "unknown"
    assert result["finding_types"] == ["stale-read"]


def test_a_result_with_nothing_unpromised_is_left_as_it_was() -> None:
    result = {"valid": False, "anomalies": {"phantom": [{"ops": [3], "explanation": "x"}]},
              "anomaly_types": ["phantom"]}
    assert promises.judge({"log": result}, [])["log"] is result
    failed_without_anomalies = {"valid": False, "error": "bad"}
    assert promises.judge({"c": failed_without_anomalies}, [])["c"]["valid"] is False


def test_promises_absent_or_damaged_mean_every_promise() -> None:
    assert promises.promised({}) == frozenset(PROMISES)
    assert promises.promised({"promises": "linearizable"}) == frozenset(PROMISES)
    assert promises.promised({"promises": [1]}) == frozenset(PROMISES)
    assert promises.promised({"promises": []}) == frozenset()
    assert set(promises.KIND_PROMISE.values()) <= set(PROMISES)


def test_without_node_data_raft_invariants_and_snapshots_are_not_run(tmp_path: Path) -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 1, [[0, 10]], final=True)
    # node directories with logs only, as etcd's and NATS's collect() leave them
    run = write_run(tmp_path, b.ops, {"node_data": False, "promises": EVERY})
    for node in ("n1", "n2"):
        (run / "nodes" / node).mkdir()
        (run / "nodes" / node / "node.log").write_text("started\n")
    result = workloads.check_run(run)
    assert set(result["checkers"]) == {"log-linearizable", "log-anomalies", "completeness"}
    assert result["valid"] is True
    # the same directories with node_data claimed (or not recorded): the node checkers run
    test = json.loads((run / "test.json").read_text())
    for recorded in ({**test, "node_data": True}, {k: v for k, v in test.items() if k != "node_data"}):
        (run / "test.json").write_text(json.dumps(recorded))
        assert {"raft-invariants", "snapshots"} <= set(workloads.check_run(run)["checkers"])


def test_a_stored_run_is_rechecked_under_its_recorded_promises(tmp_path: Path) -> None:
    b, _ = stale_read()
    nodes = {"n1": node_files([10, 11], 2)}
    run = write_run(tmp_path, b.ops, {"promises": without("linearizable-reads")}, nodes)
    result = workloads.check_run(run)
    assert result["finding_types"] == ["stale-read"]
    assert "stale-read" not in result["anomaly_types"]
    old = write_run(tmp_path / "old", b.ops, None, nodes)  # no `promises`: every promise holds
    assert "stale-read" in workloads.check_run(old)["anomaly_types"]


def test_the_summary_lists_findings_apart_from_anomalies() -> None:
    from checkers import summary

    b, ops = stale_read()
    text = summary.render(judged(b, without("linearizable-reads")), b.ops)
    assert "anomalies: none" in text
    findings = text[text.index("findings ("):]
    assert "stale-read: 1 (promise not made: linearizable-reads)" in findings
    assert f"#{ops[0]} " in findings  # the ops that show it, as for an anomaly
    strict = summary.render(judged(b, EVERY), b.ops)
    assert "findings (" not in strict and "stale-read: 1" in strict
