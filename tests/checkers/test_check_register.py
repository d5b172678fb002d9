"""The register/kv linearizability checker: hand cases, agreement with a brute-force checker on
thousands of small random histories, and the budget of states that answers unknown, the same on
any machine."""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

import pytest
from chk_histories import Builder

import workloads
from checkers import linearizable
from checkers.history import validate

Op = dict[str, Any]


def check(ops: list[Op], model: str = "register") -> dict[str, Any]:
    return workloads.check(ops, {"workload": model})


# hand cases -------------------------------------------------------------------------------------


def test_read_of_the_last_write_is_valid_and_of_an_old_one_is_not() -> None:
    b = Builder()
    b.r_write(1, "x", 1)
    b.r_write(1, "x", 2)
    b.r_read(2, "x", 2)
    assert check(b.ops)["valid"] is True
    _, stale = b.r_read(2, "x", 1)
    result = check(b.ops)
    assert result["valid"] is False
    assert result["anomaly_types"] == ["nonlinearizable"]
    assert stale in result["anomalies"]["nonlinearizable"][0]["ops"]


def test_concurrent_write_may_be_seen_or_not() -> None:
    b = Builder()
    b.invoke(1, "write", {"key": "x", "value": 1})
    b.r_read(2, "x", None)
    b.r_read(3, "x", 1)
    b.complete(1, "ok", {"key": "x", "value": 1})
    assert check(b.ops)["valid"] is True


def test_info_write_may_take_effect_late_or_never() -> None:
    b = Builder()
    b.r_write(1, "x", 1, type_="info")
    b.r_read(2, "x", None)
    b.r_read(2, "x", 1)
    assert check(b.ops)["valid"] is True
    b.r_read(2, "x", None)  # once seen, it cannot be unseen
    assert check(b.ops)["valid"] is False


def test_failed_write_has_no_effect() -> None:
    b = Builder()
    b.r_write(1, "x", 1, type_="fail")
    b.r_read(2, "x", 1)
    assert check(b.ops)["valid"] is False


def test_cas_swapped_and_not_swapped() -> None:
    b = Builder()
    b.r_write(1, "x", 1)
    b.invoke(1, "cas", {"key": "x", "from": 1, "to": 2})
    b.complete(1, "ok", {"key": "x", "from": 1, "to": 2, "swapped": True})
    b.invoke(1, "cas", {"key": "x", "from": 1, "to": 3})
    b.complete(1, "ok", {"key": "x", "from": 1, "to": 3, "swapped": False})
    b.r_read(1, "x", 2)
    assert check(b.ops)["valid"] is True
    b.invoke(1, "cas", {"key": "x", "from": 5, "to": 6})
    b.complete(1, "ok", {"key": "x", "from": 5, "to": 6, "swapped": True})
    assert check(b.ops)["valid"] is False


def test_kv_keys_are_independent() -> None:
    b = Builder()
    b.r_write(1, "x", 1)
    b.r_write(1, "y", 2)
    b.r_read(2, "x", 1)
    b.r_read(2, "y", 2)
    result = check(b.ops, "kv")
    assert result["valid"] is True
    assert result["checkers"]["linearizable"]["keys"] == 2
    b.r_read(2, "y", 1)
    result = check(b.ops, "kv")
    assert result["valid"] is False
    assert result["anomalies"]["nonlinearizable"][0]["key"] == "y"


def explosive(b: Builder | None = None, key: Any = "x") -> list[Op]:
    """Many concurrent info writes of distinct values, and reads of a value none wrote: no
    linearization, and a search space far beyond any budget (added to `b`'s ops when given)."""
    b = b or Builder()
    for process in range(18):
        b.invoke(process, "write", {"key": key, "value": process})
    for process in range(18):
        b.invoke(100 + process, "read", {"key": key})
    for process in range(18):
        b.complete(process, "info", None)
    for process in range(18):
        b.complete(100 + process, "ok", {"key": key, "value": -1})
    return b.ops


