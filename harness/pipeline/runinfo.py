"""One run's metadata and verdict, computed inside a Spark task (so: no Spark here, plain I/O).

The re-check calls `checkers.check_run`, the very function behind `kraft check RUN_DIR`, so the
pipeline's verdict for a run is by construction the one `kraft check` prints.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

RunTuple = tuple[Any, ...]  # the fields of schemas.RUN, in order
CheckRun = Callable[[Path], dict[str, Any]]


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


def run_tuple(run_id: str, path: str, check_run: CheckRun | None) -> RunTuple:
    """The row of schemas.RUN for one run; never raises for a bad run, reports it in `problem`."""
    try:
        test = _read_json(path, "test.json")
        target, workload = _fields(test)
        stored = _read_json(path, "results.json")
    except BadRun as exc:
        return (run_id, path, None, None, None, None, None, None, None, None, None, None, str(exc))
    seed = test.get("seed")
    row = [run_id, path, str(test.get("name", "")), str(test.get("start_time", "")), target,
           workload, nemesis_label(test.get("nemesis")),
           seed if isinstance(seed, int) and -2**63 <= seed < 2**63 else None,
           verdict(stored.get("valid")), anomaly_kinds(stored)]
    problem = None
    checked = stored
    if check_run is not None:
        try:
            checked = check_run(Path(path))
        except Exception as exc:
            # kraft check refuses such a run too (bad input); it is skipped, not judged.
            problem = f"kraft check cannot read the run: {type(exc).__name__}: {exc}"
    row += [verdict(checked.get("valid")), anomaly_kinds(checked), problem]
    return tuple(row)


def load_check_run() -> CheckRun:
    """`checkers.check_run`, or ImportError saying how to do without it."""
    try:
        import checkers
        check_run: CheckRun = checkers.check_run  # type: ignore[attr-defined]
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"cannot re-check runs: checkers.check_run is not available ({exc}); "
                          "install the project (pip install -e .) or pass --no-recheck to use "
                          "the stored verdicts") from exc
    return check_run


def run_tuples(refs: Iterable[tuple[str, str]], recheck: bool) -> Iterator[RunTuple]:
    """Spark task body: the rows of a partition of (run_id, path)."""
    check_run = load_check_run() if recheck else None
    for run_id, path in refs:
        yield run_tuple(run_id, path, check_run)
