"""What a target promises, and the anomalies it does not promise to avoid: findings, not failures.

A target declares its promises (contracts.target.PROMISES; test.json's `promises`). Each anomaly
kind a checker reports is tied to at most one promise (`KIND_PROMISE`); a kind tied to a promise
the target does not make is reported as a *finding*: the same ops and explanation, plus the
`promise` not made, under `findings` beside `anomalies`. Findings never make a verdict false, and
the checkers themselves never change with the target: the same history gets the same anomalies,
only which of them count is decided here. Every kind not in `KIND_PROMISE` is always judged.

A checker that was invalid only because of anomalies that became findings is valid; an unknown
verdict stays unknown (findings do not decide anything).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from checkers.result import merge_anomalies
from contracts.target import PROMISES

# anomaly kind -> the promise whose breach it shows
KIND_PROMISE: dict[str, str] = {
    "nonlinearizable": "linearizable",
    "stale-read": "linearizable-reads",
    "nonmonotonic-read": "linearizable-reads",
    "lost-write": "acked-writes-durable",
    "duplicate": "no-duplicates",
}

EVERY_PROMISE = frozenset(PROMISES)


def promised(test: Mapping[str, Any]) -> frozenset[str]:
    """The promises test.json records. Absent (a run stored before targets declared promises,
    or the reference node): every promise. A value that is not a list of names is read as every
    promise too, so that a damaged test.json can only make the judgement stricter."""
    given = test.get("promises")
    if not isinstance(given, list) or not all(isinstance(name, str) for name in given):
        return EVERY_PROMISE
    return frozenset(given)


def judge(results: Mapping[str, dict[str, Any]],
          promises: Collection[str]) -> dict[str, dict[str, Any]]:
    """Each checker's result with the anomalies of unpromised kinds moved to its `findings`
    (and `finding_types`, `finding_counts` beside `anomaly_types`, `anomaly_counts`), and its
    `valid` recomputed. A result with nothing to move is returned as it was."""
    return {name: _split(result, promises) for name, result in results.items()}


def merge_findings(results: Mapping[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The checkers' findings merged by kind (repeats of the same ops and text dropped), as
    results.json's `findings`."""
    return merge_anomalies([{"anomalies": result.get("findings") or {}}
                            for result in results.values()])


def _split(result: dict[str, Any], promises: Collection[str]) -> dict[str, Any]:
    anomalies = result.get("anomalies")
    if not isinstance(anomalies, dict):
        return result
    moved = {kind: found for kind, found in anomalies.items()
             if kind in KIND_PROMISE and KIND_PROMISE[kind] not in promises}
    if not moved:
        return result
    kept = {kind: found for kind, found in anomalies.items() if kind not in moved}
    findings: dict[str, list[dict[str, Any]]] = dict(result.get("findings") or {})
    for kind, found in moved.items():
        findings.setdefault(kind, []).extend(
            {**anomaly, "promise": KIND_PROMISE[kind]} for anomaly in found)
    split = {**result, "anomalies": kept, "findings": dict(sorted(findings.items())),
             "finding_types": sorted(findings)}
    if "anomaly_types" in result:
        split["anomaly_types"] = sorted(kept)
    counts = result.get("anomaly_counts")
    if isinstance(counts, dict):
        split["anomaly_counts"] = {k: n for k, n in counts.items() if k not in moved}
        split["finding_counts"] = dict(sorted(
            {**(result.get("finding_counts") or {}),
             **{k: n for k, n in counts.items() if k in moved}}.items()))
    if result.get("valid") is False and not kept:
        # every anomaly it had is one the target does not promise to avoid
        split["valid"] = True
    return split
