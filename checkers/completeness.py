"""Whether a history holds enough to judge: a verdict of VALID must mean that something was checked.

The other checkers look for anomalies, and a history in which nothing happened has none: a cluster
that never elected a leader fails every operation, and its empty log is consistent. So this checker
says `unknown`, with the reason, when

- the history holds no client operation at all (an empty history.jsonl);
- no operation succeeded, final reads aside: nothing was acknowledged, so nothing could be lost;
- (a log) no final read succeeded: values acknowledged above every other read's high watermark
  could be lost unseen; (the `kv` workload) final reads were asked and none succeeded: a write
  lost after the last read of its key would go unseen;
- test.json asks for faults (`nemesis`) and none took effect, or a kind it names never started
  (`checkers.faults.starts_by_kind`): the run was not tested under that fault, whatever the
  others did (a kind that started and had no effect beside others that did is only said:
  `faults_not_done_why`);
- the run did not finish (test.json's `outcome`: `running` when its harness died, `interrupted`,
  `failed`): the history is partial, and what the run did not get to is unchecked.

An invoke the history ends before completing is an op of unknown outcome (the other checkers
treat it as an `info` completion); this checker counts them, and calls the history partial.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checkers.append_history import AppendHistory
from checkers.faults import Starts, starts_by_kind
from checkers.history import NEMESIS, Op, Outline
from checkers.result import UNKNOWN

# test.json's `outcome` of a run that ran to its end; runs stored before it was recorded have none
COMPLETE = "complete"
UNFINISHED = {
    "running": "the run never finished (its harness died, or it is still running)",
    "interrupted": "the run was interrupted",
    "failed": "the run failed",
}


def check(history: Sequence[Op], test: Mapping[str, Any], outline: Outline,
          parsed: AppendHistory | None, open_invokes: list[int]) -> dict[str, Any]:
    """`outline` is the history's; `parsed` the append parse when the model is a log (then the
    final reads are required); `open_invokes` the positions of invokes never completed."""
    ok = outline.types.count("ok")
    final_ok = _final_ok(history, outline, parsed)
    completions = len(outline.types)
    reasons: list[str] = []
    if not completions and not open_invokes:
        reasons.append("the history is empty" if not history
                       else "the history holds no client operation")
    elif ok - final_ok == 0:
        reasons.append(f"no operation succeeded (0 ok of {completions - final_ok} completed, "
                       f"final reads aside): nothing was acknowledged, so nothing was checked")
    finals = sum(read.final for read in parsed.reads) if parsed is not None else None
    if parsed is not None and completions and not finals:
        reasons.append("no final read succeeded: lost writes cannot be ruled out")
    elif parsed is None and test.get("workload") == "kv" and completions and not final_ok \
            and any(op.get("final") for op in history):
        # Only when the run asked for final reads: a kv history from elsewhere (`kraft check
        # --model kv`) may have none, and its reads still decide it.
        reasons.append("no final read of any key succeeded: lost writes cannot be ruled out")
    asked = _asked_faults(test)
    starts = starts_by_kind(outline.nemesis) if asked else {}
    done = sum(kind.done for kind in starts.values()) if asked else None
    missing = {kind: starts.get(kind, Starts()) for kind in asked
               if not starts.get(kind, Starts()).done}
    # the rule: a run none of whose faults took effect, or in which a kind it asked for
    # never started; a kind that started and did nothing beside others that took effect is said
    # (`faults_not_done_why`) but leaves the verdict to the others
    never = {kind: starts for kind, starts in missing.items() if not starts.attempted}
    if missing and not done:
        reasons.append(_no_fault(asked, starts))
    elif never:
        reasons.append(_no_fault_for(never))
    outcome = test.get("outcome")
    unfinished = isinstance(outcome, str) and outcome != COMPLETE
    if unfinished:
        what = UNFINISHED.get(str(outcome), f"the run ended {outcome!r}")
        error = test.get("error")
        if outcome == "failed" and error:
            reasons.append(f"{what}: {error}")
        else:
            reasons.append(f"{what}: the history is partial")
    result: dict[str, Any] = {
        "valid": UNKNOWN if reasons else True,
        "ok_ops": ok - final_ok,
        "completed_ops": completions,
        "indeterminate": len(open_invokes),
        "partial": unfinished or bool(open_invokes),
    }
    if finals is not None:
        result["final_reads"] = finals
    if done is not None:
        result["faults_done"] = done
    if missing:
        result["faults_not_done"] = sorted(missing)
        result["faults_not_done_why"] = {kind: _why(missing[kind]) for kind in sorted(missing)}
    if unfinished:
        result["outcome"] = outcome
        result["unfinished"] = UNFINISHED.get(str(outcome), f"the run ended {outcome!r}")
    if reasons:
        result["error"] = "; ".join(reasons)
    return result


def _final_ok(history: Sequence[Op], outline: Outline, parsed: AppendHistory | None) -> int:
    """How many ok completions are of final ops (made after healing, marked `final`)."""
    if parsed is not None:
        # the reads `final` in the history itself, not those the parse took as stand-ins
        return sum(1 for read in parsed.reads if read.final) if parsed.final_marked else 0
    return sum(1 for op in history
               if op["type"] == "ok" and op["process"] != NEMESIS and op.get("final"))


def _asked_faults(test: Mapping[str, Any]) -> list[str]:
    """The fault kinds test.json's `nemesis` names (none: a run without faults)."""
    asked = test.get("nemesis")
    return [str(kind) for kind in asked] if isinstance(asked, list) else []


def _no_fault_for(missing: dict[str, Starts]) -> str:
    """Why the kinds in `missing` did not take effect, while others did."""
    return "; ".join(f"no fault took effect for {kind}: {_why(starts)}"
                     for kind, starts in missing.items())


def _why(starts: Starts) -> str:
    if starts.completed:
        return (f"none of its {starts.completed} start{'s' if starts.completed != 1 else ''} "
                "took effect")
    return "its first start never completed" if starts.invoked else "it never started"


def _no_fault(asked: list[str], starts: dict[str, Starts]) -> str:
    """Why no fault took effect at all (`starts`: every kind's, asked or not)."""
    completed = sum(kind.completed for kind in starts.values())
    why = (f"none of its {completed} start{'s' if completed != 1 else ''} took effect" if completed
           else "its first start never completed" if starts
           else "none started (the first waits for the nemesis interval)")
    return f"no fault took effect: the run asked for {', '.join(asked)}, and {why}"
