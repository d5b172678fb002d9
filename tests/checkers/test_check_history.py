"""Loading history.jsonl: a bad history is refused with its line number and what is wrong, by
`load` (kraft check) as by `read` (kraft analyze), which says it instead of raising."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder

from checkers.history import BLANK, NOT_JSON, HistoryError, decode, load, open_invokes, pairs, read


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


def test_an_invoke_the_history_ends_before_completing_is_open_not_an_error(tmp_path: Path) -> None:
    # As in Jepsen, an op still in flight when the history ends (an interrupted run) has an
    # unknown outcome; it is no reason to refuse the history.
    ops = good()
    ops.append({"index": 6, "time": 9, "process": 5, "type": "invoke", "f": "read", "value": {"from": 0}})
    loaded = load(write(tmp_path / "h.jsonl", ops))
    assert open_invokes(loaded) == [6]
    assert open_invokes(good()) == []


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


def test_too_deep_a_line_is_bad_json_not_a_crash(tmp_path: Path) -> None:
    expect(tmp_path, good(), 2, "bad JSON: nested too deeply", raw={2: "[" * 100_000})


@pytest.mark.parametrize("text", [
    '{"a": 1}\n', '{"a": 1}', ' {"a": 1}\n', '{"a": 1}  \r\n', '{"a": 1} 2\n', '{"a": 1}\x0c\n',
    '1\n', '"x"\n', 'NaN\n', 'null\n', '[1, 2]\n', '{"a": \n', '\n', ' \t\n', '\x0c\n',
    '\x00 not json\n', '{"a": "\u2028"}\n', "[" * 100_000 + "\n"])
def test_decode_reads_a_line_as_json_loads_does(text: str) -> None:
    got = decode(text)
    if not text.strip():
        assert got is BLANK
        return
    try:
        want = json.loads(text)
    except (ValueError, RecursionError):
        assert got is NOT_JSON
    else:
        assert got == want or (got != got and want != want)  # NaN


def test_read_reports_what_load_raises_and_counts_every_line(tmp_path: Path) -> None:
    path = write(tmp_path / "h.jsonl", good(), raw={2: '{"index": 1, "ti'})
    found = read(path)
    assert (found.lines, found.ops) == (len(good()), [])
    assert found.error is not None and found.error.line == 2
    with pytest.raises(HistoryError) as caught:
        load(path)
    assert str(caught.value) == str(found.error)
    fine = read(write(tmp_path / "fine.jsonl", good()))
    assert (fine.lines, fine.ops, fine.error) == (len(good()), good(), None)
    assert read(tmp_path / "absent.jsonl").error is not None


def test_a_nemesis_op_recorded_by_the_harness_carries_its_wall_clock_and_loads(
        tmp_path: Path) -> None:
    from contracts.history import History

    path = tmp_path / "history.jsonl"
    history = History(path)
    history.record({"process": "nemesis", "type": "invoke", "f": "start-partition", "value": None})
    client = history.record({"process": 0, "type": "invoke", "f": "read", "value": {"from": 0}})
    history.record({"process": 0, "type": "fail", "f": "read", "value": {"from": 0},
                    "error": "timeout"})
    history.record({"process": "nemesis", "type": "ok", "f": "start-partition", "value": None})
    history.close()
    ops = load(path)
    assert "wall" not in client and "wall" not in ops[1]
    wall = ops[0]["wall"]
    assert wall.endswith("+00:00") and "T" in wall


@pytest.mark.parametrize("wall", ["yesterday", "2026-11-22T21:30:00", 12345])
def test_a_wall_field_that_is_no_instant_with_its_offset_is_refused(
        tmp_path: Path, wall: Any) -> None:
    ops = good()
    ops[2]["wall"] = wall
    expect(tmp_path, ops, 3, "wall must be an ISO 8601 instant")
