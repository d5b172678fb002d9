"""Loading history.jsonl: a bad history is refused with its line number and what is wrong, by
`load` (kraft check) as by `read` (kraft analyze), which says it instead of raising."""

from __future__ import annotations

import gc
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder
from chk_simulated import simulate

from checkers import history as history_module
from checkers.history import (
    BLANK,
    NOT_JSON,
    HistoryError,
    decode,
    load,
    load_stored,
    open_invokes,
    pairs,
    read,
    validate,
)


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


# Both decoders: msgspec's (a dependency), and the standard library's, which reads every line when
# msgspec is not installed. Each must read the same histories to the same ops and refuse the same
# ones with the same line and words.


def stdlib_decoder(monkeypatch: pytest.MonkeyPatch) -> history_module._Decoder:
    """The decoder the module picks when `import msgspec` fails."""
    with monkeypatch.context() as patched:
        patched.setitem(sys.modules, "msgspec", None)  # makes `import msgspec` raise ImportError
        return history_module._decoder()


@pytest.fixture(params=["msgspec", "stdlib"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "stdlib":
        fallback = stdlib_decoder(monkeypatch)
        assert not fallback.checks_fields
        monkeypatch.setattr(history_module, "_DECODER", fallback)
    else:
        assert history_module._DECODER.checks_fields, "msgspec is not installed"
    return str(request.param)


def test_without_msgspec_the_standard_library_reads_the_history(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fallback = stdlib_decoder(monkeypatch)
    assert fallback.loads is history_module._stdlib_loads
    monkeypatch.setattr(history_module, "_DECODER", fallback)
    assert load(write(tmp_path / "h.jsonl", good())) == good()


def both_ways(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Runs the body of a loop once per decoder."""
    fast = history_module._DECODER
    fallback = stdlib_decoder(monkeypatch)
    for name, chosen in (("msgspec", fast), ("stdlib", fallback)):
        monkeypatch.setattr(history_module, "_DECODER", chosen)
        yield name
    monkeypatch.setattr(history_module, "_DECODER", fast)


def outcome(path: Path, keep: bool = True) -> tuple[Any, ...]:
    """What reading a file comes to, in a form two readings can be compared by (NaN included).
    `keep=False`: as `load_stored` reads it, its ops read again from the file, one by one and all
    in order (which must agree)."""
    try:
        found = read(path, keep=keep)
    except (TypeError, UnicodeDecodeError) as exc:
        return ("raises", type(exc).__name__)
    error = None if found.error is None else (found.error.line, str(found.error))
    ops = list(found.ops)
    if not keep:
        assert repr([found.ops[at] for at in range(len(found.ops))]) == repr(ops)
    return found.lines, repr(ops), error


def reference(path: Path) -> tuple[Any, ...]:
    """The reading the format defines: every line by json.loads first, then `validate`."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        return ("raises", type(exc).__name__)
    # lines as text mode reads them: \n, \r\n and a lone \r end one
    texts = [line + "\n" for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    texts[-1] = texts[-1][:-1]
    count = sum(1 for line in texts if line.strip())
    ops: list[Any] = []
    lines: list[int] = []
    for number, line in enumerate(texts, 1):
        if not line.strip():
            continue
        try:
            ops.append(json.loads(line))
        except (ValueError, RecursionError):
            where = f"{path}:{number}"
            return count, "[]", (number, f"{where}: {history_module._json_problem(line)}")
        lines.append(number)
    try:
        validate(ops, lines)
    except HistoryError as exc:
        return len(ops), "[]", (exc.line, f"{path}:{exc.line}: {exc.message}")
    except TypeError as exc:
        return ("raises", type(exc).__name__)
    return len(ops), repr(ops), None


ODD_VALUES = [None, True, 0, -1, 2**64, -(2**63) - 1, 10**30, 1.5, -0.0, "", "x", "nemesis", "invoke",
              "ok", "read", [], [1], {}, {"a": 1}, "2026-11-22T21:30:00+00:00", "n1"]
ODD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e400", "123456789012345678901234567890", "1E2",
               "-0", '"\\ud800"']
KEYS = ["index", "time", "process", "type", "f", "value", "node", "error", "detail", "final", "wall",
        "latency"]


def spoil(rng: random.Random, text: str) -> str:
    """A line of a history, broken in one of the ways a history can be."""
    try:
        op = json.loads(text)
    except (ValueError, RecursionError):
        return text  # broken already
    if not isinstance(op, dict):
        return text
    roll = rng.random()
    if roll < 0.4:
        op[rng.choice(KEYS)] = rng.choice(ODD_VALUES)
        return json.dumps(op)
    if roll < 0.5:
        op.pop(rng.choice(KEYS), None)
        return json.dumps(op)
    if roll < 0.6:
        return text[:-1] + f', "{rng.choice(KEYS)}": {rng.choice(ODD_NUMBERS)}}}'
    if roll < 0.7:
        return text[: rng.randrange(len(text))]
    return rng.choice([" " + text + " \t", text + "\r", text.replace(", ", ",\r", 1), "\x0c", "",
                       '{"index": 0, ' + text[1:], text + " 2", "[1, 2]", "\ufeff" + text,
                       text.replace(":", ":\n", 1), "[" * 2000])


def test_both_decoders_read_and_refuse_as_json_loads_and_validate_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A differential test of the streaming reader: simulated histories with a line or two broken
    # (bad fields, odd numbers, bad JSON, line ends, blank lines), read by each decoder, against
    # json.loads of every line and then `validate`, as the format is defined.
    rng = random.Random(18)
    path = tmp_path / "h.jsonl"
    errors = 0
    for case in range(300):
        lines = [json.dumps(op) for op in simulate(case, rng.randrange(1, 12))]
        for _ in range(rng.randrange(3)):
            where = rng.randrange(len(lines))
            lines[where] = spoil(rng, lines[where])
        data = ("\n".join(lines) + "\n").encode()
        if rng.random() < 0.03:
            cut = rng.randrange(len(data))
            data = data[:cut] + b"\xff" + data[cut:]
        path.write_bytes(data)
        want = reference(path)
        errors += want[-1] is not None
        # chunks of a few bytes too: lines that span chunks, a \r\n cut between two
        monkeypatch.setattr(history_module, "_CHUNK", rng.choice([1, 7, 64, 1 << 20]))
        for name in both_ways(monkeypatch):
            assert outcome(path) == want, (name, data)
            assert outcome(path, keep=False) == want, (name, "stored", data)
    assert 100 < errors < 200, errors  # both kinds, valid and refused, were read


@pytest.mark.parametrize(("line", "raw", "words"), [
    (2, '{"index": 1, "time": 1000000, "process": 1, "type": "ok", "f": "append", "latency": 5}',
     "unknown field(s) 'latency'"),
    (2, '{"index": 1, "time": 1000000, "type": "ok", "f": "append"}', "missing field(s) 'process'"),
    (2, '{"index": 1, "time": -Infinity, "process": 1, "type": "ok", "f": "append"}',
     "time must be non-negative nanoseconds, got -inf"),
    (2, '{"index": 18446744073709551617, "time": 1, "process": 1, "type": "ok", "f": "append"}',
     "index must be 1 (operations are numbered 0, 1, 2 ...), got 18446744073709551617"),
    (2, '{"index": 1, "time": 1, "process": 1, "type": "ok", "f": "append", "index": 9}',
     "index must be 1"),
    (2, '{"index": 1, "time": 1e400, "process": 1, "type": "ok", "f": "append"} x', "bad JSON"),
    (3, "[1, 2]", "must be a JSON object, not list"),
])
def test_the_same_bad_line_gives_the_same_error_through_both_decoders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: int, raw: str, words: str) -> None:
    path = write(tmp_path / "h.jsonl", good(), raw={line: raw})
    seen = set()
    for _ in both_ways(monkeypatch):
        with pytest.raises(HistoryError) as caught:
            load(path)
        assert caught.value.line == line and words in caught.value.message
        seen.add(str(caught.value))
    assert len(seen) == 1


@pytest.mark.parametrize("text", [
    '{"a": 1}\n', ' {"a": 1}\n', '{"a": 1}  \r\n', '{"a": 1} 2\n', '{"a": 1}\x0c\n', '\n', ' \t\n',
    '\x0c\n', '[1, 2]\n', '"x"\n', 'null\n', '{"index": 1, "latency": 2}\n', '{"index": 1, "index": 2}\n',
    '{"index": NaN}\n', 'Infinity\n', '-Infinity\n', '1e400\n', '-1e400\n', '18446744073709551616\n',
    '-9223372036854775809\n', '1' * 400 + '\n', '"\\ud800"\n', '"\\udc00\\ud800"\n', '-0\n', '-0.0\n',
    '5e-324\n', '1e-400\n', '0.30000000000000004\n', '{"index": 1}\x00\n', '\ufeff{"index": 1}\n',
    '{"f": "\u2028"}\n', "[" * 2000 + "]" * 2000 + "\n", '{"index": 1,\n'])
def test_both_decoders_read_a_line_as_json_loads_does(decoder: str, text: str) -> None:
    got = decode(text)
    if not text.strip():
        assert got is BLANK
        return
    try:
        want = json.loads(text)
    except (ValueError, RecursionError):
        assert got is NOT_JSON
    else:
        assert repr(got) == repr(want) and type(got) is type(want)


def test_values_are_json_loads_values(tmp_path: Path, decoder: str) -> None:
    # Integers of any size stay integers (orjson would make floats of those beyond 64 bits);
    # NaN and the infinities, which json.dumps writes, are read as json.loads reads them.
    details = ["2**70", "-18446744073709551616", "1e400", "-Infinity", "NaN", '"\\ud800"', "-0.0",
               "0.1", "5e-324", '{"a": 1, "a": 2}', '"\\u00e9\u00e9"', "[[1, null], [2, 3]]"]
    ops = good()
    lines = [json.dumps(op) for op in ops]
    lines[0] = lines[0][:-1] + ', "detail": ' + details[0].replace("2**70", str(2**70)) + "}"
    for number, detail in enumerate(details[1:], 1):
        lines.append(json.dumps({"index": len(ops) + number - 1, "time": 0, "process": "nemesis",
                                 "type": "info", "f": "note"})[:-1] + f', "detail": {detail}}}')
    path = tmp_path / "h.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    loaded = load(path)
    assert repr(loaded) == repr([json.loads(line) for line in lines])
    assert type(loaded[0]["detail"]) is int and loaded[0]["detail"] == 2**70


def test_a_line_that_is_not_json_outranks_an_earlier_bad_op(tmp_path: Path, decoder: str) -> None:
    ops = good()
    ops[1]["index"] = 7
    path = write(tmp_path / "h.jsonl", ops, raw={5: '{"index": 4,'})
    found = read(path)
    assert found.error is not None and (found.error.line, found.ops) == (5, [])
    assert found.error.message.startswith("bad JSON") and found.lines == len(ops)


def test_line_ends_are_those_of_text_mode(tmp_path: Path, decoder: str) -> None:
    # \r\n ends a line, and so does a lone \r: a line is what Python's text mode reads
    path = tmp_path / "h.jsonl"
    lines = [json.dumps(op) for op in good()]
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode())
    assert load(path) == good()
    lines[1] = lines[1].replace(", ", ",\r", 1)
    path.write_bytes(("\n".join(lines) + "\n").encode())
    with pytest.raises(HistoryError, match=r"h.jsonl:2: bad JSON"):
        load(path)


def test_a_history_that_is_not_utf8_raises_through_both_decoders(
        tmp_path: Path, decoder: str) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(json.dumps(good()[0]).encode() + b"\n" + b'{"f": "\xff"}\n')
    with pytest.raises(UnicodeDecodeError):
        load(path)


def test_a_stored_history_reads_its_ops_again_and_tells_when_the_file_changed(
        tmp_path: Path) -> None:
    path = write(tmp_path / "h.jsonl", good())
    stored, cut, walked = load_stored(path), load_stored(path), load_stored(path)
    assert len(stored) == len(good()) == 6
    assert stored[-1] == good()[-1] and stored[1:3] == good()[1:3] and stored[::-2] == good()[::-2]
    with pytest.raises(IndexError):
        stored[len(good())]
    assert list(walked) == good()  # a walk reads them all, and keeps them
    changed = good()
    changed[0], changed[1] = changed[1], changed[0]
    write(path, changed)
    with pytest.raises(HistoryError,
                       match=r"h.jsonl:1: the history file changed since it was read"):
        stored[0]
    with pytest.raises(HistoryError, match="changed since it was read"):
        list(stored)
    write(path, good()[:-1])  # cut short: every op left is as it was, one is missing
    with pytest.raises(HistoryError, match=r"h.jsonl:6: the history file changed .* 5 ops, not 6"):
        list(cut)
    assert list(walked) == good() and walked[0] == good()[0]


@pytest.mark.parametrize("enabled", [True, False])
def test_reading_leaves_the_collector_as_it_found_it(tmp_path: Path, enabled: bool) -> None:
    path = write(tmp_path / "h.jsonl", good())
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        assert load(path) == good()
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_reading_leaves_objects_frozen_by_the_caller_frozen(tmp_path: Path) -> None:
    path = write(tmp_path / "h.jsonl", good())
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        load(path)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
