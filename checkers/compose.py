"""The generic check behind results.json: a workload's suite of checkers, and what every run gets.

A workload (workloads/) composes its own suite from the checkers here and judges a history with
`check(history, test, nodes, suite)`; `workloads.check` resolves a stored run's workload by
test.json's name. With node data every suite adds the node-data checkers, and every run gets
`completeness` (something was checked) and `availability` (test.json's floors, when it sets them).

Each checker runs under `_guard`: an exception becomes `"valid": "unknown"` with the error, never
a pass. The verdict is the worst of the checkers' (false, then unknown, then true), and an unknown
one says why (`reason`); anomalies are merged by kind. Anomalies of a kind tied to a promise the
target does not make are moved to `findings`: reported, never a failure. The results are a
function of the history, the test and the node data alone: no timings, no clock, so a re-check of
a stored run writes the same results.json.

Details (the suites, the node-data checkers, completeness and availability, the findings):
docs/internals/checkers.md#compose
"""

from __future__ import annotations

import datetime as dt
import json
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from checkers import (
    append_history,
    availability,
    completeness,
    liveness,
    membership,
    promises,
    raft_invariants,
    snapshots,
)
from checkers import node_data as node_data_module
from checkers.history import Op, Outline, open_invokes
from checkers.history import outline as outline_of
from checkers.result import UNKNOWN, merge_anomalies, merge_valid
from contracts.results import RESULTS, TEST, read_object

T = TypeVar("T")


