"""One run, computed inside a Spark task (so: no Spark here, plain I/O): its metadata, its verdict,
and the facts of its history, reading each file once.

The re-check is `checkers.check_run`, the function behind `kraft check RUN_DIR`, taken apart only
so that the history it loads is read once for both: `check_run(run)` is
`check(load(run/history.jsonl), read_test(run/test.json), node_dirs(run))`, and `recheck` makes
those calls, then hands the loaded history to `history.facts`. It reads the lines with a cheaper
equivalent of load's json.loads and validates them with load's `validate`; any history that path
does not take without a doubt (a bad line, an invalid history, bad UTF-8) goes to load itself, so
that the error is the one check_run raises. The pipeline's verdict for a run is so the one
`kraft check` prints (tests compare them, on valid, invalid and corrupt runs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from harness.pipeline import history as hist

RunTuple = tuple[Any, ...]  # the fields of schemas.RUN, in order
# A run directory -> (its results, as check_run gives them; the history the checkers loaded).
Recheck = Callable[[Path], tuple[dict[str, Any], list[Any]]]


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


def nemesis_label(nemesis: object) -> str:
    """The faults of a run as one group key: test.json's nemesis list joined by '+', or 'none'."""
    if isinstance(nemesis, str):
        nemesis = [nemesis]
    if not isinstance(nemesis, list):
        return "none"
    names = []
    for item in nemesis:
        if isinstance(item, dict):
            item = item.get("name") or item.get("kind") or item.get("type") or json.dumps(item)
        names.append(str(item))
    return "+".join(names) or "none"


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
    test = _read_json(path, "test.json")
    target, workload = _fields(test)
    stored = _read_json(path, "results.json")
    seed = test.get("seed")
    return ([str(test.get("name", "")), str(test.get("start_time", "")), target, workload,
             nemesis_label(test.get("nemesis")),
             seed if isinstance(seed, int) and -2**63 <= seed < 2**63 else None,
             verdict(stored.get("valid")), anomaly_kinds(stored)], stored)


def _history(path: str, loaded: list[Any] | None) -> hist.History | str:
    if loaded is not None:
        return hist.classify(loaded, validated=True)
    try:
        return hist.read(os.path.join(path, "history.jsonl"))
    except OSError as exc:
        return f"cannot read history.jsonl: {exc.strerror or exc}"


def run_tuple(run_id: str, path: str, recheck: Recheck | None,
              missing: str | None = None) -> RunTuple:
    """The row of schemas.RUN for one run; never raises for a bad run, reports it in `problem`.

    `missing` is what discovery found wrong (a missing file): such a run is not read at all.
    """
    if missing:
        return (run_id, path, *([None] * 10), missing, *([None] * 9))
    meta: list[Any] = [None] * 8
    problem: str | None = None
    loaded: list[Any] | None = None
    try:
        meta, stored = _meta(path)
    except BadRun as exc:
        problem = str(exc)
        checked: dict[str, Any] | None = None
    else:
        checked = stored
        if recheck is not None:
            try:
                checked, loaded = recheck(Path(path))
            except Exception as exc:
                # kraft check refuses such a run too (bad input); it is skipped, not judged.
                problem = f"kraft check cannot read the run: {type(exc).__name__}: {exc}"
    verdicts = [None, None] if checked is None else [verdict(checked.get("valid")),
                                                     anomaly_kinds(checked)]
    history = _history(path, loaded)
    if isinstance(history, str):
        return (run_id, path, *meta, *verdicts, problem or history, *([None] * 9))
    problem = problem or history.problem
    lines = history.lines or None
    if problem is not None:
        return (run_id, path, *meta, *verdicts, problem, lines, history.duration_s,
                *([None] * 7))
    facts = hist.facts(history)
    return (run_id, path, *meta, *verdicts, None, lines, history.duration_s,
            facts.ops, facts.ok_ops, facts.fault_ops, facts.fault_ok_ops,
            list(facts.latencies.items()),
            [(k, ops, ok) for k, (ops, ok) in facts.by_fault.items()],
            facts.recoveries)


def load_check_run() -> Recheck:
    """`checkers.check_run` in the form `recheck` uses, or ImportError saying how to do without."""
    try:
        from checkers import compose
        from checkers import history as checked_history
        check, read_test, node_dirs = compose.check, compose.read_test, compose.node_dirs
        load, validate = checked_history.load, checked_history.validate
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"cannot re-check runs: checkers.check_run is not available ({exc}); "
                          "install the project (pip install -e .) or pass --no-recheck to use "
                          "the stored verdicts") from exc

    def quick_load(path: Path) -> list[Any] | None:
        # checkers.history.load, reading each line as it does (history.decode is json.loads,
        # cheaper) and validating with its own validate; None at the first thing out of the
        # ordinary, for load itself to read (and to raise about, as check_run would).
        ops: list[Any] = []
        lines: list[int] = []
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, text in enumerate(f, 1):
                    value = hist.decode(text)
                    if value is hist.BLANK:
                        continue
                    if value is None:
                        return None
                    ops.append(value)
                    lines.append(lineno)
            validate(ops, lines)
        except (OSError, ValueError):  # UnicodeDecodeError and HistoryError are ValueErrors
            return None
        return ops

    def recheck(run: Path) -> tuple[dict[str, Any], list[Any]]:
        # checkers.compose.check_run, with the history it loads kept for the facts.
        path = run / "history.jsonl"
        history = quick_load(path)
        if history is None:
            history = load(path)
        return check(history, read_test(run / "test.json"), node_dirs(run)), history

    return recheck


def run_tuples(refs: Iterable[tuple[str, str, str | None]], recheck: bool) -> Iterator[RunTuple]:
    """Spark task body: the rows of a partition of (run_id, path, problem found by discovery)."""
    checker = load_check_run() if recheck else None
    for run_id, path, missing in refs:
        yield run_tuple(run_id, path, checker, missing)
