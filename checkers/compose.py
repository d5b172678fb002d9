"""`check` and `check_run`: every checker that fits the workload, composed into results.json.

Each checker runs under `_guard`: an exception becomes `"valid": "unknown"` with the error, never
a pass. The verdict is the worst of the checkers' (false, then unknown, then true); anomalies are
merged by kind.
"""

from __future__ import annotations

import gc
import json
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from checkers import (
    append_history,
    availability,
    linearizable,
    log_anomalies,
    log_linearizable,
    raft_invariants,
)
from checkers import node_data as node_data_module
from checkers.history import Op, Outline
from checkers.history import load as load_history
from checkers.history import outline as outline_of
from checkers.result import UNKNOWN, merge_anomalies, merge_valid

LOG_WORKLOADS = ("append",)
MODEL_WORKLOADS = ("register", "kv")


def check(history: list[Op], test: dict[str, Any], nodes: Mapping[str, Path] | None = None) -> dict[str, Any]:
    workload = str(test.get("workload") or "append")
    with _cyclic_gc_paused() if workload in LOG_WORKLOADS else nullcontext():
        return _check(history, test, nodes, workload)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pauses Python's cyclic garbage collector. The log checkers make a few million small objects
    (appends, reads, observations) that live until the verdict and form no cycles; the collector,
    set off by every 700 allocations, would scan them again and again as they pile up: a third of
    the check time at 10^6 operations. Reference counting frees everything as usual."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _check(history: list[Op], test: dict[str, Any], nodes: Mapping[str, Path] | None,
           workload: str) -> dict[str, Any]:
    given = test.get("checker")
    options: dict[str, Any] = given if isinstance(given, dict) else {}
    results: dict[str, dict[str, Any]] = {}
    timings: dict[str, float] = {}

    def run(name: str, checker: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        began = time.perf_counter()
        results[name] = _guard(checker)
        timings[name] = round(time.perf_counter() - began, 4)
        return results[name]

    parsed: append_history.AppendHistory | None = None
    if workload in LOG_WORKLOADS:
        parsed_holder: list[append_history.AppendHistory] = []

        def parse() -> dict[str, Any]:
            parsed_holder.append(append_history.parse(history))
            return {"valid": True}

        if run("append-parse", parse)["valid"] is True:
            parsed = parsed_holder[0]
            del results["append-parse"]
            log_parsed = parsed
            run("log-linearizable", lambda: log_linearizable.check(log_parsed))
            run("log-anomalies", lambda: log_anomalies.check(log_parsed))
    elif workload in MODEL_WORKLOADS:
        limit = float(options.get("time_limit", linearizable.DEFAULT_TIME_LIMIT))
        run("linearizable", lambda: linearizable.check(history, workload, limit))
    else:
        results["workload"] = {"valid": UNKNOWN, "error": f"no checker for workload {workload!r}; "
                               f"known: {', '.join(LOG_WORKLOADS + MODEL_WORKLOADS)}"}
    if nodes:
        acked = _acked(parsed)
        run("raft-invariants", lambda: raft_invariants.check(node_data_module.read(nodes), acked))

    anomalies = merge_anomalies(list(results.values()))
    # The append parse walked the history already; for other workloads it is walked here, once.
    outline = parsed.outline if parsed is not None else outline_of(history)
    stats: dict[str, Any] = {"ops": _op_counts(outline), "checker_seconds": timings}
    try:
        stats["availability"] = availability.figures(history, outline)
    except Exception as exc:  # the figures are informative; they never decide the verdict
        stats["availability"] = {"error": repr(exc)}
    return {
        "valid": merge_valid([r.get("valid", UNKNOWN) for r in results.values()]),
        "checkers": results,
        "anomaly_types": sorted(anomalies),
        "anomalies": anomalies,
        "stats": stats,
    }


def check_run(run_dir: Path) -> dict[str, Any]:
    """Checks a stored run (test.json, history.jsonl, nodes/*/). Raises HistoryError on a bad
    history and ValueError on a bad test.json."""
    run_dir = Path(run_dir)
    history = load_history(run_dir / "history.jsonl")
    return check(history, read_test(run_dir / "test.json"), node_dirs(run_dir))


def read_test(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        test = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: bad JSON: {exc.msg} (line {exc.lineno})") from exc
    if not isinstance(test, dict):
        raise ValueError(f"{path}: must hold a JSON object")
    return test


def node_dirs(run_dir: Path) -> dict[str, Path]:
    nodes = Path(run_dir) / "nodes"
    if not nodes.is_dir():
        return {}
    return {child.name: child for child in sorted(nodes.iterdir()) if child.is_dir()}


def _guard(checker: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        return checker()
    except Exception as exc:
        return {
            "valid": UNKNOWN,
            "error": f"{type(exc).__name__}: {exc}",
            "trace": traceback.format_exc(limit=6),
        }


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
