"""Each workload's op schemas (workloads/ops.py): the generator's ops are their values, a value
of the wrong shape is refused, and the checkers, which read the history on their own, accept
what the schemas write and refuse what they refuse."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from checkers import append_history, linearizable
from checkers.append_history import InputError
from contracts.generator import Context, take
from workloads import WORKLOADS, append, brokers, kv, ops

Op = dict[str, Any]
CTX = Context(time=0, free=(0, 1, 2))
INVOKES = {"append": append.INVOKES, "kv": kv.INVOKES}


@pytest.mark.parametrize("name", sorted(INVOKES))
def test_every_op_the_generator_makes_is_its_schema_s_value(name: str) -> None:
    workload = WORKLOADS[name]
    made = take(workload.generator(5), CTX, 200) + workload.final_ops()
    assert {op["f"] for op in made} == set(INVOKES[name])
    for op in made:
        typed = ops.invoke_of(op, INVOKES[name])
        assert typed is not None
        assert ops.value(typed) == op["value"]
        assert list(ops.value(typed)) == list(op["value"])  # the same keys, in the same order


def test_an_f_the_workload_has_not_is_none_and_a_bad_value_is_refused() -> None:
    assert ops.invoke_of({"f": "describe", "value": None}, append.INVOKES) is None
    with pytest.raises(msgspec.ValidationError):
        ops.invoke_of({"f": "append", "value": {"value": "7"}}, append.INVOKES)
    with pytest.raises(msgspec.ValidationError):
        ops.invoke_of({"f": "cas", "value": {"key": 0, "to": 2}}, kv.INVOKES)  # no `from`


def test_a_value_is_shallow_and_named_as_the_history_names_it() -> None:
    records: list[list[int | None]] = [[0, 1], [1, None]]
    value = ops.value(append.ReadOk(0, 2, records))
    assert value == {"from": 0, "hw": 2, "records": [[0, 1], [1, None]]}
    assert value["records"] is records  # a long read's records are handed on, not copied
    assert ops.value(kv.CasOk(1, None, 5, True)) == {"key": 1, "from": None, "to": 5,
                                                    "swapped": True}
    view = ops.value(brokers.DescribeOk("n4", "broker", 3, {"state": "active"}, {}))
    assert list(view) == ["node", "role", "offset", "self", "brokers"]


def _history(*pairs: tuple[str, Any, Any]) -> list[Op]:
    ops_: list[Op] = []
    for process, (f, invoke, ok) in enumerate(pairs):
        ops_ += [{"process": process, "type": "invoke", "f": f, "value": invoke},
                 {"process": process, "type": "ok", "f": f, "value": ok}]
    return [{**op, "index": i, "time": i} for i, op in enumerate(ops_)]


def test_the_append_parse_reads_what_the_schemas_write() -> None:
    history = _history(
        ("append", ops.value(append.Append(7)), ops.value(append.AppendOk(7, 0))),
        ("read", ops.value(append.Read(0)), ops.value(append.ReadOk(0, 1, [[0, 7]]))))
    parsed = append_history.parse(history)
    assert parsed.appends[7].offset == 0
    assert [(read.start, read.hw, list(read.records)) for read in parsed.reads] == \
        [(0, 1, [[0, 7]])]
    # a read of a log the target says does not exist: the parse's read of nothing
    nothing = ops.value(append.read_of_nothing(3))
    assert nothing == {"from": 3, "hw": 0, "records": [], "absent": True}
    parsed = append_history.parse(_history(("read", ops.value(append.Read(3)), nothing)))
    assert [(read.start, read.hw, list(read.records)) for read in parsed.reads] == [(3, 0, [])]


@pytest.mark.parametrize(("f", "invoke", "ok", "schema"), [
    ("append", {"value": "7"}, {"value": "7", "offset": 0}, append.Append),
    ("append", {"value": 7}, {"value": 7}, append.AppendOk),
    ("read", {"from": 0}, {"from": 0, "records": []}, append.ReadOk),
])
def test_the_append_parse_refuses_what_the_schemas_refuse(f: str, invoke: Any, ok: Any,
                                                           schema: type[msgspec.Struct]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(invoke if schema is append.Append else ok, schema)
    with pytest.raises(InputError):
        append_history.parse(_history((f, invoke, ok)))


def test_the_register_search_reads_what_the_kv_schemas_write() -> None:
    history = _history(
        ("write", ops.value(kv.Write(0, 1)), ops.value(kv.Write(0, 1))),
        ("cas", ops.value(kv.Cas(0, 1, 2)), ops.value(kv.CasOk(0, 1, 2, True))),
        ("read", ops.value(kv.Read(0)), ops.value(kv.ReadOk(0, 2))))
    assert linearizable.check(history, "kv")["valid"] is True
    lost = [*history[:-1], {**history[-1], "value": ops.value(kv.ReadOk(0, 1))}]
    assert linearizable.check(lost, "kv")["valid"] is False
