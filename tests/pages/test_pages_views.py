"""The models behind the pages: leadership from node events, fault bands, the timeline's data."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder
from pages_runs import START, failing_run, zombie_history

from checkers import leaders, timeline
from checkers.node_data import NodeData


def page_data(page: str) -> dict[str, Any]:
    start = page.index("<script type='application/json' id='data'>") + len("<script type='application/json' id='data'>")
    data = json.loads(page[start:page.index("</script>", start)])
    assert isinstance(data, dict)
    return data


def test_leadership_of_a_zombie_leader(tmp_path: Path) -> None:
    run = failing_run(tmp_path)
    view = leaders.read(run, zombie_history().ops)
    assert view.nodes == ("n1", "n2", "n3") and view.problem is None
    assert view.alignment.startswith("approximate, within 0.5 s")
    assert [(t.start, t.end, t.leaders, t.split_brain) for t in view.tenures()] == [
        (0.0, 1700.0, (("n1", 1),), False),
        (1700.0, 4900.0, (("n1", 1), ("n2", 2)), True),
        (4900.0, 6250.0, (("n2", 2),), False),
    ]
    n2 = [(s.role, s.epoch, s.leader, s.start, s.end) for s in view.spans if s.node == "n2"]
    assert n2 == [("follower", 1, "n1", 10.0, 1500.0), ("candidate", 2, None, 1500.0, 1700.0),
                  ("leader", 2, "n2", 1700.0, 6250.0)]
    assert [(m.node, m.kind, m.time) for m in view.marks] == [("n1", "truncate", 4900.0)]


def test_the_nemesis_wall_clock_aligns_exactly_and_test_start_roughly() -> None:
    node = NodeData("n1", events=[{"type": "state", "ts": START.timestamp() * 1e3 + 9_000, "node": 1,
                                   "state": "leader", "epoch": 3, "leader": 1}])
    history = [{"index": 0, "time": 2_000_000_000, "process": "nemesis", "type": "info",
                "f": "start-kill", "value": {"nodes": ["n1"]}, "wall": START.replace(second=5).isoformat()}]
    zero, how = leaders.clock_zero(history, {"start_time": START.isoformat()}, [node])
    assert how.startswith("exact") and zero == pytest.approx(START.timestamp() * 1e3 + 3_000)
    zero, how = leaders.clock_zero([], {"start_time": START.isoformat()}, [NodeData("n1")])
    assert how.startswith("approximate, seconds early") and zero == pytest.approx(START.timestamp() * 1e3)
    assert leaders.clock_zero([], {}, [])[0] is None


def test_fault_bands_name_the_nodes_they_touched() -> None:
    [band] = leaders.fault_bands(zombie_history().ops)
    assert (band.kind, band.nodes, band.start, band.end) == ("partition", "n1 | n2 n3", 1500.0, 4750.0)
    assert leaders.nodes_touched({"target": "majority", "nodes": ["n2", "n3"]}) == "n2 n3"
    assert leaders.nodes_touched({"target": "n1"}) == "n1"
    assert leaders.nodes_touched(None) == ""


def test_retired_processes_hand_their_column_on() -> None:
    data = page_data(timeline.page(zombie_history().ops))
    assert data["processes"] == ["1", "2", "3", "4", "5", "6", "7", "8"]
    owners = [[data["processes"][p] for _, _, p in column] for column in data["columns"]]
    assert owners == [["1", "5", "4", "6", "7", "8"], ["2"], ["3"]]
    for column in data["columns"]:  # one after another, never two at once
        assert all(a[1] < b[0] for a, b in itertools.pairwise(column))


@pytest.mark.parametrize(("f", "value", "label"), [
    ("append", {"value": 7, "offset": 3}, "append 7 @3"),
    ("read", {"from": 2, "hw": 9, "records": [[2, 1]]}, "read [2,9)"),
    ("read", {"key": "x", "value": None}, "read x=null"),
    ("cas", {"key": "x", "from": 1, "to": 2, "swapped": False}, "cas x 1→2 ✗"),
    ("write", {"key": "k", "value": "v"}, "write k=v"),
    ("describe", {"node": "n4", "role": "broker", "offset": 14, "self": {"state": "active"},
                  "brokers": {"5": {"state": "inactive"}, "4": {"state": "active"}}},
     "describe active @14 4:A 5:I"),
    ("describe", {"node": "n1", "role": "controller", "offset": 9, "self": None,
                  "brokers": {}}, "describe @9"),
])
def test_operations_are_labelled_with_f_and_value(f: str, value: Any, label: str) -> None:
    b = Builder()
    b.invoke(1, f, value)
    b.complete(1, "ok", value)
    [op] = page_data(timeline.page(b.ops))["ops"]
    assert op[4] == label


def test_a_long_history_is_cut_but_keeps_every_op_an_anomaly_names(monkeypatch: pytest.MonkeyPatch) -> None:
    b = Builder()
    for i in range(20):
        b.append(1, i, i)
    monkeypatch.setattr(timeline, "MAX_OPS", 5)
    page = timeline.page(b.ops, {"lost-write": [{"ops": [39], "explanation": "lost"}]})
    data = page_data(page)
    assert [op[5] for op in data["ops"]] == [0, 2, 4, 6, 8, 38]
    assert "20 operations (6 shown: the first 5, and every op an anomaly names)" in page
    assert "id='op-38' class='op anomaly'" in page and "<span id='op-39'></span>" in page


def test_values_cannot_end_the_pages_script() -> None:
    b = Builder()
    b.invoke(1, "write", {"key": "</script><script>alert(1)</script>", "value": 1})
    b.complete(1, "ok", {"key": "</script><script>alert(1)</script>", "value": 1})
    page = timeline.page(b.ops, {"stale-read": [{"ops": [1], "explanation": "<b>bold</b>"}]})
    assert page.count("</script>") == 2 and "<script>alert" not in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page


def test_leaders_png_with_and_without_node_data(tmp_path: Path) -> None:
    run = failing_run(tmp_path)
    leaders.render(zombie_history().ops, run, tmp_path / "with.png")
    leaders.render(zombie_history().ops, tmp_path / "nowhere", tmp_path / "without.png")
    for name in ("with.png", "without.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
