"""The runner's final reads (issue 40): each node is asked its own final read, a node's settled
refusal is not asked for the whole recovery time, a read no node answered is asked of every node
again while the recovery time lasts, and harness.log names the node that answered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contracts.history import History, Op
from contracts.target import Client
from harness import runner
from harness.config import TestConfig
from workloads import APPEND, KV


class Scripted(Client):
    """A client of one node that answers each op with the next of that node's outcomes (the
    last one again once they run out), as `answered_by` says (None: the node itself)."""

    def __init__(self, outcomes: list[dict[str, Any]], answered_by: str | None) -> None:
        self.outcomes = outcomes
        self.answered_by = answered_by
        self.node = ""

    def open(self, backend: Any, nodes: list[str], node: str) -> None:
        self.node = node

    def invoke(self, op: Op, timeout: float) -> Op:
        assert op.get("final") is True
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        return {**op, **outcome, "node": self.answered_by or self.node}

    def close(self) -> None:
        pass


OK = {"type": "ok", "value": {"from": 0, "hw": 0, "records": []}}
NOT_LEADER = {"type": "fail", "error": "not-leader"}


class Clock:
    """The runner's time: only its pauses between tries move it."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _final_reads(monkeypatch: pytest.MonkeyPatch, script: dict[str, list[dict[str, Any]]],
                 answered_by: str | None = None, recovery: float = 30.0,
                 workload: Any = APPEND) -> tuple[list[Op], list[str]]:
    """The final reads of `workload` on nodes n1..n3 scripted by `script`: the completions in
    the history, and harness.log's lines."""
    monkeypatch.setattr(runner, "time", Clock())
    config = TestConfig(nodes=["n1", "n2", "n3"], recovery_time=recovery, op_timeout=1.0)
    history = History()
    lines: list[str] = []

    def make_client(node: str) -> Callable[[], Client]:
        def open_client() -> Client:
            client = Scripted(script[node], answered_by)
            client.open(None, config.nodes, node)
            return client
        return open_client

    runner._final_reads(config, workload, history, make_client, 100, lines.append)
    return [op for op in history.ops() if op["type"] != "invoke"], lines


def test_each_node_answers_its_own_final_read_and_a_settled_refusal_is_left_after_a_while(
        monkeypatch: pytest.MonkeyPatch) -> None:
    done, lines = _final_reads(monkeypatch, {"n1": [NOT_LEADER], "n2": [OK], "n3": [NOT_LEADER]})
    # a settled refusal is asked again for FINAL_SETTLE (2 s, a try each 0.5 s), then left
    tries = 1 + int(runner.FINAL_SETTLE / 0.5)
    assert [(op["node"], op["type"], op.get("final")) for op in done] == [
        *[("n1", "fail", True)] * tries, ("n2", "ok", True), *[("n3", "fail", True)] * tries]
    assert lines == ['final read {"from": 0} on n1: fail "not-leader"',
                     'final read {"from": 0} on n2: ok null',
                     'final read {"from": 0} on n3: fail "not-leader"']


def test_a_read_no_node_answered_is_asked_of_every_node_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the leader moved during the first round: n3, asked last, no longer led; n1 now does
    tries = 1 + int(runner.FINAL_SETTLE / 0.5)
    done, _ = _final_reads(monkeypatch, {"n1": [NOT_LEADER] * tries + [OK], "n2": [NOT_LEADER],
                                         "n3": [NOT_LEADER]})
    rounds = [(op["node"], op["type"]) for op in done]
    assert rounds == [*[("n1", "fail")] * tries, *[("n2", "fail")] * tries,
                      *[("n3", "fail")] * tries,
                      ("n1", "ok"), *[("n2", "fail")] * tries, *[("n3", "fail")] * tries]
    # a new process per node, and per round
    assert len({op["process"] for op in done}) == 6


def test_a_node_that_refused_one_read_for_good_is_asked_the_next_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    done, _ = _final_reads(monkeypatch, {"n1": [NOT_LEADER], "n2": [OK], "n3": [NOT_LEADER]},
                           workload=KV)
    tries = 1 + int(runner.FINAL_SETTLE / 0.5)
    keys = len(KV.final_ops())
    assert [op["node"] for op in done] == [
        *["n1"] * (tries + keys - 1), *["n2"] * keys, *["n3"] * (tries + keys - 1)]


def test_no_round_starts_past_the_recovery_time(monkeypatch: pytest.MonkeyPatch) -> None:
    done, _ = _final_reads(monkeypatch, {n: [NOT_LEADER] for n in ("n1", "n2", "n3")},
                           recovery=1.0)
    # the first node's settled refusal outlasts the recovery time: one try of each other node
    assert [op["node"] for op in done] == ["n1", "n1", "n1", "n2", "n3"]


def test_the_log_names_the_node_that_answered_when_it_is_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, lines = _final_reads(monkeypatch, {n: [OK] for n in ("n1", "n2", "n3")},
                            answered_by="n1")
    assert lines == ['final read {"from": 0} on n1: ok null',
                     'final read {"from": 0} on n2 (answered by n1): ok null',
                     'final read {"from": 0} on n3 (answered by n1): ok null']
