"""The interpreter against a fake client: one completion per invoke, info retires a process."""

from __future__ import annotations

import queue
from typing import Any

from contracts.backend import Backend
from contracts.generator import Limit, Stagger
from contracts.history import History
from contracts.target import Client
from harness.interpreter import Interpreter, Worker, perform
from workloads.append import AppendOps


class Flaky(Client):
    """ok, fail and info in turn; raises on every 7th op (a client bug)."""

    count = 0

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        pass

    def invoke(self, op: dict[str, Any], timeout: float) -> dict[str, Any]:
        Flaky.count += 1
        if Flaky.count % 7 == 0:
            raise RuntimeError("bug")
        kind = ("ok", "fail", "info")[Flaky.count % 3]
        value = op["value"]
        if kind == "ok":
            value = ({**value, "offset": Flaky.count} if op["f"] == "append"
                     else {**value, "hw": 0, "records": []})
        return {**op, "type": kind, "value": value}

    def close(self) -> None:
        pass


def test_each_invoke_has_one_completion_and_info_retires_the_process() -> None:
    history = History()
    completions: queue.Queue[Any] = queue.Queue()
    workers = [Worker(slot, 3, Flaky, "n1", history, completions, 1.0) for slot in range(3)]
    gen = Limit(Stagger(AppendOps(state=1), interval=1_000_000, state=2), 60)
    Interpreter(history, workers).run(gen, drain_timeout=5)
    ops = history.ops()
    invokes = [op for op in ops if op["type"] == "invoke"]
    assert len(invokes) == 60
    pending: dict[int, dict[str, Any]] = {}
    retired: set[int] = set()
    for op in ops:
        if op["type"] == "invoke":
            assert op["process"] not in pending and op["process"] not in retired
            pending[op["process"]] = op
        else:
            invoke = pending.pop(op["process"])
            assert op["f"] == invoke["f"]
            if op["type"] == "info":
                retired.add(op["process"])
    assert not pending
    assert retired and max(op["process"] for op in invokes) >= 3
    assert any(op.get("error") == "client-crashed" and "bug" in op["detail"] for op in ops)


def test_an_open_that_fails_is_a_fail() -> None:
    def broken() -> Client:
        raise ConnectionRefusedError("refused")
    done = perform({"process": 0, "type": "invoke", "f": "append", "value": {"value": 1}},
                   broken, 1.0)
    assert done["type"] == "fail" and done["error"] == "open-failed"
    assert "refused" in done["detail"]
