"""Loading history.jsonl: a bad history is refused with its line number and what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder

from checkers.history import HistoryError, load, pairs


def write(path: Path, ops: list[Any], raw: dict[int, str] | None = None) -> Path:
    lines = [json.dumps(op) for op in ops]
    for number, text in (raw or {}).items():
        lines[number - 1] = text
    path.write_text("\n".join(lines) + "\n")
    return path


def good() -> list[dict[str, Any]]:
    b = Builder()
    b.append(1, 10, 0)
    b.nemesis("start-partition")
    b.read(2, 0, 1, [[0, 10]])
    b.nemesis("stop-partition")
    return b.ops


def test_a_good_history_loads_and_pairs(tmp_path: Path) -> None:
    ops = load(write(tmp_path / "h.jsonl", good()))
    assert ops == good()
    assert [(p.invoke["index"], p.completion["index"]) for p in pairs(ops)] == [(0, 1), (3, 4)]


def expect(tmp_path: Path, ops: list[Any], line: int, words: str, raw: dict[int, str] | None = None) -> None:
    path = write(tmp_path / "h.jsonl", ops, raw)
    with pytest.raises(HistoryError) as caught:
        load(path)
    assert caught.value.line == line
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_bad_json_names_the_line(tmp_path: Path) -> None:
    expect(tmp_path, good(), 3, "bad JSON", raw={3: '{"index": 2, "time": '})


def test_invoke_without_completion(tmp_path: Path) -> None:
    ops = good()
    ops.append({"index": 6, "time": 9, "process": 5, "type": "invoke", "f": "read", "value": {"from": 0}})
    expect(tmp_path, ops, 7, "invoke of process 5 (f 'read') has no completion")


def test_completion_without_invoke(tmp_path: Path) -> None:
    ops = good()
    ops.append({"index": 6, "time": 9, "process": 5, "type": "ok", "f": "read", "value": None})
    expect(tmp_path, ops, 7, "ok completion of process 5 with no invoke")


def test_error_detail_is_a_known_field(tmp_path: Path) -> None:
    ops = good()
    ops[1].update(type="info", error="client-crashed", detail="ConnectionResetError: ...")
    assert load(write(tmp_path / "h.jsonl", ops))[1]["detail"].startswith("Connection")


def test_unknown_field(tmp_path: Path) -> None:
    ops = good()
    ops[2]["latency"] = 5
    expect(tmp_path, ops, 3, "unknown field(s) 'latency'")


@pytest.mark.parametrize(("field", "bad", "words"), [
    ("index", 7, "index must be 1"),
    ("time", -1, "time must be non-negative"),
    ("time", "soon", "time must be non-negative"),
    ("process", "p1", "process must be an integer or 'nemesis'"),
    ("type", "done", "type must be one of"),
    ("f", 3, "f must be a non-empty string"),
    ("node", [1], "node must be"),
    ("final", "yes", "final must be true or false"),
])
def test_bad_types(tmp_path: Path, field: str, bad: Any, words: str) -> None:
    ops = good()
    ops[1][field] = bad
    expect(tmp_path, ops, 2, words)


def test_missing_field(tmp_path: Path) -> None:
    ops = good()
    del ops[0]["f"]
    expect(tmp_path, ops, 1, "missing field(s) 'f'")


def test_not_an_object(tmp_path: Path) -> None:
    expect(tmp_path, good(), 2, "must be a JSON object", raw={2: "[1, 2]"})


def test_retired_process_may_not_invoke_again(tmp_path: Path) -> None:
    b = Builder()
    b.append(1, 10, None, "info")
    b.append(1, 11, 0)
    expect(tmp_path, b.ops, 3, "after its info completion on line 2")


def test_completion_must_match_the_invoked_f(tmp_path: Path) -> None:
    ops = good()
    ops[1]["f"] = "read"
    expect(tmp_path, ops, 2, "does not match invoke f 'append'")


def test_line_numbers_count_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    lines = [json.dumps(op) for op in good()]
    lines.insert(1, "")
    lines[3] = "{oops"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryError) as caught:
        load(path)
    assert caught.value.line == 4


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match="cannot read history"):
        load(tmp_path / "absent.jsonl")
