"""What a campaign test tells Allure: labels, attachments, and a failure message with evidence.

The failure message starts with the anomaly kinds found (`stale-read`, `lost-write`, ...), so that
the categories in `categories.json` (matched by Allure on the message) sort failures into
lost-write, stale-read, split-brain, other anomaly, and harness or infrastructure errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import allure


def attach_run(run_dir: Path) -> None:
    """Attach everything a reader needs to judge the run without the machine it ran on."""
    attach = allure.attach.file
    for name, kind in (("test.json", allure.attachment_type.JSON),
                       ("results.json", allure.attachment_type.JSON),
                       ("history.jsonl", allure.attachment_type.TEXT),
                       ("timeline.html", allure.attachment_type.HTML)):
        path = run_dir / name
        if path.exists():
            attach(str(path), name=name, attachment_type=kind)
    for png in sorted((run_dir / "plots").glob("*.png")):
        attach(str(png), name=f"plots/{png.name}", attachment_type=allure.attachment_type.PNG)
    for node_dir in sorted(p for p in (run_dir / "nodes").glob("*") if p.is_dir()):
        for log in sorted(node_dir.rglob("*.log")):
            attach(str(log), name=f"{node_dir.name}/{log.name}",
                   attachment_type=allure.attachment_type.TEXT)
        events = node_dir / "events.jsonl"
        if events.exists():
            attach(str(events), name=f"{node_dir.name}/events.jsonl",
                   attachment_type=allure.attachment_type.TEXT)


def anomaly_kinds(results: dict[str, Any]) -> list[str]:
    kinds = set(results.get("anomaly_types") or [])
    kinds |= set((results.get("anomalies") or {}).keys())
    for checker in (results.get("checkers") or {}).values():
        if isinstance(checker, dict):
            kinds |= set(checker.get("anomaly_types") or [])
            kinds |= set((checker.get("anomalies") or {}).keys())
    return sorted(kinds)


def failure_message(results: dict[str, Any], history_path: Path | None, limit: int = 3) -> str:
    """`invalid: stale-read, lost-write` then the first proving operations of each kind."""
    kinds = anomaly_kinds(results)
    lines = [f"invalid: {', '.join(kinds) if kinds else 'no anomaly named'}"]
    ops = _history_by_index(history_path)
    anomalies = results.get("anomalies") or {}
    for kind in kinds:
        for found in (anomalies.get(kind) or [])[:limit]:
            explanation = found.get("explanation", "") if isinstance(found, dict) else str(found)
            lines.append(f"  {kind}: {explanation}")
            for index in (found.get("ops", []) if isinstance(found, dict) else [])[:4]:
                op = ops.get(index)
                if op is not None:
                    lines.append("    op " + _describe(op))
    return "\n".join(lines)


def _history_by_index(path: Path | None) -> dict[int, dict[str, Any]]:
    if path is None or not path.exists():
        return {}
    ops: dict[int, dict[str, Any]] = {}
    with path.open() as lines:
        for line in lines:
            try:
                op = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(op, dict) and isinstance(op.get("index"), int):
                ops[op["index"]] = op
    return ops


def _describe(op: dict[str, Any]) -> str:
    time_s = op.get("time", 0) / 1e9
    return (f"{op.get('index')} t={time_s:.3f}s process={op.get('process')} "
            f"node={op.get('node')} {op.get('type')} {op.get('f')} {json.dumps(op.get('value'))}")


def categories_of(message: str, status: str) -> list[str]:
    """The categories of categories.json a result lands in, by Allure's own rule: every category
    whose statuses include the result's and whose regex matches the whole message."""
    import re

    categories = json.loads((Path(__file__).parent / "categories.json").read_text())
    names: list[str] = []
    for category in categories:
        if status not in category.get("matchedStatuses", [status]):
            continue
        regex = category.get("messageRegex")
        # Allure uses Java's String.matches: the whole message must match, with no flags; the
        # regexes carry (?s) themselves so that '.' spans the evidence lines.
        if regex is None or re.fullmatch(regex, message):
            names.append(category["name"])
    return names
