"""The short human summary of a checked run: what ran, how available it was, what went wrong.

Printed by `kraft check` and at the end of `kraft test`. Anomalies are listed by kind with the
first few proving operations spelled out (index, time, process, node, f, value), so that the
reader can go straight to the lines of history.jsonl that matter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from checkers.history import Op
from checkers.result import MAX_PER_KIND

SHOWN_PER_KIND = 3
VALUE_WIDTH = 100


def render(results: dict[str, Any], history: Sequence[Op]) -> str:
    lines: list[str] = []
    stats = results.get("stats") or {}
    lines += _ops_table(stats.get("ops") or {})
    lines += _partial((results.get("checkers") or {}).get("completeness") or {})
    lines += _availability(stats.get("availability") or {})
    lines += _checkers(results.get("checkers") or {})
    lines += _snapshots((results.get("checkers") or {}).get("snapshots") or {})
    lines += _membership((results.get("checkers") or {}).get("membership") or {})
    lines += _brokers((results.get("checkers") or {}).get("fencing") or {})
    lines += _anomalies(results.get("anomalies") or {}, results.get("checkers") or {}, history)
    lines += _findings(results.get("findings") or {}, results.get("checkers") or {}, history)
    valid = results.get("valid")
    reason = results.get("reason") if valid is not True and valid is not False else None
    lines.append(f"verdict: {'UNKNOWN: ' + reason if reason else _verdict(valid)}")
    return "\n".join(lines)


def _partial(completeness: dict[str, Any]) -> list[str]:
    """A history cut short: by how much, and why the verdict cannot be the whole story."""
    if not completeness.get("partial"):
        return []
    unfinished = completeness.get("unfinished")
    lines = ["history: partial" + (f" ({unfinished})" if unfinished else "")]
    count = completeness.get("indeterminate") or 0
    if count:
        lines.append(f"  {count} operation(s) invoked and never completed: outcome unknown, "
                     "checked as indeterminate")
    return lines


def _verdict(valid: Any) -> str:
    if valid is True:
        return "VALID"
    if valid is False:
        return "INVALID"
    return "UNKNOWN (a checker could not decide)"


def _ops_table(ops: dict[str, dict[str, int]]) -> list[str]:
    if not ops:
        return ["operations: none"]
    types = ["ok", "fail", "info"]
    lines = ["operations:", f"  {'f':<12}" + "".join(f"{t:>9}" for t in types)]
    for f, counts in sorted(ops.items()):
        lines.append(f"  {f:<12}" + "".join(f"{counts.get(t, 0):>9}" for t in types))
    return lines


def _availability(figures: dict[str, Any]) -> list[str]:
    if figures.get("ok_share") is None:
        return []
    lines = [f"availability: {figures['ok_share']:.1%} of operations ok"]
    for fault in figures.get("faults", []):
        lines.append(
            f"  {fault['kind']} at {fault['start_s']:.1f}s-{fault['end_s']:.1f}s: "
            f"longest stretch without an ok op {fault['longest_unavailable_s']:.2f}s"
        )
    return lines


def _checkers(checkers: dict[str, dict[str, Any]]) -> list[str]:
    lines = ["checkers:"]
    for name, result in checkers.items():
        why = result.get("error") or _undecided(result)
        note = f"  ({why})" if why else ""
        lines.append(f"  {name:<18} {_verdict(result.get('valid')).split(' ')[0].lower()}{note}")
    return lines


def _undecided(result: dict[str, Any]) -> str:
    """The keys a search left undecided beside a verdict it did reach (an unknown one says so in
    its error): a violation on one key never hides a key the budget could not judge."""
    keys = result.get("undecided")
    if not isinstance(keys, list) or not keys:
        return ""
    count = result.get("undecided_keys")
    count = count if type(count) is int else len(keys)
    shown = ", ".join(map(str, keys[:10])) + (", ..." if count > 10 else "")
    return (f"{count} key(s) undecided: search budget spent, {result.get('states_explored')} "
            f"states explored of at most {result.get('max_states')}: {shown}")


def _snapshots(result: dict[str, Any]) -> list[str]:
    """What the snapshot checker saw, so that a run shows whether snapshots were exercised at all."""
    if not result.get("snapshots") and not result.get("installs"):
        return []
    lines = [f"snapshots: {result.get('snapshots', 0)} checked ({result.get('verified', 0)} "
             f"verified against the log, {result.get('unverifiable', 0)} unverifiable), "
             f"{result.get('installs', 0)} installed, {result.get('invalid_files', 0)} invalid "
             f"file(s)"]
    starts = result.get("log_start_offsets") or {}
    if any(starts.values()):
        lines.append("  log start offsets: " + ", ".join(f"{node}={start}"
                                                         for node, start in starts.items()))
    writes = result.get("writes_below_log_start") or {}
    if writes.get("acked_below_log_start"):
        lines.append(f"  acknowledged writes below a log start: "
                     f"{writes['acked_below_log_start']} ({writes.get('proven_present', 0)} "
                     f"proven present by a snapshot, {writes.get('unverifiable', 0)} unverifiable)")
    return lines


def _membership(result: dict[str, Any]) -> list[str]:
    """What the membership checker counted: whether voter changes were exercised at all."""
    if "committed" not in result:
        return []
    kinds = result.get("committed_by_kind") or {}
    by_kind = ", ".join(f"{count} {kind}" for kind, count in kinds.items())
    outcomes = ", ".join(f"{result_}={count}" for result_, count in
                         (result.get("outcomes") or {}).items())
    lines = [f"membership: {result['committed']} voter change(s) committed"
             + (f" ({by_kind})" if by_kind else "")
             + f", leader removed {result.get('leader_removals', 0)} time(s), "
             f"{result.get('restarts', 0)} removed node(s) restarted as observers"]
    lines.append(f"  asked {result.get('requested', 0)}" + (f": {outcomes}" if outcomes else "")
                 + (f"; final voters {' '.join(result['final_voters'])}"
                    if result.get("final_voters") else ""))
    return lines


def _brokers(result: dict[str, Any]) -> list[str]:
    """What the fencing checker saw of each broker: registrations, fences, its clients' answers."""
    brokers = result.get("brokers")
    if not isinstance(brokers, dict) or not brokers:
        return []
    lines = ["brokers:"]
    for name, seen in brokers.items():
        registrations = seen.get("registrations") or []
        epochs = ", ".join(str(r.get("epoch")) for r in registrations[:6]) \
            + (", ..." if len(registrations) > 6 else "")
        incarnations = len({r.get("incarnation") for r in registrations})
        answers = ", ".join(f"{k}={v}" for k, v in (seen.get("answers") or {}).items())
        lines.append(f"  {name}: {len(registrations)} registration(s)"
                     + (f" (epochs {epochs}; {incarnations} incarnation(s))"
                        if registrations else "")
                     + f", {len(seen.get('fences') or [])} fence(s)"
                     + (f"; answers {answers}" if answers else ""))
    return lines


