"""The membership checker (KIP-853): voter changes reported ok must be committed in the nodes' logs,
and the final voter set must be the log's; what it counts (committed changes, leader removals)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chk_runs import write_run

import workloads
from checkers import membership, node_data
from checkers.summary import render

INITIAL = ["n1", "n2", "n3"]


def change(node: int, ts: float, kind: str, voter: int, offset: int, epoch: int,
           voters: list[int]) -> dict[str, Any]:
    return {"ts": ts, "node": node, "type": "voter-change", "change": kind, "voter": voter,
            "directory_id": f"d{voter}", "offset": offset, "epoch": epoch, "hw": offset,
            "voters": voters}


def node(node_id: int, hw: int, log_epochs: list[int], events: list[dict[str, Any]] | None = None,
         log_start: int = 0) -> dict[str, Any]:
    """A node whose log holds one entry per epoch of `log_epochs` (from `log_start`)."""
    return {"events": [{"ts": 1.0, "node": node_id, "type": "start", "pid": 1}, *(events or [])],
            "log": [{"offset": log_start + i, "epoch": e, "value": None, "control": True}
                    for i, e in enumerate(log_epochs)],
            "final": {"node_id": node_id, "high_watermark": hw, "epoch": max(log_epochs or [1]),
                      "leader": 1, "log_start_offset": log_start}}


def nemesis(index: int, op: str, name: str, result: str, leader: str = "n1") -> list[dict[str, Any]]:
    value = {"op": op, "node": name, "nodes": [name], "leader": leader, "voters": INITIAL}
    return [{"index": index, "time": index * 10**9, "process": "nemesis", "type": "invoke",
             "f": "start-membership", "value": value},
            {"index": index + 1, "time": index * 10**9 + 1, "process": "nemesis", "type": "ok",
             "f": "start-membership", "value": {**value, "result": result}}]


def judge(tmp_path: Path, history: list[dict[str, Any]], nodes: dict[str, dict[str, Any]],
          final_voters: list[str] | None = None) -> dict[str, Any]:
    test: dict[str, Any] = {"nemesis": ["membership"], "nodes": INITIAL,
                            "membership": {"spares": ["n4"]}}
    if final_voters is not None:
        test["membership"]["final_quorum"] = {"voters": final_voters, "leader": "n2"}
    run = write_run(tmp_path, history, test=test, nodes=nodes)
    dirs = {p.name: p for p in (run / "nodes").iterdir()}
    return membership.check(history, test, node_data.read(dirs))


# leader n1 adds n4 at offset 3 (epoch 1), then removes itself at offset 5 (epoch 1)
EVENTS = [change(1, 2.0, "add", 4, 3, 1, [1, 2, 3, 4]),
          change(1, 3.0, "remove", 1, 5, 1, [2, 3, 4]),
          {"ts": 3.5, "node": 1, "type": "removed-leader-resigns", "epoch": 1, "offset": 5}]


def _cluster(hw: int = 7) -> dict[str, dict[str, Any]]:
    return {"n1": node(1, hw, [1] * 7, EVENTS), "n2": node(2, hw, [1] * 7 + [2]),
            "n3": node(3, hw, [1] * 7), "n4": node(4, hw, [1] * 7)}


def test_committed_changes_are_valid_and_counted(tmp_path: Path) -> None:
    history = nemesis(0, "add", "n4", "ok") + nemesis(2, "remove", "n1", "ok")
    result = judge(tmp_path, history, _cluster(), final_voters=["n2", "n3", "n4"])
    assert result["valid"] is True, result["anomalies"]
    assert result["committed"] == 2 and result["committed_by_kind"] == {"add": 1, "remove": 1}
    assert result["leader_removals"] == 1 and result["resignations"] == 1
    assert result["requested"] == 2 and result["ok"] == 2
    assert result["final_voters"] == ["n2", "n3", "n4"]


def test_an_ok_change_that_never_committed_is_lost(tmp_path: Path) -> None:
    # every node's high watermark stopped at 5: the removal at offset 5 is not committed
    history = nemesis(0, "add", "n4", "ok") + nemesis(2, "remove", "n1", "ok")
    result = judge(tmp_path, history, _cluster(hw=5))
    assert result["anomaly_types"] == ["voter-change-lost"]
    lost = result["anomalies"]["voter-change-lost"][0]
    assert lost["ops"] == [3] and lost["node"] == "n1" and lost["change"] == "remove"
    assert result["committed"] == 1 and result["leader_removals"] == 0


def test_a_change_truncated_away_does_not_count_even_if_its_offset_committed(
        tmp_path: Path) -> None:
    # the entry at offset 5 is from epoch 2 on every node: n1's removal (epoch 1) was replaced
    nodes = {"n1": node(1, 7, [1] * 5 + [2, 2], EVENTS), "n2": node(2, 7, [1] * 5 + [2, 2]),
             "n3": node(3, 7, [1] * 5 + [2, 2])}
    history = nemesis(0, "remove", "n1", "ok")
    result = judge(tmp_path, history, nodes)
    assert result["anomaly_types"] == ["voter-change-lost"]


def test_a_change_whose_answer_was_lost_may_commit_or_not(tmp_path: Path) -> None:
    history = nemesis(0, "add", "n4", "request-timed-out") + nemesis(2, "remove", "n1", "ok")
    result = judge(tmp_path, history, _cluster(), final_voters=["n2", "n3", "n4"])
    assert result["valid"] is True
    assert result["outcomes"] == {"ok": 1, "request-timed-out": 1}


def test_the_ok_changes_match_in_order(tmp_path: Path) -> None:
    # reported: remove n1 then add n4; committed: add n4 then remove n1. The second cannot match
    # a change before the first one's
    history = nemesis(0, "remove", "n1", "ok") + nemesis(2, "add", "n4", "ok")
    result = judge(tmp_path, history, _cluster())
    assert result["anomaly_types"] == ["voter-change-lost"]
    assert result["anomalies"]["voter-change-lost"][0]["change"] == "add"


def test_a_final_voter_set_the_log_does_not_end_with_is_a_mismatch(tmp_path: Path) -> None:
    history = nemesis(0, "add", "n4", "ok")
    result = judge(tmp_path, history, _cluster(), final_voters=["n1", "n2", "n3", "n4"])
    assert result["anomaly_types"] == ["final-voters-mismatch"]
    # ... while the set of the last committed change is right
    assert judge(tmp_path / "again", history, _cluster(),
                 final_voters=["n2", "n3", "n4"])["valid"] is True


def test_without_changes_the_initial_set_must_remain(tmp_path: Path) -> None:
    nodes = {"n1": node(1, 3, [1] * 3), "n2": node(2, 3, [1] * 3)}
    assert judge(tmp_path, [], nodes, final_voters=["n1", "n2"])["skipped"]
    history = nemesis(0, "add", "n4", "request-timed-out")
    result = judge(tmp_path / "b", history, nodes, final_voters=INITIAL)
    assert result["valid"] is True and result["committed"] == 0
    result = judge(tmp_path / "c", history, nodes, final_voters=["n1", "n2"])
    assert result["anomaly_types"] == ["final-voters-mismatch"]


def test_changes_below_every_log_start_count_when_below_a_high_watermark(tmp_path: Path) -> None:
    nodes = {"n1": node(1, 9, [1, 1], EVENTS, log_start=7), "n2": node(2, 9, [1, 1], log_start=7)}
    history = nemesis(0, "add", "n4", "ok") + nemesis(2, "remove", "n1", "ok")
    assert judge(tmp_path, history, nodes)["committed"] == 2


def test_compose_runs_it_for_membership_runs_and_the_summary_counts(tmp_path: Path) -> None:
    history = [
        {"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "append",
         "value": {"value": 1}},
        {"index": 1, "time": 1, "process": 0, "type": "ok", "f": "append",
         "value": {"value": 1, "offset": 0}},
        *nemesis(2, "remove", "n1", "ok"),
    ]
    test = {"nemesis": ["membership"], "nodes": INITIAL, "workload": "append",
            "outcome": "complete", "membership": {"final_quorum": {"voters": ["n2", "n3"]}}}
    removal = [change(1, 3.0, "remove", 1, 5, 1, [2, 3])]
    nodes = {"n1": node(1, 7, [1] * 7, removal), "n2": node(2, 7, [1] * 7),
             "n3": node(3, 7, [1] * 7)}
    run = write_run(tmp_path, history, test=test, nodes=nodes)
    results = workloads.check_run(run)
    found = results["checkers"]["membership"]
    assert found["valid"] is True and found["leader_removals"] == 1
    text = render(results, history)
    assert "membership: 1 voter change(s) committed (1 remove), leader removed 1 time(s)" in text
    # a run without the membership nemesis has no such checker
    plain = write_run(tmp_path / "plain", history[:2], test={"nemesis": ["partition"]},
                      nodes={"n1": node(1, 1, [1])})
    assert "membership" not in workloads.check_run(plain)["checkers"]


# --- the rules judged from a leader's own events ---------------------------------------------------


def voters_event(node_id: int, ts: float, offset: int, voters: list[int]) -> dict[str, Any]:
    return {"ts": ts, "node": node_id, "type": "voters", "epoch": 1, "voters": voters,
            "offset": offset}


def hw_event(node_id: int, ts: float, hw: int, epoch: int = 1) -> dict[str, Any]:
    return {"ts": ts, "node": node_id, "type": "high-watermark", "epoch": epoch, "hw": hw}


def test_a_change_appended_while_the_last_is_uncommitted_is_concurrent(tmp_path: Path) -> None:
    add = change(1, 2.0, "add", 4, 3, 1, [1, 2, 3, 4])
    second = {**change(1, 2.5, "remove", 2, 4, 1, [1, 3, 4]), "hw": 3}  # offset 3 not committed
    events = [add, voters_event(1, 2.0, 3, [1, 2, 3, 4]), second,
              voters_event(1, 2.5, 4, [1, 3, 4])]
    nodes = {"n1": node(1, 6, [1, 1, 1, 1, 1, 1], events)}
    result = judge(tmp_path, [], nodes)
    assert not result["valid"]
    assert set(result["anomalies"]) == {"concurrent-voter-changes"}
    # the same two changes, the second appended once the first committed: valid
    second_ok = {**second, "hw": 4}
    nodes = {"n1": node(1, 6, [1, 1, 1, 1, 1, 1], [add, voters_event(1, 2.0, 3, [1, 2, 3, 4]),
                                                    hw_event(1, 2.2, 4), second_ok])}
    assert judge(tmp_path / "ok", [], nodes)["valid"]


def test_a_removed_leader_that_commits_on_leads_on(tmp_path: Path) -> None:
    removal = change(1, 3.0, "remove", 1, 5, 1, [2, 3, 4])
    resigned = [removal, hw_event(1, 3.2, 6),
                {"ts": 3.2, "node": 1, "type": "removed-leader-resigns", "epoch": 1, "offset": 5},
                hw_event(1, 5.0, 9, epoch=2)]  # later, as a follower of the next epoch
    nodes = {"n1": node(1, 9, [1] * 9, resigned)}
    assert judge(tmp_path, [], nodes)["valid"]
    leads_on = [removal, hw_event(1, 3.2, 6), hw_event(1, 3.4, 7)]
    nodes = {"n1": node(1, 9, [1] * 9, leads_on)}
    result = judge(tmp_path / "bad", [], nodes)
    assert set(result["anomalies"]) == {"removed-leader-leads-on"}


def test_the_two_changes_of_one_step_may_commit_in_either_order(tmp_path: Path) -> None:
    value = {"op": "add", "node": "n4", "nodes": ["n4", "n3"], "leader": "n1",
             "voters": INITIAL, "also": {"op": "remove", "node": "n3"}}
    history = [{"index": 0, "time": 0, "process": "nemesis", "type": "invoke",
                "f": "start-membership", "value": value},
               {"index": 1, "time": 1, "process": "nemesis", "type": "ok",
                "f": "start-membership",
                "value": {**value, "result": "ok", "also": {**value["also"], "result": "ok"}}}]
    events = [change(1, 2.0, "remove", 3, 3, 1, [1, 2]), change(1, 2.1, "add", 4, 4, 1, [1, 2, 4])]
    others = {f"n{i}": node(i, 6, [1] * 6) for i in (2, 3, 4)}
    nodes = {"n1": node(1, 6, [1] * 6, events), **others}
    result = judge(tmp_path, history, nodes)
    assert "voter-change-lost" not in (result.get("anomalies") or {}), result
    assert result["requested"] == 2 and result["ok"] == 2
    # the removal reported ok but never appended: lost
    nodes = {"n1": node(1, 6, [1] * 6, events[1:]), **others}
    lost = judge(tmp_path / "lost", history, nodes)["anomalies"]["voter-change-lost"]
    assert [a["change"] for a in lost] == ["remove"]
