"""The shortcuts the reading and the append parse take for speed give what the plain way gives:
the parse that follows the reading (`append_history.Reading`), the final reads found from each
node's last read, the outline's names shared, and the reader's inline pairing of invokes and
completions, with the rules' messages when it is not the usual one."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder
from chk_simulated import PLANTS, histories
from hypothesis import given, settings
from hypothesis import strategies as st

import workloads
from checkers import append_history, history
from checkers.append_history import AppendHistory, InputError, Read, StoredRecords
from checkers.history import NEMESIS, HistoryError
from harness.cli import main as kraft


def write(path: Path, ops: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(op) + "\n" for op in ops))
    return path


def parse_as_read(path: Path, stored: bool = False) -> AppendHistory:
    """The parse that follows the reading of the file, ended by `parse`; `stored`: as kraft check
    makes it, keeping no op (`history.load_stored`)."""
    reading = append_history.Reading()
    loaded = history.load_stored(path, reading) if stored else history.load(path, reading)
    return append_history.parse(loaded)


@settings(max_examples=100, deadline=None)
@given(ops=histories, plant=st.sampled_from([None, *sorted(PLANTS)]), every=st.integers(1, 7),
       stored=st.booleans())
def test_the_parse_that_follows_the_reading_is_the_parse_of_what_was_read(
        tmp_path_factory: pytest.TempPathFactory, ops: list[dict[str, Any]], plant: str | None,
        every: int, stored: bool) -> None:
    if plant is not None:
        PLANTS[plant](ops)
    path = write(tmp_path_factory.mktemp("h") / "history.jsonl", ops)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history, "FOLLOW_EVERY", every)  # many batches, of every size
        followed = parse_as_read(path, stored)
    plain = append_history.parse(history.load(path))
    if stored:  # the same, but the ops and the reads' records are read again from the file
        assert isinstance(followed.history, history.StoredOps)
        assert all(isinstance(read.records, StoredRecords) for read in followed.reads)
        assert list(followed.history) == plain.history
        followed = dataclasses.replace(followed, history=plain.history)
    assert followed == plain  # every field and object
    assert workloads.check(followed.history, {}) == workloads.check(history.load(path), {})


def test_kraft_check_judges_a_stored_history_as_the_kept_one_is_judged(
        tmp_path: Path) -> None:
    # a stale read and a lost write, cited by the check: the ops it cites are read from the file
    b = Builder()
    b.append(1, 10, 0)
    b.append(2, 11, 1)
    b.read(3, 0, 1, [[0, 10]], final=True)
    path = write(tmp_path / "history.jsonl", b.ops)
    reading = append_history.Reading()
    stored = history.load_stored(path, reading)
    assert workloads.check(stored, {}) == workloads.check(history.load(path), {})
    assert workloads.check(history.load(path), {})["valid"] is False
    assert kraft(["check", str(path)]) == 1
    assert json.loads((tmp_path / "results.json").read_text()) == workloads.check(
        history.load(path), {})


def test_an_op_that_does_not_fit_is_told_when_the_parse_ends(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "FOLLOW_EVERY", 2)
    b = Builder()
    b.append(1, 10, 0)
    b.invoke(2, "append", {"value": "ten"})  # read and kept: only the parse minds
    b.complete(2, "ok", {"value": "ten", "offset": 1})
    b.append(3, 11, 1)
    path = write(tmp_path / "history.jsonl", b.ops)
    with pytest.raises(InputError) as followed:
        parse_as_read(path)
    with pytest.raises(InputError) as plain:
        append_history.parse(history.load(path))
    assert str(followed.value) == str(plain.value) == (
        "op 2: an append invoke needs an integer value.value")


def test_a_reading_serves_only_the_list_it_followed(tmp_path: Path) -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 1, [[0, 10]])
    path = write(tmp_path / "history.jsonl", b.ops)
    reading = append_history.Reading()
    loaded = history.load(path, reading)
    copy = list(loaded)
    assert append_history.parse(copy) == append_history.parse(loaded)  # each its own pass
    assert append_history.parse(loaded).history is loaded  # the pass is used once, then a new one
    del reading  # forgotten with the Reading that made it
    assert append_history.parse(history.load(path, append_history.Reading())).reads[0].matching == 1


def test_a_bad_history_stops_the_parse_that_follows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(history, "FOLLOW_EVERY", 2)
    b = Builder()
    for value in range(4):
        b.append(value, value, value)
    path = write(tmp_path / "history.jsonl", b.ops)
    path.write_text(path.read_text() + "{\n")
    with pytest.raises(HistoryError, match="bad JSON"):
        history.load(path, append_history.Reading())


def test_a_test_json_problem_is_told_after_the_historys(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    b = Builder()
    b.append(1, 10, 0)
    run = tmp_path / "run"
    run.mkdir()
    write(run / "history.jsonl", b.ops)
    (run / "test.json").write_text("{")
    assert kraft(["check", "--no-plots", str(run)]) == 64
    assert "test.json: bad JSON" in capsys.readouterr().err
    (run / "history.jsonl").write_text("[")
    assert kraft(["check", "--no-plots", str(run)]) == 64
    assert "history.jsonl:1: bad JSON" in capsys.readouterr().err


def finals_the_plain_way(parsed: AppendHistory) -> list[bool]:
    """The reads marked `final`, or else the last ok read of each node among those invoked after
    the last nemesis op: every read walked, in completion order."""
    marked = [bool(parsed.history[read.invoke].get("final") or parsed.history[read.done].get("final"))
              for read in parsed.reads]
    if any(marked):
        return marked
    last_nemesis = max((p for p, op in enumerate(parsed.history) if op["process"] == NEMESIS),
                       default=-1)
    last_by_node: dict[Any, Read] = {}
    for read in parsed.reads:
        if read.invoke > last_nemesis:
            last_by_node[read.node] = read
    return [any(read is last for last in last_by_node.values()) for read in parsed.reads]


@settings(max_examples=150, deadline=None)
@given(history=histories)
def test_the_final_reads_are_those_of_the_plain_walk(history: list[dict[str, Any]]) -> None:
    parsed = append_history.parse(history)
    assert [read.final for read in parsed.reads] == finals_the_plain_way(parsed)


def test_a_node_whose_last_read_began_before_the_heal_has_an_earlier_final_read() -> None:
    b = Builder()
    b.append(1, 10, 0)
    slow = b.read_invoke(2, 0, node="n1")  # begins before the heal, ends after the others
    b.nemesis("stop-partition")
    b.read(3, 0, 1, [[0, 10]], node="n1")
    on_n2, _ = b.read(4, 0, 1, [[0, 10]], node="n2")
    on_n1, _ = b.read(5, 0, 1, [[0, 10]], node="n1")  # n1's last read to begin after the heal
    b.read_ok(2, 0, 1, [[0, 10]], node="n1")
    parsed = append_history.parse(b.ops)
    assert parsed.reads[-1].invoke == slow and not parsed.reads[-1].final
    assert [(read.invoke, read.node) for read in parsed.reads if read.final] == [
        (on_n2, "n2"), (on_n1, "n1")]
    assert [read.final for read in parsed.reads] == finals_the_plain_way(parsed)


def test_reads_that_ended_before_the_last_fault_are_never_final() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 1, [[0, 10]], node="n1")
    b.nemesis("start-partition")
    b.read_invoke(3, 0, node="n2")
    b.nemesis("stop-partition")
    b.read_ok(3, 0, 1, [[0, 10]], node="n2")
    parsed = append_history.parse(b.ops)
    assert [read.final for read in parsed.reads] == [False, False]


def test_the_outline_holds_one_object_per_name(tmp_path: Path) -> None:
    # Read from a file, each op holds its own copy of its f and type: the outline's columns, which
    # the op counts and the availability figures walk, share one per name instead.
    b = Builder()
    for process in range(20):
        b.append(process, process, process)
        b.read(100 + process, 0, process + 1, [[o, o] for o in range(process + 1)])
    b.append(200, 99, None, "fail")
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(op) + "\n" for op in b.ops))
    parsed = append_history.parse(history.load(path))
    outline = parsed.outline
    assert outline == history.outline(parsed.history)
    for column in (outline.fs, outline.types):
        assert len({id(name) for name in column}) == len(set(column))
    assert {id(append.type) for append in parsed.appends.values()} <= {id(t) for t in outline.types}


@pytest.mark.parametrize(("ops", "line", "words"), [
    # the completion of another f than the open invoke's, found by the inline pairing
    ([(1, "invoke", "append"), (1, "ok", "read")], 2,
     "completion f 'read' does not match invoke f 'append' on line 1"),
    ([(1, "invoke", "append"), (1, "invoke", "append")], 2,
     "process 1 invokes again while its invoke on line 1 has no completion"),
    ([(1, "invoke", "append"), (1, "info", "append"), (1, "invoke", "append")], 3,
     "process 1 invokes again after its info completion on line 2 (a process that ends info is "
     "retired)"),
    ([(1, "invoke", "append"), (1, "ok", "append"), (1, "fail", "append")], 3,
     "fail completion of process 1 with no invoke"),
    ([(2, "invoke", "read"), (1, "invoke", "append"), (2, "ok", "read"), (1, "fail", "read")], 4,
     "completion f 'read' does not match invoke f 'append' on line 2"),
])
def test_an_op_out_of_its_place_gets_the_rules_message(
        tmp_path: Path, ops: list[tuple[int, str, str]], line: int, words: str) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text("".join(
        json.dumps({"index": i, "time": i, "process": p, "type": t, "f": f}) + "\n"
        for i, (p, t, f) in enumerate(ops)))
    with pytest.raises(HistoryError) as caught:
        history.load(path)
    assert caught.value.line == line and caught.value.message == words
    with pytest.raises(HistoryError) as again:  # as the rules alone say it
        history.validate([json.loads(text) for text in path.read_text().splitlines()])
    assert again.value.message == words


def test_ops_in_their_places_are_kept_as_read(tmp_path: Path) -> None:
    ops = [(1, "invoke", "append"), (2, "invoke", "read"), ("nemesis", "info", "start-kill"),
           (1, "info", "append"), (2, "ok", "read"), (3, "invoke", "read"), (2, "invoke", "read"),
           (3, "fail", "read")]
    path = tmp_path / "history.jsonl"
    lines = [json.dumps({"index": i, "time": i, "process": p, "type": t, "f": f})
             for i, (p, t, f) in enumerate(ops)]
    path.write_text("\n".join(lines) + "\n")
    assert history.load(path) == [json.loads(text) for text in lines]
