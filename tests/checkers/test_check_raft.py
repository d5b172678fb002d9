"""Raft invariants from the nodes' own records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder
from chk_runs import node_files, write_run

import workloads
from checkers import node_data, raft_invariants


def ev(node: int, type_: str, ts: float, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "node": node, "type": type_, **fields}


def run_invariants(tmp_path: Path, nodes: dict[str, dict[str, Any]],
                   acked: list[tuple[int, int, int]] | None = None) -> dict[str, Any]:
    run = write_run(tmp_path, [], nodes=nodes)
    dirs = {p.name: p for p in (run / "nodes").iterdir()}
    return raft_invariants.check(node_data.read(dirs), acked or [])


def test_agreeing_nodes_are_valid(tmp_path: Path) -> None:
    log = [None, 10, 11]
    result = run_invariants(tmp_path, {"n1": node_files(log, 3, node_id=1),
                                       "n2": node_files(log, 2, node_id=2)}, [(1, 10, 1), (3, 11, 2)])
    assert result["valid"] is True, result["anomalies"]


def test_two_leaders_in_one_epoch(tmp_path: Path) -> None:
    n1 = node_files([], 0, events=[ev(1, "state", 1.0, state="leader", epoch=3, leader=1, voted_for=1)])
    n2 = node_files([], 0, events=[ev(2, "state", 1.5, state="leader", epoch=3, leader=2, voted_for=2)],
                    node_id=2)
    result = run_invariants(tmp_path, {"n1": n1, "n2": n2})
    assert result["anomaly_types"] == ["multiple-leaders"]
    anomaly = result["anomalies"]["multiple-leaders"][0]
    assert anomaly["epoch"] == 3 and anomaly["nodes"] == ["n1", "n2"]


def test_a_node_that_heard_of_a_second_leader_in_its_epoch(tmp_path: Path) -> None:
    """Issue 41: the node's `inconsistent-leader` event (it follows 1 in epoch 3, and a
    BeginQuorumEpoch from 2 claims epoch 3 too) is evidence of two leaders, though 2's own events
    were lost (only n1 left records)."""
    n1 = node_files([], 0, events=[
        ev(1, "state", 1.0, state="follower", epoch=3, leader=3, voted_for=3),
        ev(1, "inconsistent-leader", 1.5, epoch=3, leader=3, claimed=2, source=2,
           message="BeginQuorumEpochRequest"),
    ])
    result = run_invariants(tmp_path, {"n1": n1})
    assert result["anomaly_types"] == ["multiple-leaders"]
    anomaly = result["anomalies"]["multiple-leaders"][0]
    assert anomaly["epoch"] == 3 and anomaly["nodes"] == ["n1"]
    assert "BeginQuorumEpochRequest from 2 to n1" in anomaly["explanation"]


def test_a_node_that_halted_rather_than_truncate_committed_entries(tmp_path: Path) -> None:
    events = [
        ev(1, "high-watermark", 2.0, epoch=5, hw=9),
        ev(1, "fatal", 3.0, epoch=6, hw=9, name="truncation-below-high-watermark",
           detail="asked (diverging-epoch, leader 1, epoch 6) to truncate the log to offset 4"),
    ]
    result = run_invariants(tmp_path, {"n1": node_files([], 0, events=events)})
    assert result["anomaly_types"] == ["committed-truncation"]
    assert "halted" in result["anomalies"]["committed-truncation"][0]["explanation"]


def test_one_leader_per_epoch_across_epochs_is_fine(tmp_path: Path) -> None:
    n1 = node_files([], 0, events=[ev(1, "state", 1.0, state="leader", epoch=3, leader=1, voted_for=1),
                                   ev(1, "state", 2.0, state="follower", epoch=4, leader=2, voted_for=None)])
    n2 = node_files([], 0, events=[ev(2, "state", 1.5, state="follower", epoch=3, leader=1, voted_for=1),
                                   ev(2, "state", 2.0, state="leader", epoch=4, leader=2, voted_for=2)],
                    node_id=2)
    assert run_invariants(tmp_path, {"n1": n1, "n2": n2})["valid"] is True


def test_epoch_and_high_watermark_regressions(tmp_path: Path) -> None:
    events = [
        ev(1, "start", 0.5, pid=1),
        ev(1, "state", 1.0, state="follower", epoch=5, leader=2, voted_for=None),
        ev(1, "high-watermark", 2.0, epoch=5, hw=7),
        ev(1, "high-watermark", 3.0, epoch=5, hw=4),
        ev(1, "state", 4.0, state="follower", epoch=4, leader=2, voted_for=None),
    ]
    result = run_invariants(tmp_path, {"n1": node_files([], 0, events=events)})
    assert result["anomaly_types"] == ["epoch-regression", "hw-regression"]


def test_high_watermark_starts_afresh_after_a_restart(tmp_path: Path) -> None:
    events = [
        ev(1, "start", 0.5, pid=1),
        ev(1, "high-watermark", 2.0, epoch=5, hw=7),
        ev(1, "stop", 2.5, pid=1),
        ev(1, "start", 3.0, pid=2),
        ev(1, "high-watermark", 4.0, epoch=5, hw=3),
    ]
    assert run_invariants(tmp_path, {"n1": node_files([], 0, events=events)})["valid"] is True


def test_truncation_below_the_high_watermark(tmp_path: Path) -> None:
    events = [
        ev(1, "high-watermark", 2.0, epoch=5, hw=7),
        ev(1, "truncate", 3.0, epoch=6, offset=5, reason="diverging epoch"),
        ev(1, "truncate", 4.0, epoch=6, offset=7, reason="diverging epoch"),
    ]
    result = run_invariants(tmp_path, {"n1": node_files([], 0, events=events)})
    assert result["anomaly_types"] == ["committed-truncation"]
    assert result["anomaly_counts"] == {"committed-truncation": 1}


def test_divergent_committed_prefixes(tmp_path: Path) -> None:
    result = run_invariants(tmp_path, {"n1": node_files([None, 10, 11], 3),
                                       "n2": node_files([None, 10, 12], 3, node_id=2),
                                       "n3": node_files([None, 10, 13], 2, node_id=3)})
    assert result["anomaly_types"] == ["log-divergence"]
    assert [a["offset"] for a in result["anomalies"]["log-divergence"]] == [2]


def test_uncommitted_tails_may_differ(tmp_path: Path) -> None:
    result = run_invariants(tmp_path, {"n1": node_files([None, 10, 11], 2),
                                       "n2": node_files([None, 10, 12], 2, node_id=2)})
    assert result["valid"] is True


def test_acknowledged_append_missing_from_the_final_committed_log(tmp_path: Path) -> None:
    result = run_invariants(tmp_path, {"n1": node_files([None, 10, 12], 3)},
                            [(1, 10, 1), (3, 11, 2), (5, 14, 3)])
    assert result["anomaly_types"] == ["lost-write"]
    assert sorted(a["value"] for a in result["anomalies"]["lost-write"]) == [11, 14]
    assert (result["acknowledged_appends"], result["lost_acknowledged"]) == (3, 2)


def test_the_summary_counts_the_values_two_checkers_found_lost_once(tmp_path: Path) -> None:
    from checkers import summary

    b = Builder()
    b.append(1, 10, 0)
    b.append(1, 11, 1)
    b.append(1, 12, 2)
    b.read(2, 0, 3, [[0, 10], [1, None], [2, 12]])  # lacks 11
    b.read(3, 0, 3, [[0, 10], [1, None], [2, 12]])
    # the node's final log lacks 12 (and has 11): each checker proves one value lost
    run = write_run(tmp_path, b.ops, nodes={"n1": node_files([10, 11, 99], 3)})
    result = workloads.check_run(run)
    figures = {name: result["checkers"][name]["lost_acknowledged"]
               for name in ("log-anomalies", "raft-invariants")}
    assert figures == {"log-anomalies": 1, "raft-invariants": 1}
    assert "  lost-write: 2 of 3 acknowledged appends lost (log-anomalies: 1, raft-invariants: 1)" \
        "\n" in summary.render(result, b.ops)


def test_torn_last_event_line_is_tolerated(tmp_path: Path) -> None:
    run = write_run(tmp_path, [], nodes={"n1": node_files([10], 1)})
    events = run / "nodes" / "n1" / "events.jsonl"
    events.write_text(events.read_text() + '{"ts": 9.0, "node": 1, "ty')
    [data] = node_data.read({"n1": run / "nodes" / "n1"})
    assert data.torn_lines == 1 and len(data.events) == 3


def test_a_line_torn_by_a_power_cut_before_the_restart_is_tolerated_elsewhere_not(
        tmp_path: Path) -> None:
    run = write_run(tmp_path, [], nodes={"n1": node_files([10], 1)})
    events = run / "nodes" / "n1" / "events.jsonl"
    whole = events.read_text()
    restart = '{"type": "start", "ts": 20.0, "node": 1, "pid": 7}\n'
    events.write_text(whole + '{"type": "high-wat\n' + restart)
    [data] = node_data.read({"n1": run / "nodes" / "n1"})
    assert data.torn_lines == 1 and data.events[-1]["type"] == "start"
    # a bad line that no restart follows is damage, not a crash: named, not skipped
    later = '{"type": "high-watermark", "ts": 21.0, "node": 1, "epoch": 1, "hw": 1}\n'
    events.write_text(whole + '{"type": "high-wat\n' + later)
    with pytest.raises(node_data.NodeDataError, match=r"events\.jsonl:\d+: bad JSON"):
        node_data.read({"n1": run / "nodes" / "n1"})


def test_check_uses_node_data_and_history_together(tmp_path: Path) -> None:
    b = Builder()
    b.append(1, 10, 1)
    b.read(2, 0, 2, [[0, None], [1, 10]])
    good = write_run(tmp_path / "a", b.ops, nodes={"n1": node_files([None, 10], 2)})
    result = workloads.check_run(good)
    assert result["valid"] is True
    assert "raft-invariants" in result["checkers"]
    bad = write_run(tmp_path / "b", b.ops, nodes={"n1": node_files([None, 99], 2)})
    result = workloads.check_run(bad)
    assert result["valid"] is False
    assert result["checkers"]["raft-invariants"]["anomaly_types"] == ["lost-write"]


def test_unreadable_node_data_gives_unknown(tmp_path: Path) -> None:
    b = Builder()
    b.append(1, 10, 0)
    run = write_run(tmp_path, b.ops, nodes={"n1": node_files([10], 1)})
    (run / "nodes" / "n1" / "log.jsonl").write_text("{not json\n")
    result = workloads.check_run(run)
    assert result["valid"] == "unknown"
    assert "log.jsonl:1" in result["checkers"]["raft-invariants"]["error"]
