"""`kraft compare`'s tables: stored runs -> one table per workload, targets side by side.

Pure: everything here is computed from the runs' own files (test.json, results.json,
history.jsonl), read by the Spark pipeline's per-run code (`harness.pipeline.runinfo.run_tuple`
without a re-check, so the verdicts are the stored ones, and `harness.pipeline.history.facts`), so
that a cell of `kraft compare` and the same group of `kraft analyze` agree by construction. The
definitions (verdicts and findings, availability during faults, recovery, throughput, latency) are
the pipeline's (harness/pipeline/history.py).

A row is one (nemesis, target) of a workload; a run whose history cannot be analyzed still counts
with its stored verdict. Details (each figure's definition, unreadable and skipped runs):
docs/internals/harness.md#compare
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from contracts.results import RESULTS, TEST, read_object
from harness.pipeline import discover, runinfo

DIGITS = 6  # as the pipeline rounds its figures
QUANTILES = {"p50_ms": 0.5, "p99_ms": 0.99}
EVENTS = ("start", "stop")  # a fault's start (failover) and its end (heal)

# The fields of harness.pipeline.schemas.RUN, in the order of runinfo.run_tuple (that module
# imports pyspark, an optional dependency; tests/harness/test_compare.py checks the two agree).
RUN_FIELDS = (
    "run_id", "path", "test_name", "start_time", "target", "workload", "nemesis", "requested",
    "seed", "stored_valid", "stored_anomalies", "valid", "anomalies", "problem", "lines",
    "duration_s", "ops", "ok_ops", "fault_ops", "fault_ok_ops", "latencies", "faults",
    "recoveries", "starts", "voter_changes", "leader_removals",
)


@dataclass
class Run:
    """One stored run, as the pipeline reads it, with its findings. The facts (`ops` ...
    `recoveries`) are None/empty when `problem` says the history cannot be analyzed."""

    run_id: str
    path: str
    target: str | None
    workload: str | None
    nemesis: str | None
    seed: int | None
    valid: str | None  # "true", "false", "unknown"; None when results.json cannot be read
    anomalies: list[str]
    findings: list[str]
    problem: str | None
    ops: int | None = None
    ok_ops: int | None = None
    duration_s: float | None = None
    fault_ops: int | None = None
    fault_ok_ops: int | None = None
    latencies: dict[str, list[float]] = field(default_factory=dict)
    by_fault: dict[str, tuple[int, int]] = field(default_factory=dict)
    recoveries: list[tuple[str, str, float | None]] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)  # the fault kinds test.json asks for
    starts: dict[str, tuple[int, int]] | None = None  # kind -> (done, attempted); None: unread

    @property
    def placed(self) -> bool:
        """Whether the run has a row to go to (its test.json and results.json were read)."""
        return self.target is not None and self.workload is not None and self.valid is not None

    def summary(self) -> dict[str, Any]:
        """What compare.json says of the run itself (its facts are in its row)."""
        return {"run_id": self.run_id, "path": self.path, "target": self.target,
                "workload": self.workload, "nemesis": self.nemesis, "seed": self.seed,
                "valid": self.valid, "anomalies": self.anomalies, "findings": self.findings,
                "ops": self.ops, "ok_ops": self.ok_ops, "duration_s": _round(self.duration_s),
                "faults": fault_effect(self.requested, [self]), "problem": self.problem}


def finding_kinds(results: dict[str, Any]) -> list[str]:
    """The kinds of finding a results.json names (its `findings`, else `finding_types`)."""
    found = results.get("findings")
    if isinstance(found, dict):
        return sorted(str(kind) for kind in found)
    types = results.get("finding_types")
    return sorted(str(kind) for kind in types) if isinstance(types, list) else []


def read_run(run_id: str, path: str, missing: str | None = None) -> Run:
    """One run, through the pipeline's reader; never raises for a bad run (see `problem`)."""
    row = dict(zip(RUN_FIELDS, runinfo.run_tuple(run_id, path, None, missing), strict=True))
    results = read_object(Path(path) / RESULTS) if not missing else {}
    run = Run(run_id=run_id, path=path, target=row["target"], workload=row["workload"],
              nemesis=row["nemesis"], seed=row["seed"], valid=row["stored_valid"],
              anomalies=list(row["stored_anomalies"] or []), findings=finding_kinds(results),
              problem=row["problem"], requested=list(row["requested"] or []))
    if row["ops"] is not None:
        run.ops, run.ok_ops = row["ops"], row["ok_ops"]
        run.duration_s = row["duration_s"]
        run.fault_ops, run.fault_ok_ops = row["fault_ops"], row["fault_ok_ops"]
        run.latencies = {f: list(ms) for f, ms in row["latencies"]}
        run.by_fault = {kind: (ops, ok) for kind, ops, ok in row["faults"]}
        run.recoveries = list(row["recoveries"])
        run.starts = {kind: (done, attempted) for kind, done, attempted in row["starts"]}
    return run