def _anomalies(anomalies: dict[str, list[dict[str, Any]]], checkers: dict[str, Any],
               history: Sequence[Op]) -> list[str]:
    if not anomalies:
        return ["anomalies: none"]
    return ["anomalies:", *_evidence(anomalies, _headlines(checkers, "anomaly_counts", anomalies), history)]


def _findings(findings: dict[str, list[dict[str, Any]]], checkers: dict[str, Any],
              history: Sequence[Op]) -> list[str]:
    """The anomalies of kinds the target does not promise to avoid (checkers/promises.py): shown
    with their evidence, like anomalies, but they are not failures."""
    if not findings:
        return []
    return ["findings (anomalies the target does not promise to avoid; not failures):",
            *_evidence(findings, _headlines(checkers, "finding_counts", findings), history,
                       lambda found: f" (promise not made: {found[0].get('promise')})")]


def _headlines(checkers: dict[str, Any], field: str,
               by_kind: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """What each kind's line says: its count (the checkers list at most MAX_PER_KIND; they count
    them all, each fact once), and for lost writes how many of the acknowledged appends."""
    counts: dict[str, int] = {}
    for result in checkers.values():
        for kind, count in (result.get(field) or {}).items():
            counts[kind] = max(counts.get(kind, 0), count)
    headlines = {kind: str(count) for kind, count in counts.items()}
    lost = _lost_appends(checkers, field, by_kind.get("lost-write") or [])
    if lost is not None:
        headlines["lost-write"] = lost
    return headlines


def _lost_appends(checkers: dict[str, Any], field: str,
                  listed: list[dict[str, Any]]) -> str | None:
    """"N of M acknowledged appends lost", from the checkers that judge each acknowledged append
    (log-anomalies on the reads, raft-invariants on the final logs; each counts distinct values);
    None when none of them found one. Where two found some, N is the union of the values they
    listed, or, when a list was cut, at least the larger count."""
    figures = {name: (result["lost_acknowledged"], result["acknowledged_appends"])
               for name, result in checkers.items()
               if type(result.get("lost_acknowledged")) is int
               and type(result.get("acknowledged_appends")) is int}
    indeterminate = max((result["lost_indeterminate"] for result in checkers.values()
                         if type(result.get("lost_indeterminate")) is int), default=0)
    by_checker = {name: lost for name, (lost, _) in figures.items() if lost}
    if not by_checker and not indeterminate:
        return None
    total = max(acknowledged for _, acknowledged in figures.values())
    lost = max(by_checker.values(), default=0)
    line = f"{lost} of {total} acknowledged appends lost"
    if len(by_checker) > 1:
        if all((checkers[name].get(field) or {}).get("lost-write", 0) <= MAX_PER_KIND
               for name in by_checker):
            union = {found["value"] for found in listed if type(found.get("value")) is int
                     and found.get("acknowledged") is not False}
            line = f"{len(union)} of {total} acknowledged appends lost"
        else:
            line = f"at least {line}"
        line += " (" + ", ".join(f"{name}: {count}" for name, count in by_checker.items()) + ")"
    if indeterminate:
        line += (f", and {indeterminate} indeterminate append{'s' if indeterminate > 1 else ''} "
                 f"that reads had shown")
    # a checker that reports lost writes without judging each value (snapshots: a group of
    # acknowledged values one of which is missing) is named with its count
    others = [f"{name}: {(result.get(field) or {})['lost-write']}"
              for name, result in checkers.items()
              if name not in figures and "lost-write" in (result.get(field) or {})]
    return line + (f"; {', '.join(others)}" if others else "")


def _evidence(by_kind: dict[str, list[dict[str, Any]]], headlines: dict[str, str],
              history: Sequence[Op],
              note: Callable[[list[dict[str, Any]]], str] = lambda _found: "") -> list[str]:
    lines = []
    for kind, found in by_kind.items():
        lines.append(f"  {kind}: {headlines.get(kind, len(found))}{note(found) if found else ''}")
        for anomaly in found[:SHOWN_PER_KIND]:
            lines.append(f"    - {anomaly.get('explanation', '')}")
            for index in anomaly.get("ops", []):
                if isinstance(index, int) and 0 <= index < len(history):
                    lines.append(f"        {_describe(history[index])}")
    return lines


def _describe(op: Op) -> str:
    value = json.dumps(op.get("value"), separators=(",", ":"))
    if len(value) > VALUE_WIDTH:
        value = value[: VALUE_WIDTH - 3] + "..."
    return (
        f"#{op['index']} t={op['time'] / 1e9:.3f}s process={op['process']} node={op.get('node')} "
        f"{op['type']} {op['f']} {value}"
    )
