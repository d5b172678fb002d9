"""The interim append checker: each anomaly it names, on small hand-written histories."""

from __future__ import annotations

from typing import Any

from workloads.append import interim_check, pairs


def history(*ops: tuple[Any, ...]) -> list[dict[str, Any]]:
    out = []
    for i, (process, type_, f, value, *extra) in enumerate(ops):
        op = {"index": i, "time": i, "process": process, "type": type_, "f": f, "value": value}
        if extra:
            op["final"] = True
        out.append(op)
    return out


def test_clean_history_is_valid() -> None:
    h = history((0, "invoke", "append", {"value": 1}),
                (0, "ok", "append", {"value": 1, "offset": 0}),
                (1, "invoke", "read", {"from": 0}, True),
                (1, "ok", "read", {"from": 0, "hw": 1, "records": [[0, 1]]}, True))
    assert interim_check(h)["valid"] is True


def test_no_final_read_is_unknown() -> None:
    h = history((0, "invoke", "append", {"value": 1}),
                (0, "ok", "append", {"value": 1, "offset": 0}))
    assert interim_check(h)["valid"] == "unknown"


def test_lost_append_names_the_acknowledgement() -> None:
    h = history((0, "invoke", "append", {"value": 1}),
                (0, "ok", "append", {"value": 1, "offset": 0}),
                (1, "invoke", "read", {"from": 0}, True),
                (1, "ok", "read", {"from": 0, "hw": 0, "records": []}, True))
    result = interim_check(h)
    assert result["valid"] is False
    assert result["anomalies"]["lost-append"][0]["ops"] == [1]


def test_two_values_at_one_offset_and_a_stale_read() -> None:
    h = history((0, "invoke", "append", {"value": 1}),
                (0, "ok", "append", {"value": 1, "offset": 0}),
                (1, "invoke", "read", {"from": 0}),
                (1, "ok", "read", {"from": 0, "hw": 0, "records": []}),
                (2, "invoke", "read", {"from": 0}, True),
                (2, "ok", "read", {"from": 0, "hw": 1, "records": [[0, 7]]}, True))
    result = interim_check(h)
    assert set(result["anomaly-types"]) >= {"divergent-offset", "stale-read", "lost-append"}
    assert result["anomalies"]["stale-read"][0]["ops"] == [1, 2, 3]


def test_pairs_match_invokes_to_their_completion_and_skip_the_nemesis() -> None:
    h = history((0, "invoke", "append", {"value": 1}),
                ("nemesis", "invoke", "start-kill", None),
                (1, "invoke", "read", {"from": 0}),
                (0, "info", "append", {"value": 1}),
                ("nemesis", "ok", "start-kill", {}))
    assert [(a["index"], b and b["index"]) for a, b in pairs(h)] == [(0, 3), (2, None)]
