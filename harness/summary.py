"""The summary printed at the end of `kraft test`: what ran, what broke, the verdict, where.

`checkers.summary.render(results, history)` writes the analysis part when that package has it;
this module frames it with the run's own facts (ops by type, faults, availability, the path) and
stands in for it until it exists.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

Op = dict[str, Any]
VERDICTS = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}


def ops_table(history: list[Op]) -> list[str]:
    counts: Counter[tuple[str, str]] = Counter()
    for op in history:
        if op.get("process") != "nemesis" and op["type"] != "invoke":
            counts[(op["f"] + (" (final)" if op.get("final") else ""), op["type"])] += 1
    lines = ["operations:"]
    for f in sorted({f for f, _ in counts}):
        row = "  ".join(f"{t} {counts[(f, t)]}" for t in ("ok", "fail", "info") if counts[(f, t)])
        lines.append(f"  {f:<14} {row}")
    done = [op for op in history if op.get("process") != "nemesis" and op["type"] != "invoke"
            and not op.get("final")]
    if done:
        ok = sum(1 for op in done if op["type"] == "ok")
        lines.append(f"  availability   {ok / len(done):.1%} of {len(done)} ops ok")
    return lines


def faults_table(history: list[Op]) -> list[str]:
    started = [op for op in history if op.get("process") == "nemesis"
               and op["type"] != "invoke" and op["f"].startswith("start-")]
    if not started:
        return ["faults: none"]
    lines = ["faults:"]
    for op in started:
        value = op.get("value") or {}
        what = ", ".join(f"{k}={json.dumps(value[k])}" for k in ("shape", "target", "nodes",
                                                                  "cut") if k in value)
        note = "" if op["type"] == "ok" else f" [{op['type']}: {op.get('detail')}]"
        lines.append(f"  {op['time'] / 1e9:7.1f}s {op['f'][6:]:<9} {what[:160]}{note}")
    return lines


def anomalies_table(results: dict[str, Any], history: list[Op], limit: int = 3) -> list[str]:
    by_index = {op["index"]: op for op in history}
    lines: list[str] = []
    for name, result in (results.get("checkers") or {}).items():
        anomalies = result.get("anomalies") if isinstance(result, dict) else None
        if not anomalies:
            continue
        for kind, items in anomalies.items():
            items = items if isinstance(items, list) else [items]
            lines.append(f"  {name}/{kind}: {len(items)} found")
            for item in items[:limit]:
                lines.append(f"    {json.dumps({k: v for k, v in item.items() if k != 'ops'})[:200]}")
                for index in item.get("ops", [])[:6] if isinstance(item, dict) else []:
                    if index in by_index:
                        lines.append(f"      {json.dumps(by_index[index])[:220]}")
    return (["anomalies:", *lines]) if lines else ["anomalies: none"]


def render(results: dict[str, Any], history: list[Op], run_dir: Path) -> str:
    try:
        from checkers import summary as shared
        analysis: str | None = shared.render(results, history)
    except Exception:
        analysis = None
    if analysis:
        parts = [*faults_table(history), analysis]
    else:
        parts = [*ops_table(history), *faults_table(history),
                 *anomalies_table(results, history)]
        valid = results.get("valid")
        parts.append(f"verdict: {VERDICTS.get(valid, 'UNKNOWN')}")
    if results.get("error"):
        parts.append(f"the run failed: {results['error']}")
    parts.append(f"results: {run_dir.resolve()}")
    return "\n".join(parts)
