"""What `kraft analyze` should find, computed independently: plain json and pandas, no Spark and
no code from harness.pipeline or checkers.faults. The definitions are the ones the summary page
states."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

import workloads

GROUP = ["target", "workload", "nemesis"]


def _verdict(v: Any) -> str:
    return {True: "true", False: "false"}.get(v, "unknown") if isinstance(v, bool) else "unknown"


def _kinds(results: dict[str, Any]) -> list[str]:
    # The summary page's definition: the kinds every invalid checker names, or its own name.
    kinds: set[str] = set()
    for name, result in results.get("checkers", {}).items():
        if result.get("valid") is False:
            named = set(result.get("anomaly_types") or []) | set(result.get("anomalies") or {})
            kinds |= named or {name}
    return sorted(kinds)


def load(root: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, set[str]]:
    """(runs, ops, windows, recoveries, skipped run ids) of every readable run under root."""
    runs: list[dict[str, Any]] = []
    ops: list[dict[str, Any]] = []
    windows: list[dict[str, Any]] = []
    recoveries: list[dict[str, Any]] = []
    skipped: set[str] = set()
    for test in sorted(os.listdir(root)):
        if test.startswith(("_", ".")) or os.path.islink(root / test):
            continue
        for stamp in sorted(os.listdir(root / test)):
            run = root / test / stamp
            run_id = f"{test}/{stamp}"
            try:
                spec = json.loads((run / "test.json").read_text())
                json.loads((run / "results.json").read_text())
                history = [json.loads(line) for line in (run / "history.jsonl").open()]
                verdict = workloads.check_run(run)  # what `kraft check RUN` prints
            except Exception:
                skipped.add(run_id)
                continue
            key = {"target": spec["target"], "workload": spec["workload"],
                   "nemesis": "+".join(spec["nemesis"]) or "none"}
            runs.append({**key, "run_id": run_id, "valid": _verdict(verdict["valid"]),
                         "anomalies": _kinds(verdict),
                         "duration_s": (history[-1]["time"] - history[0]["time"]) / 1e9})
            _ops_and_faults(history, key, run_id, ops, windows, recoveries)
    return (pd.DataFrame(runs), pd.DataFrame(ops), pd.DataFrame(windows),
            pd.DataFrame(recoveries), skipped)


def _ops_and_faults(history: list[dict[str, Any]], key: dict[str, str], run_id: str,
                    ops: list[dict[str, Any]], windows: list[dict[str, Any]],
                    recoveries: list[dict[str, Any]]) -> None:
    invoked: dict[Any, int] = {}
    mine: list[dict[str, Any]] = []
    steps: dict[str, list[tuple[str, int]]] = {}  # fault kind -> its (phase, time), in order
    for op in history:
        if op["process"] == "nemesis":
            phase, _, kind = op["f"].partition("-")
            if phase in ("start", "stop"):
                steps.setdefault(kind, []).append((phase, op["time"]))
        elif op["type"] == "invoke":
            invoked[op["process"]] = op["time"]
        elif op["process"] in invoked:
            t0 = invoked.pop(op["process"])
            mine.append({**key, "run_id": run_id, "f": op["f"], "type": op["type"],
                         "invoke": t0, "time": op["time"], "latency_ms": (op["time"] - t0) / 1e6})
    # A run of starts opens a window at its first op; the run of stops after it (if any) closes
    # it at its last op, else the window lasts to the history's last op.
    opened = []
    events = []
    for kind, seq in steps.items():
        runs = [(phase, [t for _, t in group])
                for phase, group in itertools.groupby(seq, key=lambda step: step[0])]
        for i, (phase, times) in enumerate(runs):
            if phase != "start":
                continue
            events.append((kind, "start", times[0]))
            if i + 1 < len(runs):
                opened.append((kind, times[0], runs[i + 1][1][-1]))
                events.append((kind, "stop", runs[i + 1][1][-1]))
            else:
                opened.append((kind, times[0], history[-1]["time"]))
    for kind, what, t in events:
        nxt = [o["time"] for o in mine if o["type"] == "ok" and o["time"] > t]
        recoveries.append({**key, "fault": kind, "event": what,
                           "recovery_ms": (min(nxt) - t) / 1e6 if nxt else None})
    for o in mine:
        kinds = {k for k, a, b in opened if a <= o["invoke"] < b}
        o["in_fault"] = bool(kinds)
        for k in kinds:
            windows.append({**key, "fault": k, "type": o["type"]})
    ops.extend(mine)


TOL = 2e-6  # the pipeline's tables are rounded to 6 decimals


def table(out: Path, name: str) -> pd.DataFrame:
    """One table an analysis wrote, from its CSV."""
    return pd.read_csv(out / f"{name}.csv", dtype={"valid": str, "stored_valid": str})


def same(got: pd.DataFrame, want: pd.DataFrame, keys: list[str], columns: list[str]) -> None:
    """The same rows (by `keys`) with the same `columns`, to the tables' rounding."""
    got = got.sort_values(keys).reset_index(drop=True)
    want = want.sort_values(keys).reset_index(drop=True)
    assert got[keys].astype(str).values.tolist() == want[keys].astype(str).values.tolist()
    for column in columns:
        pd.testing.assert_series_equal(got[column].astype(float), want[column].astype(float),
                                       check_names=False, atol=TOL, rtol=0, obj=column)