def find_runs(directories: Iterable[Path | str]) -> list[Run]:
    """Every run under each directory: a results directory (`<test-name>/<start>/`, discovered as
    the pipeline does) or one run's own directory. Run ids are made unique across directories by
    the directory's name. Raises FileNotFoundError/NotADirectoryError for a bad directory."""
    runs: list[Run] = []
    seen: set[str] = set()
    for directory in directories:
        root = Path(directory)
        if (root / TEST).is_file():
            refs = [discover.RunRef(f"{root.parent.name}/{root.name}", str(root.resolve()),
                                    None)]
        else:
            refs = discover.discover(root)
        for ref in refs:
            run_id = ref.run_id if ref.run_id not in seen else f"{root.name}:{ref.run_id}"
            seen.add(run_id)
            runs.append(read_run(run_id, ref.path, ref.problem))
    return runs


# -- figures ------------------------------------------------------------------------------------

def _round(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


def _share(part: int, whole: int) -> float | None:
    return _round(part / whole) if whole > 0 else None


def quantile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile of `values`, interpolated linearly between ranks (the pipeline's, and
    numpy's default, which checkers/perf.py's latency plot uses too)."""
    return float(np.quantile(values, q)) if len(values) else None


def _latency(values: list[float]) -> dict[str, Any]:
    return {"ok_ops": len(values),
            **{name: _round(quantile(values, q)) for name, q in QUANTILES.items()}}


def fault_effect(requested: Sequence[str], runs: Iterable[Run]) -> dict[str, Any]:
    """The faults `requested` and, over the runs whose history was read, each kind's starts that
    took effect and those attempted (`checkers.faults.starts_by_kind`): the kinds requested first,
    a kind never started at 0 of 0, then any other kind started. `took_effect` is None when no
    run's history was read."""
    read = [r.starts for r in runs if r.starts is not None]
    if not read:
        return {"requested": list(requested), "took_effect": None}
    started = {kind for starts in read for kind in starts}
    kinds = [*requested, *sorted(started - set(requested))]
    return {"requested": list(requested),
            "took_effect": {kind: {"done": sum(s[kind][0] for s in read if kind in s),
                                   "attempted": sum(s[kind][1] for s in read if kind in s)}
                            for kind in kinds}}


def _by_kind(runs: list[Run], kinds_of: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for run in runs:
        for kind in getattr(run, kinds_of):
            found.setdefault(kind, []).append(run.run_id)
    return dict(sorted(found.items()))


def row(nemesis: str, target: str, runs: list[Run]) -> dict[str, Any]:
    """The figures of one (nemesis, target) cell of a workload's table (see the module's
    definitions)."""
    analyzed = [r for r in runs if r.problem is None and r.ops is not None]
    verdicts = [r.valid for r in runs]
    ops = sum(r.ops or 0 for r in analyzed)
    ok_ops = sum(r.ok_ops or 0 for r in analyzed)
    duration = sum(r.duration_s or 0.0 for r in analyzed)
    fault_ops = sum(r.fault_ops or 0 for r in analyzed)
    fault_ok = sum(r.fault_ok_ops or 0 for r in analyzed)
    per_fault: dict[str, list[int]] = {}
    latencies: dict[str, list[float]] = {}
    recoveries: dict[str, list[float | None]] = {}
    for run in analyzed:
        for kind, (n, ok) in run.by_fault.items():
            count = per_fault.setdefault(kind, [0, 0])
            count[0] += n
            count[1] += ok
        for f, ms in run.latencies.items():
            latencies.setdefault(f, []).extend(ms)
        for _kind, event, after in run.recoveries:
            recoveries.setdefault(event, []).append(after)
    recovery = {}
    for event in sorted(recoveries, key=lambda e: (*EVENTS, e).index(e)):
        times = sorted(ms for ms in recoveries[event] if ms is not None)
        recovery[event] = {"events": len(recoveries[event]), "recovered": len(times),
                           "p50_ms": _round(quantile(times, 0.5)),
                           "max_ms": _round(times[-1]) if times else None}
    every = [ms for values in latencies.values() for ms in values]
    return {
        "nemesis": nemesis, "target": target,
        "runs": len(runs), "run_ids": [r.run_id for r in runs],
        "valid": verdicts.count("true"), "invalid": verdicts.count("false"),
        "unknown": verdicts.count("unknown"),
        "valid_share": _share(verdicts.count("true"), len(runs)),
        "anomalies": _by_kind(runs, "anomalies"), "findings": _by_kind(runs, "findings"),
        "unreadable": {r.run_id: r.problem for r in runs if r.problem is not None},
        "ops": ops, "ok_ops": ok_ops, "duration_s": _round(duration),
        "throughput_ok_per_s": _round(ok_ops / duration) if duration > 0 else None,
        "fault_ops": fault_ops, "fault_ok_ops": fault_ok,
        "availability_during_faults": _share(fault_ok, fault_ops),
        "availability": {kind: {"ops": n, "ok": ok, "share": _share(ok, n)}
                         for kind, (n, ok) in sorted(per_fault.items())},
        "recovery": recovery,
        "faults": fault_effect(list(dict.fromkeys(k for r in runs for k in r.requested)), runs),
        "latency": {"all": _latency(every),
                    **{f: _latency(ms) for f, ms in sorted(latencies.items())}},
    }


@dataclass(frozen=True)
class NotRun:
    """A cell of the matrix that was not run, and why (the target cannot run the workload, or
    cannot inject the fault); `nemesis` None: none of the workload's cells."""

    workload: str
    nemesis: str | None
    target: str
    reason: str


def _ordered(found: Iterable[str], preferred: Sequence[str]) -> list[str]:
    """`found` in the order of `preferred`, then the others sorted."""
    found = set(found)
    return [x for x in preferred if x in found] + sorted(found - set(preferred))


def tables(runs: list[Run], targets: Sequence[str] = (), workloads: Sequence[str] = (),
           nemeses: Sequence[str] = (), not_run: Sequence[NotRun] = ()) -> dict[str, Any]:
    """compare.json: the runs, and one table per workload whose rows are (nemesis, target) cells,
    in the order given (the matrix's) and then sorted. A workload's targets are those with a run
    in it or a cell not run for a fault (a target that cannot run the workload at all is named
    in `not_run` only)."""
    placed = [r for r in runs if r.placed]
    cells: dict[tuple[str, str, str], list[Run]] = {}
    for run in placed:
        key = (str(run.workload), str(run.nemesis), str(run.target))
        cells.setdefault(key, []).append(run)
    out_tables = []
    for workload in _ordered({w for w, _, _ in cells} | {n.workload for n in not_run
                                                         if n.nemesis is not None}, workloads):
        skipped = [n for n in not_run if n.workload == workload and n.nemesis is not None]
        mine = {(n, t): rs for (w, n, t), rs in cells.items() if w == workload}
        table_targets = _ordered({t for _, t in mine} | {n.target for n in skipped}, targets)
        table_nemeses = _ordered({n for n, _ in mine} | {str(n.nemesis) for n in skipped},
                                 nemeses)
        rows = [row(n, t, mine[(n, t)]) for n in table_nemeses for t in table_targets
                if (n, t) in mine]
        out_tables.append({"workload": workload, "targets": table_targets,
                           "nemeses": table_nemeses, "rows": rows})
    return {
        "runs": [r.summary() for r in placed],
        "skipped_runs": [{"run_id": r.run_id, "path": r.path, "problem": r.problem}
                         for r in runs if not r.placed],
        "not_run": [{"workload": n.workload, "nemesis": n.nemesis, "target": n.target,
                     "reason": n.reason} for n in not_run],
        "tables": out_tables,
    }


def run_labels(runs: Sequence[dict[str, Any]]) -> dict[str, str]:
    """A short label for each run of compare.json: `s<seed>` when its (target, workload, nemesis,
    seed) is unique among the runs, else its run id."""
    def key(run: dict[str, Any]) -> tuple[Any, ...]:
        return run["target"], run["workload"], run["nemesis"], run["seed"]

    counts: dict[tuple[Any, ...], int] = {}
    for run in runs:
        counts[key(run)] = counts.get(key(run), 0) + 1
    return {run["run_id"]: (f"s{run['seed']}" if run["seed"] is not None and counts[key(run)] == 1
                            else run["run_id"]) for run in runs}


def relative_link(path: str, base: Path) -> str:
    """`path` relative to `base` when it can be, so that a copied comparison keeps its links."""
    try:
        return os.path.relpath(path, base)
    except ValueError:
        return path
