"""One run, computed inside a Spark task (so: no Spark here, plain I/O): its metadata, its verdict,
and the facts of its history, reading each file once.

The re-check is `workloads.check_run`, the function behind `kraft check RUN_DIR`, taken apart only
so that the history is read once for both: `check_run(run)` is
`check(load(run/history.jsonl), read_run_test(run), node_dirs(run))`. The history is read
here with the reader behind `load` (`history.read`), and a history that `load` would refuse skips
the run with the same reason; a valid one is handed to `check` and then to `history.facts`. The
pipeline's verdict for a run is so the one `kraft check` prints (tests compare them, on valid,
invalid and corrupt runs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from contracts.results import HISTORY, RESULTS, TEST
from harness.pipeline import history as hist

RunTuple = tuple[Any, ...]  # the fields of schemas.RUN, in order
# A run directory and its valid history -> its results, as check_run gives them.
Recheck = Callable[[Path, list[dict[str, Any]]], dict[str, Any]]


class BadRun(Exception):
    """A run whose files cannot be read as a run; the message says which file and why."""


def verdict(value: object) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "unknown"


def anomaly_kinds(results: dict[str, Any]) -> list[str]:
    """The kinds of anomaly a results.json names, from every checker that said invalid.

    Checkers list them as `anomaly_types` or as the keys of `anomalies` (checkers/result.py); an
    invalid checker that names none counts as one anomaly of its own name.
    """
    kinds: set[str] = set()
    checkers = results.get("checkers")
    for name, result in (checkers.items() if isinstance(checkers, dict) else ()):
        if not isinstance(result, dict) or result.get("valid") is not False:
            continue
        named = set(result.get("anomaly_types") or ())
        if isinstance(result.get("anomalies"), dict):
            named |= set(result["anomalies"])
        kinds |= {str(k) for k in named} or {str(name)}
    if not kinds and results.get("valid") is False:
        kinds = {str(k) for k in (results.get("anomaly_types") or results.get("anomalies") or ())}
    return sorted(kinds)


def nemesis_kinds(nemesis: object) -> list[str]:
    """The fault kinds a run asked for: test.json's nemesis list (a lone name: a list of one)."""
    if isinstance(nemesis, str):
        nemesis = [nemesis]
    if not isinstance(nemesis, list):
        return []
    names = []
    for item in nemesis:
        if isinstance(item, dict):
            item = item.get("name") or item.get("kind") or item.get("type") or json.dumps(item)
        names.append(str(item))
    return names


def nemesis_label(nemesis: object) -> str:
    """The faults of a run as one group key: test.json's nemesis list joined by '+', or 'none'."""
    return "+".join(nemesis_kinds(nemesis)) or "none"


def _read_json(path: str, name: str) -> dict[str, Any]:
    try:
        with open(os.path.join(path, name), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise BadRun(f"missing {name}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRun(f"{name} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise BadRun(f"{name} is not a JSON object")
    return data


def _fields(test: dict[str, Any]) -> tuple[str, str]:
    target, workload = test.get("target"), test.get("workload")
    if not isinstance(target, str) or not isinstance(workload, str):
        raise BadRun("test.json lacks a string `target` or `workload`")
    return target, workload


def _meta(path: str) -> tuple[list[Any], dict[str, Any]]:
    """The metadata fields of schemas.RUN (up to stored_anomalies), and results.json."""
    test = _read_json(path, TEST)
    target, workload = _fields(test)
    stored = _read_json(path, RESULTS)
    seed = test.get("seed")
    return ([str(test.get("name", "")), str(test.get("start_time", "")), target, workload,
             nemesis_label(test.get("nemesis")), nemesis_kinds(test.get("nemesis")),
             seed if isinstance(seed, int) and -2**63 <= seed < 2**63 else None,
             verdict(stored.get("valid")), anomaly_kinds(stored)], stored)


def run_tuple(run_id: str, path: str, recheck: Recheck | None,
              missing: str | None = None) -> RunTuple:
    """The row of schemas.RUN for one run; never raises for a bad run, reports it in `problem`.

    `missing` is what discovery found wrong (a missing file): such a run is not read at all.
    """
    if missing:
        return (run_id, path, *([None] * 11), missing, *([None] * 12))
    history = hist.read(os.path.join(path, HISTORY))
    meta: list[Any] = [None] * 9
    checked: dict[str, Any] | None = None
    try:
        meta, checked = _meta(path)
        problem = history.problem
    except BadRun as exc:
        problem = str(exc)
    if problem is None and recheck is not None:
        try:
            checked = recheck(Path(path), history.ops)
        except Exception as exc:
            # kraft check refuses such a run too (bad input); it is skipped, not judged.
            problem = f"kraft check cannot read the run: {type(exc).__name__}: {exc}"
    verdicts = [None, None] if checked is None else [verdict(checked.get("valid")),
                                                     anomaly_kinds(checked)]
    lines = history.lines or None
    if problem is not None:
        return (run_id, path, *meta, *verdicts, problem, lines, history.duration_s,
                *([None] * 10))
    facts = hist.facts(history.ops)
    return (run_id, path, *meta, *verdicts, None, lines, history.duration_s,
            facts.ops, facts.ok_ops, facts.fault_ops, facts.fault_ok_ops,
            list(facts.latencies.items()),
            [(k, ops, ok) for k, (ops, ok) in facts.by_fault.items()],
            facts.recoveries,
            [(k, done, attempted) for k, (done, attempted) in facts.starts.items()],
            *membership_counts(checked))


def membership_counts(results: dict[str, Any] | None) -> tuple[int | None, int | None]:
    """(voter changes committed, leader removals) as the `membership` checker counted them in
    `results`; (None, None) for a run it did not judge."""
    checkers = (results or {}).get("checkers")
    found = checkers.get("membership") if isinstance(checkers, dict) else None
    if not isinstance(found, dict) or "committed" not in found:
        return None, None

    def count(key: str) -> int | None:
        value = found.get(key)
        return value if type(value) is int else None

    return count("committed"), count("leader_removals")


def load_check_run() -> Recheck:
    """`workloads.check_run` in the form `run_tuple` uses, or ImportError saying how to do
    without."""
    try:
        from checkers.compose import read_run_test
        from contracts.results import node_dirs
        from workloads import check
    except ImportError as exc:
        raise ImportError(f"cannot re-check runs: workloads.check_run is not available ({exc}); "
                          "install the project (pip install -e .) or pass --no-recheck to use "
                          "the stored verdicts") from exc

    def recheck(run: Path, history: list[dict[str, Any]]) -> dict[str, Any]:
        # workloads.check_run, on the history already read: a run that did not finish
        # (test.json's outcome) stays unknown, never counted as a complete run
        return check(history, read_run_test(run), node_dirs(run))

    return recheck


def run_tuples(refs: Iterable[tuple[str, str, str | None]], recheck: bool) -> Iterator[RunTuple]:
    """Spark task body: the rows of a partition of (run_id, path, problem found by discovery)."""
    checker = load_check_run() if recheck else None
    for run_id, path, missing in refs:
        yield run_tuple(run_id, path, checker, missing)