@dataclass
class Verdicts:
    """Each checker's result, as a suite runs them."""

    results: dict[str, dict[str, Any]] = field(default_factory=dict)

    def run(self, name: str, checker: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """`checker`'s result (under the guard), recorded as `name`'s."""
        self.results[name] = _guard(checker)
        return self.results[name]

    def made(self, name: str, make: Callable[[], T]) -> T | None:
        """What `make` returns (a parse the suite's checkers share), recording nothing; None when
        it raises, with the error recorded as `name`'s unknown verdict."""
        made: list[T] = []

        def attempt() -> dict[str, Any]:
            made.append(make())
            return {"valid": True}

        result = _guard(attempt)
        if not made:
            self.results[name] = result
            return None
        return made[0]


@dataclass(frozen=True)
class Case:
    """What a suite judges: the history, test.json, its `checker` options, and the nodes' data
    (read once, on first ask, for every checker that needs it; empty without nodes)."""

    history: Sequence[Op]
    test: Mapping[str, Any]
    options: Mapping[str, Any]
    node_data: Callable[[], list[node_data_module.NodeData]]


# A suite runs a workload's checkers on a case; it returns the parsed append history when it
# made one, for raft-invariants, snapshots and the statistics.
Suite = Callable[[Case, Verdicts], "append_history.AppendHistory | None"]


def no_checker(workload: str, known: Sequence[str]) -> Suite:
    """The suite of a workload nobody knows: one unknown verdict that names the known ones."""
    def suite(case: Case, verdicts: Verdicts) -> append_history.AppendHistory | None:
        verdicts.results["workload"] = {
            "valid": UNKNOWN,
            "error": f"no checker for workload {workload!r}; known: {', '.join(known)}"}
        return None
    return suite


def damaged_snapshots(history: Sequence[Op]) -> dict[str, list[float]]:
    """Per node, the wall-clock times (ms) at which the `corrupt` nemesis damaged one of its
    snapshot files (`.checkpoint`), from the completions of its starts (docs/contracts.md)."""
    damaged: dict[str, list[float]] = {}
    for op in history:
        if op.get("process") != "nemesis" or op.get("f") != "start-corrupt" \
                or op.get("type") != "ok":
            continue
        value = op.get("value")
        try:  # `wall`: ISO 8601 with its offset; the nodes' event stamps are epoch ms
            wall = dt.datetime.fromisoformat(str(op.get("wall"))).timestamp() * 1000.0
        except ValueError:
            continue
        damage = value.get("damage") if isinstance(value, dict) else None
        for node, done in (damage or {}).items():
            file = done.get("file") if isinstance(done, dict) else None
            if isinstance(file, str) and file.endswith(".checkpoint"):
                damaged.setdefault(node, []).append(wall)
    return damaged


def check(history: Sequence[Op], test: Mapping[str, Any], nodes: Mapping[str, Path] | None,
          suite: Suite) -> dict[str, Any]:
    """The results.json dict of `history`, judged by `suite` and the checkers every run gets."""
    given = test.get("checker")
    options: Mapping[str, Any] = given if isinstance(given, dict) else {}
    node_data: Callable[[], list[node_data_module.NodeData]] = (
        _NodeDataOnce(nodes) if nodes else _no_node_data)
    verdicts = Verdicts()
    parsed = suite(Case(history, test, options, node_data), verdicts)
    # The append parse walked the history already; for other workloads it is walked here, once.
    outline = parsed.outline if parsed is not None else outline_of(history)
    if nodes:
        acked = _acked(parsed)
        # a target whose nodes write no node data (test.json `node_data`: false; etcd, NATS) gives
        # raft-invariants and snapshots nothing to judge: they are not run, rather than unknown
        if test.get("node_data") is not False:
            verdicts.run("raft-invariants", lambda: raft_invariants.check(node_data(), acked))
            # snapshot/log invariants: the append history's reads and acks are evidence too;
            # other workloads (kv) are judged on the node data alone
            verdicts.run("snapshots", lambda: snapshots.check(
                node_data(), parsed, damaged_snapshots(outline.nemesis)))
        # these read the nemesis ops alone (a stored history is not read again for them)
        if membership.applies(outline.nemesis, test):
            # KIP-853: every voter change the nemesis was told succeeded is committed
            verdicts.run("membership", lambda: membership.check(outline.nemesis, test,
                                                                node_data()))
    if liveness.applies(outline.nemesis, test):
        # a node that crashed fails the run; one killed from outside, or down at the end, makes
        # it unknown; the nodes' logs are searched for the target's crash patterns
        verdicts.run("liveness", lambda: liveness.check(outline.nemesis, test, nodes))
    if availability.applies(test):
        # test.json's floors (`--min-availability`): a liveness regression fails the run
        verdicts.run("availability", lambda: availability.check(history, test))
    # the anomalies of kinds the target does not promise to avoid become findings
    verdicts.results = promises.judge(verdicts.results, promises.promised(test))
    results = verdicts.results

    anomalies = merge_anomalies(list(results.values()))
    findings = promises.merge_findings(results)
    verdicts.run("completeness", lambda: completeness.check(
        history, test, outline, parsed,
        parsed.open_invokes if parsed is not None else open_invokes(history)))
    stats: dict[str, Any] = {"ops": _op_counts(outline)}
    try:
        stats["availability"] = availability.figures(history, outline)
    except Exception as exc:  # the figures are informative; they never decide the verdict
        stats["availability"] = {"error": repr(exc)}
    valid = merge_valid([r.get("valid", UNKNOWN) for r in results.values()])
    checked: dict[str, Any] = {
        "valid": valid,
        "checkers": results,
        "anomaly_types": sorted(anomalies),
        "anomalies": anomalies,
        "finding_types": sorted(findings),
        "findings": findings,
        "stats": stats,
    }
    if valid == UNKNOWN:
        # the completeness checker's reasons speak for themselves; another's needs its name
        checked["reason"] = "; ".join(
            str(result.get("error")) if name == "completeness"
            else f"{name}: {result.get('error') or 'undecided'}"
            for name, result in results.items()
            if result.get("valid") is not True and result.get("valid") is not False)
    if test.get("outcome") not in (None, completeness.COMPLETE):
        checked["error"] = str(test.get("error") or test.get("outcome"))
    return checked


def read_run_test(run_dir: Path) -> dict[str, Any]:
    """A stored run's test.json, with how the run ended (`outcome`, `error`). A run stored before
    test.json recorded it says so in results.json's `error` alone; that is carried over, so that a
    re-check of an interrupted or failed run never passes it for a complete one."""
    test = read_test(Path(run_dir) / TEST)
    if "outcome" not in test:
        error = read_object(Path(run_dir) / RESULTS).get("error")
        if isinstance(error, str) and error:
            test["outcome"] = "interrupted" if error == "interrupted" else "failed"
            test["error"] = error
    return test


def read_test(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        test = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: bad JSON: {exc.msg} (line {exc.lineno})") from exc
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror}") from None
    if not isinstance(test, dict):
        raise ValueError(f"{path}: must hold a JSON object")
    return test


def _guard(checker: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return checker()
    except Exception as exc:
        return {
            "valid": UNKNOWN,
            "error": f"{type(exc).__name__}: {exc}",
            "trace": traceback.format_exc(limit=6),
        }


def _no_node_data() -> list[node_data_module.NodeData]:
    return []


class _NodeDataOnce:
    """The nodes' data, read once for the checkers that judge it (a bad file raises each time,
    so every checker that needs it says `unknown` with the same line)."""

    def __init__(self, nodes: Mapping[str, Path]) -> None:
        self.nodes = nodes
        self.data: list[node_data_module.NodeData] | None = None

    def __call__(self) -> list[node_data_module.NodeData]:
        if self.data is None:
            self.data = node_data_module.read(self.nodes)
        return self.data


def _acked(parsed: append_history.AppendHistory | None) -> list[tuple[int, int, int]]:
    """(history index, value, offset) of each acknowledged append, for raft-invariants."""
    if parsed is None:
        return []
    return [(parsed.index(a.done), a.value, a.offset)
            for a in parsed.appends.values() if a.offset is not None]


def _op_counts(outline: Outline) -> dict[str, dict[str, int]]:
    """Client completions by f and type (counted in C: map and Counter, no loop in Python)."""
    names, types = map(str, outline.fs), map(str, outline.types)
    counts: Counter[tuple[str, str]] = Counter(zip(names, types, strict=True))
    table: dict[str, dict[str, int]] = {}
    for (f, type_), count in sorted(counts.items()):
        table.setdefault(f, {})[type_] = count
    return table