def test_spent_budget_gives_unknown_not_a_pass_and_says_how_far_it_got() -> None:
    result = workloads.check(explosive(), {"workload": "register", "checker": {"max_states": 5000}})
    assert result["valid"] == "unknown"
    searched = result["checkers"]["linearizable"]
    assert (searched["states_explored"], searched["max_states"]) == (5000, 5000)
    assert "5000 states explored of at most 5000" in searched["error"]
    assert "'x'" in searched["error"]
    assert (searched["undecided"], searched["undecided_keys"]) == (["'x'"], 1)


def test_a_violation_on_one_key_and_a_spent_budget_on_another_are_both_said() -> None:
    from checkers import summary

    b = Builder()
    b.r_write(1, 0, 1)
    b.r_read(2, 0, 2)  # key 0 never held 2
    needed = linearizable.check(b.ops, "kv")["states_explored"]  # what deciding key 0 takes
    explosive(b, key=1)
    test = {"workload": "kv", "checker": {"max_states": needed + 100}}
    result = workloads.check(b.ops, test)
    searched = result["checkers"]["linearizable"]
    assert result["valid"] is False and searched["valid"] is False  # a violation is a violation
    assert [a["key"] for a in result["anomalies"]["nonlinearizable"]] == [0]
    assert (searched["undecided"], searched["undecided_keys"]) == (["1"], 1)
    assert searched["states_explored"] == needed + 100
    text = summary.render(result, b.ops)
    assert "linearizable       invalid  (1 key(s) undecided: search budget spent, " \
        f"{needed + 100} states explored of at most {needed + 100}: 1)" in text, text


def test_the_verdict_is_the_same_on_any_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same history and budget, twice, and then with every clock reading an hour later than
    # the last (a machine as slow as can be): the same results each time.
    test = {"workload": "register", "checker": {"max_states": 3000}}
    first = workloads.check(explosive(), test)
    assert first["valid"] == "unknown"
    assert workloads.check(explosive(), test) == first
    hours = itertools.count(0, 3600.0)
    for clock in ("monotonic", "perf_counter", "time", "process_time"):
        monkeypatch.setattr(time, clock, lambda: next(hours))
    monkeypatch.setattr(time, "monotonic_ns", lambda: int(next(hours) * 1e9))
    assert workloads.check(explosive(), test) == first


@pytest.mark.parametrize("model", ["register", "kv"])
def test_a_budget_of_exactly_the_states_needed_decides(model: str) -> None:
    b = Builder()
    b.invoke(1, "write", {"key": "x", "value": 1})
    b.invoke(2, "write", {"key": "y", "value": 2})
    b.r_read(3, "x", 1)
    b.complete(1, "ok", {"key": "x", "value": 1})
    b.complete(2, "ok", {"key": "y", "value": 2})
    b.r_read(3, "y", 3)
    for last_read, verdict in ((3, False), (2, True)):  # y never held 3; it did hold 2
        b.ops[-1]["value"]["value"] = last_read
        needed = linearizable.check(b.ops, model)["states_explored"]
        decided = linearizable.check(b.ops, model, max_states=needed)
        assert decided["valid"] is verdict and decided["states_explored"] == needed
        short = linearizable.check(b.ops, model, max_states=needed - 1)
        assert short["valid"] == "unknown" and short["states_explored"] == needed - 1


def _append(b: Builder, process: int, key: Any, piece: str, type_: str = "ok") -> None:
    b.invoke(process, "append", {"key": key, "value": piece})
    b.complete(process, type_, {"key": key, "value": piece})