def summary(runs: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    g = runs.groupby(GROUP)
    out = pd.DataFrame({
        "runs": g.size(),
        "valid": g["valid"].apply(lambda v: int((v == "true").sum())),
        "invalid": g["valid"].apply(lambda v: int((v == "false").sum())),
        "duration_s": g["duration_s"].sum(),
    })
    go = ops.groupby(GROUP)
    out["ops"] = go.size()
    out["ok_ops"] = go["type"].apply(lambda t: int((t == "ok").sum()))
    faulty = ops[ops["in_fault"]].groupby(GROUP)["type"]
    out["fault_ops"] = faulty.size()
    out["fault_ok_ops"] = faulty.apply(lambda t: int((t == "ok").sum()))
    out = out.fillna({"fault_ops": 0, "fault_ok_ops": 0})
    out["valid_share"] = out["valid"] / out["runs"]
    out["throughput_ok_per_s"] = out["ok_ops"] / out["duration_s"]
    out["availability_during_faults"] = out["fault_ok_ops"] / out["fault_ops"].where(
        out["fault_ops"] > 0)
    return out.reset_index()


def latency(ops: pd.DataFrame) -> pd.DataFrame:
    ok = ops[ops["type"] == "ok"].groupby([*GROUP, "f"])["latency_ms"]
    return pd.DataFrame({"ok_ops": ok.size(), "p50_ms": ok.quantile(0.5),
                         "p95_ms": ok.quantile(0.95), "p99_ms": ok.quantile(0.99),
                         "mean_ms": ok.mean()}).reset_index()


def anomalies(runs: pd.DataFrame) -> pd.DataFrame:
    rows = runs.explode("anomalies").dropna(subset=["anomalies"])
    return (rows.groupby([*GROUP, "anomalies"]).size().rename("runs").reset_index()
            .rename(columns={"anomalies": "anomaly"}))


def availability(windows: pd.DataFrame) -> pd.DataFrame:
    g = windows.groupby([*GROUP, "fault"])["type"]
    out = pd.DataFrame({"ops": g.size(), "ok": g.apply(lambda t: int((t == "ok").sum()))})
    out["availability"] = out["ok"] / out["ops"]
    return out.reset_index()


def recovery(recoveries: pd.DataFrame) -> pd.DataFrame:
    g = recoveries.groupby([*GROUP, "fault", "event"])["recovery_ms"]
    return pd.DataFrame({"events": g.size(), "recovered": g.count(), "p50_ms": g.quantile(0.5),
                         "p99_ms": g.quantile(0.99), "max_ms": g.max()}).reset_index()
