"""The `kv` workload: its ops, its final reads, and the checker it declares."""

from __future__ import annotations

from typing import Any

import workloads
from contracts.generator import Context, Generator, take
from workloads import kv
from workloads.kv import KV, KvOps

Op = dict[str, Any]
CTX = Context(time=0, free=(0, 1, 2, 3))


def test_kv_is_registered_and_judged_by_the_wgl_checker() -> None:
    assert workloads.get("kv") is KV
    assert KV.checker is kv.check
    assert workloads.get("kv").checker is KV.checker  # what `kraft check` judges a kv run with


def test_the_same_seed_gives_the_same_ops() -> None:
    first = take(KV.generator(3), CTX, 60)
    assert first == take(KV.generator(3), CTX, 60)
    assert first != take(KV.generator(4), CTX, 60)


def test_ops_have_the_shapes_of_the_register_table() -> None:
    ops = take(KV.generator(11), CTX, 300)
    assert {op["f"] for op in ops} == {"read", "write", "cas", "append"}
    keys = set()
    for op in ops:
        assert op["type"] == "invoke" and op["process"] in CTX.free
        value = op["value"]
        keys.add(value["key"])
        if op["f"] == "read":
            assert set(value) == {"key"}
        elif op["f"] in ("write", "append"):
            assert set(value) == {"key", "value"}
        else:
            assert set(value) == {"key", "from", "to"}
    assert keys == set(range(KV.keys))
    # every value put is unique, so that a read names the one write it saw
    put = [op["value"]["value"] if op["f"] == "write" else op["value"]["to"]
           for op in ops if op["f"] in ("write", "cas")]
    assert len(put) == len(set(put)) and all(isinstance(v, int) for v in put)
    # and so is every piece appended: a read's text names the appends after that write
    pieces = [op["value"]["value"] for op in ops if op["f"] == "append"]
    assert len(pieces) == len(set(pieces)) and all(p.startswith(",") for p in pieces)
    assert {int(p[1:]) for p in pieces}.isdisjoint(put)


def test_reads_and_writes_come_a_third_each_cas_and_appends_a_sixth_each() -> None:
    ops = take(KV.generator(11), CTX, 600)
    share = {f: sum(op["f"] == f for op in ops) / len(ops) for f in ("read", "write", "cas",
                                                                      "append")}
    assert abs(share["read"] - 1 / 3) < 0.06 and abs(share["write"] - 1 / 3) < 0.06
    assert abs(share["cas"] - 1 / 6) < 0.05 and abs(share["append"] - 1 / 6) < 0.05


def test_an_append_is_the_text_of_the_value_with_the_piece_at_the_end() -> None:
    assert kv.appended(None, ",3") == ",3"
    assert kv.appended("1,2", ",3") == "1,2,3"
    assert kv.appended(1, ",3") == "1,3"  # an integer reads as its decimal
    assert kv.appended([1], ",3") is None  # no text: nothing can be appended


def test_no_free_process_gives_pending() -> None:
    op, _ = KV.generator(1).op(Context(time=0, free=()))
    assert not isinstance(op, dict)


def _first_cas_on(gen: Generator, key: int) -> Op:
    for op in take(gen, CTX, 300):
        if op["f"] == "cas" and op["value"]["key"] == key:
            return op
    raise AssertionError("no cas drawn")


def test_a_cas_expects_the_last_value_learnt_of_its_key() -> None:
    gen: Generator = KvOps(state=5, keys=1)
    assert _first_cas_on(gen, 0)["value"]["from"] is None  # nothing known: the empty key
    gen = gen.update(CTX, {"type": "ok", "f": "write", "value": {"key": 0, "value": 41}})
    assert _first_cas_on(gen, 0)["value"]["from"] == 41
    gen = gen.update(CTX, {"type": "ok", "f": "cas",
                           "value": {"key": 0, "from": 41, "to": 42, "swapped": True}})
    assert _first_cas_on(gen, 0)["value"]["from"] == 42
    # a cas that did not swap, or an op of unknown outcome, teaches nothing
    for event in ({"type": "ok", "f": "cas",
                   "value": {"key": 0, "from": 1, "to": 43, "swapped": False}},
                  {"type": "info", "f": "write", "value": {"key": 0, "value": 44}}):
        assert gen.update(CTX, event) == gen
    gen = gen.update(CTX, {"type": "ok", "f": "read", "value": {"key": 0, "value": 7}})
    assert _first_cas_on(gen, 0)["value"]["from"] == 7


def test_the_final_ops_read_every_key() -> None:
    assert KV.final_ops() == [{"type": "invoke", "f": "read", "value": {"key": k}, "final": True}
                              for k in range(KV.keys)]


def _history(*pairs: tuple[Op, Op]) -> list[Op]:
    ops = [op for pair in pairs for op in pair]
    return [{"index": i, "time": i, "node": "n1", **op} for i, op in enumerate(ops)]


def _pair(process: int, f: str, arg: dict[str, Any], out: dict[str, Any] | None = None,
          final: bool = False) -> tuple[Op, Op]:
    extra = {"final": True} if final else {}
    return ({"process": process, "type": "invoke", "f": f, "value": arg, **extra},
            {"process": process, "type": "ok", "f": f, "value": out or arg, **extra})


def test_the_checker_passes_a_history_that_reads_what_was_written() -> None:
    history = _history(_pair(0, "write", {"key": 0, "value": 1}),
                       _pair(1, "cas", {"key": 0, "from": 1, "to": 2},
                             {"key": 0, "from": 1, "to": 2, "swapped": True}),
                       _pair(2, "read", {"key": 0}, {"key": 0, "value": 2}, final=True))
    results = KV.checker(history, {"workload": "kv"})
    assert results["valid"] is True, results
    assert results["checkers"]["linearizable"]["model"] == "kv"


def test_the_checker_passes_appends_and_finds_one_lost() -> None:
    appends = (_pair(0, "write", {"key": 0, "value": 1}),
               _pair(1, "append", {"key": 0, "value": ",2"}),
               _pair(2, "append", {"key": 0, "value": ",3"}))
    results = KV.checker(_history(*appends, _pair(3, "read", {"key": 0},
                                                  {"key": 0, "value": "1,2,3"}, final=True)),
                         {"workload": "kv"})
    assert results["valid"] is True, results
    lost = KV.checker(_history(*appends, _pair(3, "read", {"key": 0},
                                               {"key": 0, "value": "1,3"}, final=True)),
                      {"workload": "kv"})
    assert lost["valid"] is False and lost["anomaly_types"] == ["nonlinearizable"]


def test_the_checker_finds_a_final_read_that_lost_an_acknowledged_write() -> None:
    history = _history(_pair(0, "write", {"key": 0, "value": 1}),
                       _pair(0, "write", {"key": 0, "value": 2}),
                       _pair(1, "read", {"key": 0}, {"key": 0, "value": 1}, final=True))
    results = KV.checker(history, {"workload": "kv"})
    assert results["valid"] is False
    assert "nonlinearizable" in results["anomaly_types"]