@pytest.mark.parametrize("model", ["register", "kv"])
def test_appends_in_order_are_valid_and_a_lost_duplicated_or_reordered_one_is_not(
        model: str) -> None:
    def history(final: str) -> list[Op]:
        b = Builder()
        b.r_write(1, "x", 1)
        _append(b, 1, "x", ",2")
        _append(b, 2, "x", ",3")
        b.r_read(3, "x", final)
        return b.ops

    assert check(history("1,2,3"), model)["valid"] is True
    for final in ("1,2", "1,3", "1,2,3,3", "1,2,2,3", "1,3,2"):  # lost, duplicated, reordered
        result = check(history(final), model)
        assert result["valid"] is False, final
        assert result["anomaly_types"] == ["nonlinearizable"]


def test_concurrent_appends_land_in_either_order_but_in_one() -> None:
    def history(*seen: str) -> list[Op]:
        b = Builder()
        b.invoke(1, "append", {"key": "x", "value": ",1"})  # to an empty key: the piece alone
        b.invoke(2, "append", {"key": "x", "value": ",2"})
        b.complete(1, "ok", {"key": "x", "value": ",1"})
        b.complete(2, "ok", {"key": "x", "value": ",2"})
        for value in seen:
            b.r_read(3, "x", value)
        return b.ops

    assert check(history(",1,2"))["valid"] is True
    assert check(history(",2,1"))["valid"] is True
    for seen in ((",1",), (",2",), (",1,2", ",2,1")):  # one lost; both orders at once
        assert check(history(*seen))["valid"] is False, seen


def test_an_unknown_append_may_land_late_or_never_but_once_seen_stays() -> None:
    b = Builder()
    b.r_write(1, "x", 7)
    _append(b, 1, "x", ",8", type_="info")
    b.r_read(2, "x", 7)
    b.r_read(2, "x", "7,8")  # an integer is appended to as its decimal
    assert check(b.ops)["valid"] is True
    b.r_read(2, "x", 7)
    assert check(b.ops)["valid"] is False
    failed = Builder()
    _append(failed, 1, "x", ",9", type_="fail")
    failed.r_read(2, "x", ",9")  # a failed append had no effect
    assert check(failed.ops)["valid"] is False


def test_an_append_needs_a_string() -> None:
    b = Builder()
    _append(b, 1, "x", 5)  # type: ignore[arg-type]
    result = check(b.ops)
    assert result["valid"] == "unknown"
    assert "append needs a string" in result["checkers"]["linearizable"]["error"]


def test_bad_register_op_gives_unknown() -> None:
    b = Builder()
    b.invoke(1, "increment", {"key": "x"})
    b.complete(1, "ok", {"key": "x"})
    result = check(b.ops)
    assert result["valid"] == "unknown"
    assert "increment" in result["checkers"]["linearizable"]["error"]


# agreement with brute force -------------------------------------------------------------------------


