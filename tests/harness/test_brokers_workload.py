"""The `brokers` workload's generator and final ops, and how the client decodes a `__brokers`
answer into the describe's outcome (workloads/brokers.py, harness/targets/reference_client.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from kio.schema.errors import ErrorCode

import workloads
from contracts.generator import Context, take
from harness.targets.reference_client import describe_outcome
from reference_node.wire.records import build_batch
from workloads.brokers import BROKERS

DESCRIBE = {"process": 3, "type": "invoke", "f": "describe", "value": None}
SELF = {"node": 4, "role": "broker", "state": "active", "incarnation": "0190-x", "epoch": 7,
        "self_fenced": False, "contact_age_ms": 120, "offset": 40}


def info(broker: int, epoch: int, fenced: bool = False) -> dict[str, Any]:
    return {"broker": broker, "incarnation": f"inc-{broker}", "epoch": epoch, "host": "h",
            "port": 9000 + broker, "fenced": fenced, "shutdown": False, "since": epoch,
            "state": "inactive" if fenced else "active"}


def answer(records: list[tuple[Any, dict[str, Any]]], hw: int = 40,
           error: ErrorCode = ErrorCode.none) -> Any:
    blob = build_batch(0, -1, [json.dumps(v, sort_keys=True).encode() for _, v in records],
                       keys=[json.dumps(k).encode() for k, _ in records]) if records else None
    return SimpleNamespace(error_code=int(error), high_watermark=hw, records=blob)


def test_the_generator_asks_describes_from_free_processes_the_same_for_a_seed() -> None:
    ctx = Context(time=0, free=(0, 1, 2, 3, 4, 5))
    ops = take(BROKERS.generator(3), ctx, 50)
    assert len(ops) == 50 and ops == take(BROKERS.generator(3), ctx, 50)
    assert all(op == {"process": op["process"], "type": "invoke", "f": "describe",
                      "value": None} for op in ops)
    assert {op["process"] for op in ops} == set(ctx.free)  # spread over every node's clients
    assert [op["process"] for op in ops] != [op["process"] for op in
                                             take(BROKERS.generator(4), ctx, 50)]
    assert take(BROKERS.generator(3), Context(time=0, free=()), 1) == []


def test_the_final_op_is_one_describe_and_the_workload_is_registered() -> None:
    assert BROKERS.final_ops() == [{"type": "invoke", "f": "describe", "value": None,
                                    "final": True}]
    assert workloads.get("brokers") is BROKERS


def test_a_brokers_answer_is_decoded_self_first_then_by_id() -> None:
    done = describe_outcome(DESCRIBE, answer([("self", SELF), (4, info(4, 7)),
                                              (5, info(5, 12, fenced=True))]), "n4")
    assert done["type"] == "ok"
    assert done["value"] == {"node": "n4", "role": "broker", "offset": 40, "self": SELF,
                             "brokers": {"4": info(4, 7), "5": info(5, 12, fenced=True)}}


def test_a_controller_answer_has_no_self() -> None:
    done = describe_outcome(DESCRIBE, answer([(4, info(4, 7))], hw=9), "n1")
    assert done["value"] == {"node": "n1", "role": "controller", "offset": 9, "self": None,
                             "brokers": {"4": info(4, 7)}}
    empty = describe_outcome(DESCRIBE, answer([], hw=0), "n1")
    assert empty["type"] == "ok" and empty["value"]["brokers"] == {}


def test_refusals_fail_and_a_timeout_is_unknown() -> None:
    refused = describe_outcome(DESCRIBE, answer([], error=ErrorCode.broker_not_available), "n4")
    assert refused["type"] == "fail" and refused["error"] == "broker-not-available"
    moved = describe_outcome(DESCRIBE, answer([], error=ErrorCode.not_leader_or_follower), "n2")
    assert moved["type"] == "fail" and moved["error"] == "not-leader-or-follower"
    late = describe_outcome(DESCRIBE, answer([], error=ErrorCode.request_timed_out), "n2")
    assert late["type"] == "info"


def test_a_record_that_is_not_a_view_fails_the_describe() -> None:
    bad = describe_outcome(DESCRIBE, answer([("someone", info(4, 7))]), "n4")
    assert bad["type"] == "fail" and bad["error"] == "bad-view"
