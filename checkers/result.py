"""The shape of a checker's answer, and how answers compose (Jepsen's `compose`).

A checker returns `{"valid": true | false | "unknown", ...}`; anomalies it finds go under
`"anomalies": {kind: [{"ops": [history indices], "explanation": ...}]}`. Composition takes the worst
verdict: false beats unknown beats true, so that an undecided checker can never hide behind a pass.
"""

from __future__ import annotations

from typing import Any

Valid = bool | str  # True, False or "unknown"
UNKNOWN = "unknown"

# Reporting every instance of an anomaly that infects the rest of a long history would make
# results.json as big as the history; the count is kept, the list is cut.
MAX_PER_KIND = 50


def merge_valid(verdicts: list[Valid]) -> Valid:
    if any(v is False for v in verdicts):
        return False
    if any(v is not True for v in verdicts):
        return UNKNOWN
    return True


class Anomalies:
    """Collects anomalies by kind, at most MAX_PER_KIND of each, counting all of them."""

    def __init__(self) -> None:
        self.found: dict[str, list[dict[str, Any]]] = {}
        self.counts: dict[str, int] = {}

    def add(self, kind: str, ops: list[int], explanation: str, **extra: Any) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        listed = self.found.setdefault(kind, [])
        if len(listed) < MAX_PER_KIND:
            listed.append({"ops": sorted(set(ops)), "explanation": explanation, **extra})

    def __bool__(self) -> bool:
        return bool(self.counts)

    def result(self, **fields: Any) -> dict[str, Any]:
        """A checker result: invalid iff anything was found."""
        return {
            "valid": not self.counts,
            "anomaly_types": sorted(self.found),
            "anomalies": self.found,
            "anomaly_counts": dict(sorted(self.counts.items())),
            **fields,
        }


def merge_anomalies(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Union of the checkers' anomalies by kind, dropping repeats of the same ops and text."""
    merged: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, tuple[int, ...], str]] = set()
    for result in results:
        for kind, found in (result.get("anomalies") or {}).items():
            for anomaly in found:
                key = (kind, tuple(anomaly.get("ops", ())), str(anomaly.get("explanation", "")))
                if key in seen:
                    continue
                seen.add(key)
                merged.setdefault(kind, []).append(anomaly)
    return dict(sorted(merged.items()))