def random_history(rng: random.Random) -> list[Op]:
    """A small register history: sometimes from a real sequential execution, sometimes with a
    result made up, over one or two keys."""
    keys = ["x"] if rng.random() < 0.7 else ["x", "y"]
    processes = rng.randint(1, 4)
    state: dict[str, Any] = {}
    ops: list[Op] = []
    pending: dict[int, dict[str, Any]] = {}
    next_process = processes
    live = list(range(processes))
    total = rng.randint(1, 8)
    started = 0
    honest = rng.random() < 0.5

    def add(**fields: Any) -> None:
        ops.append({"index": len(ops), "time": len(ops), **fields})

    while started < total or pending:
        process = rng.choice(live)
        flight = pending.get(process)
        if flight is None:
            if started >= total:
                process = next(iter(pending))
                flight = pending[process]
            else:
                started += 1
                key, f = rng.choice(keys), rng.choice(["read", "write", "cas"])
                value: dict[str, Any] = {"key": key}
                if f == "write":
                    value["value"] = rng.randint(0, 2)
                elif f == "cas":
                    value["from"], value["to"] = rng.choice([None, 0, 1, 2]), rng.randint(0, 2)
                pending[process] = {"f": f, "value": value, "done": False}
                add(process=process, type="invoke", f=f, value=value)
                continue
        if not flight["done"] and rng.random() < 0.5:
            v = flight["value"]
            key = v["key"]
            if flight["f"] == "read":
                flight["result"] = {"key": key, "value": state.get(key)}
            elif flight["f"] == "write":
                state[key] = v["value"]
                flight["result"] = dict(v)
            else:
                swapped = state.get(key) == v["from"]
                if swapped:
                    state[key] = v["to"]
                flight["result"] = {**v, "swapped": swapped}
            flight["done"] = True
            continue
        del pending[process]
        if not flight["done"]:
            if rng.random() < 0.5:
                add(process=process, type="fail", f=flight["f"], value=None, error="not-leader")
            else:
                add(process=process, type="info", f=flight["f"], value=None, error="timeout")
                live.remove(process)
                live.append(next_process)
                next_process += 1
            continue
        result = dict(flight["result"])
        if not honest and rng.random() < 0.4:
            if flight["f"] == "read":
                result["value"] = rng.choice([None, 0, 1, 2])
            elif flight["f"] == "cas":
                result["swapped"] = not result["swapped"]
        if rng.random() < 0.15 and flight["f"] != "read":
            add(process=process, type="info", f=flight["f"], value=None, error="timeout")
            live.remove(process)
            live.append(next_process)
            next_process += 1
        else:
            add(process=process, type="ok", f=flight["f"], value=result)
    return ops


def brute_force(history: list[Op]) -> bool:
    """Linearizable iff some choice of which info ops took effect, and some order of the chosen
    ops that respects real time, explains every ok result from an empty register map."""
    invokes: dict[Any, Op] = {}
    determinate: list[tuple[Any, ...]] = []
    unknown: list[tuple[Any, ...]] = []
    for op in history:
        if op["type"] == "invoke":
            invokes[op["process"]] = op
            continue
        start = invokes.pop(op["process"])
        if op["type"] == "fail" or (op["type"] == "info" and start["f"] == "read"):
            continue
        entry = (start["index"], op["index"] if op["type"] == "ok" else None, start["f"],
                 start["value"], op["value"] if op["type"] == "ok" else None)
        (determinate if op["type"] == "ok" else unknown).append(entry)
    for count in range(len(unknown) + 1):
        for chosen in itertools.combinations(unknown, count):
            if _some_order(determinate + list(chosen), {}):
                return True
    return False


def _some_order(remaining: list[tuple[Any, ...]], state: dict[str, Any]) -> bool:
    if not remaining:
        return True
    for op in remaining:
        if any(other[1] is not None and other[1] < op[0] for other in remaining if other is not op):
            continue  # something still unplaced finished before this began
        _, _, f, arg, out = op
        key = arg["key"]
        after = dict(state)
        if f == "read":
            if out["value"] != state.get(key):
                continue
        elif f == "write":
            after[key] = arg["value"]
        else:
            holds = state.get(key) == arg["from"]
            if out is not None and out["swapped"] != holds:
                continue
            if holds:
                after[key] = arg["to"]
        if _some_order([o for o in remaining if o is not op], after):
            return True
    return False


def test_agrees_with_brute_force_on_thousands_of_small_histories() -> None:
    rng = random.Random(20240601)
    verdicts = {True: 0, False: 0}
    for _ in range(5000):
        history = random_history(rng)
        validate(history)
        expected = brute_force(history)
        got = linearizable.check(history, "register")["valid"]
        assert got is expected, history
        verdicts[expected] += 1
    # both verdicts must be well represented, or the agreement says little
    assert min(verdicts.values()) > 600, verdicts


@pytest.mark.parametrize("model", ["register", "kv"])
def test_models_agree_on_the_same_histories(model: str) -> None:
    rng = random.Random(7)
    for _ in range(200):
        history = random_history(rng)
        assert linearizable.check(history, model)["valid"] is brute_force(history)
