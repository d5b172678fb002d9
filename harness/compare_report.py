"""How `kraft compare` shows its tables (harness/compare.py): terminal text, one HTML page, Allure.

Every view is drawn from compare.json's data alone, so the three say the same. In each workload's
table the targets stand side by side within each nemesis: text prints a block per nemesis with a
column per target; the HTML page one table per workload, the nemeses as column groups. Allure
gets one result per run (epic = target, feature = workload, story = nemesis, as the campaign
labels its cases) and one holding the page.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import shutil
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from harness.compare import relative_link, run_labels

# the campaign's Allure categories (matched on "invalid: <kinds>"), in a source checkout
CATEGORIES = Path(__file__).resolve().parent.parent / "campaigns" / "categories.json"

Row = dict[str, Any]
Table = dict[str, Any]
FAULTS = "faults requested / took effect"

DEFINITIONS = (
    "verdicts and anomalies as each run's results.json states them; findings: anomalies of kinds "
    "the target does not promise to avoid (reported, never a failure)",
    "availability during faults: share of ok among client operations invoked while a fault "
    "window was open",
    "recovery: from a fault's start (failover) or its end (heal) to the next ok operation; median "
    "and worst of the events that recovered, and how many did",
    "throughput: ok operations per second of history; latency: p50/p99 of ok operations",
    "faults requested / took effect: the fault kinds the runs asked for, then per kind the starts "
    "that took effect of those attempted (a start of no effect, or that failed, did not)",
)


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share * 100:.1f}%"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _recovery(row: Row, event: str) -> str:
    found = row["recovery"].get(event)
    if not found:
        return "-"
    text = f"{_ms(found['p50_ms'])} / {_ms(found['max_ms'])} ms"
    if found["recovered"] < found["events"]:
        text += f" ({found['events'] - found['recovered']} of {found['events']} never)"
    return text


def _kinds(found: dict[str, list[str]], label: Callable[[str], str]) -> list[str]:
    return [f"{kind} ({', '.join(label(r) for r in runs)})" for kind, runs in found.items()]


def _availability(row: Row) -> str:
    share = row["availability_during_faults"]
    if share is None:  # no operation was invoked inside a fault window, or there was none
        return "no ops during faults" if row["recovery"] else "no faults"
    return f"{_pct(share)} of {row['fault_ops']} ops"


def faults_text(faults: dict[str, Any]) -> str:
    """`kill, pause / kill 4 of 5, pause 0 of 3`: the kinds requested, then each kind's starts
    done of those attempted (`-` when no history was read); `none` for no faults at all.
    `kraft analyze` writes the same text (harness/pipeline/aggregate.py)."""
    requested, effect = faults["requested"], faults["took_effect"]
    if effect is None:
        return f"{', '.join(requested) or 'none'} / -"
    if not requested and not effect:
        return "none"
    return f"{', '.join(requested) or 'none'} / " + ", ".join(
        f"{kind} {count['done']} of {count['attempted']}" for kind, count in effect.items())


def _latency(row: Row) -> str:
    found = row["latency"]["all"]
    return f"{_ms(found['p50_ms'])} / {_ms(found['p99_ms'])} ms"


# (label, cell of a row as lines of text); the anomalies and findings may take several lines
def _metrics(label: Callable[[str], str]) -> list[tuple[str, Callable[[Row], list[str]]]]:
    return [
        ("runs", lambda r: [str(r["runs"])]),
        ("valid/invalid/unknown", lambda r: [f"{r['valid']}/{r['invalid']}/{r['unknown']}"]),
        ("valid share", lambda r: [_pct(r["valid_share"])]),
        ("anomalies", lambda r: _kinds(r["anomalies"], label) or ["none"]),
        ("findings", lambda r: _kinds(r["findings"], label) or ["none"]),
        (FAULTS, lambda r: [faults_text(r["faults"])]),
        ("availability in faults", lambda r: [_availability(r)]),
        ("recovery after start (p50/worst)", lambda r: [_recovery(r, "start")]),
        ("recovery after heal (p50/worst)", lambda r: [_recovery(r, "stop")]),
        ("throughput", lambda r: ["-" if r["throughput_ok_per_s"] is None
                                  else f"{r['throughput_ok_per_s']:.1f} ok/s"]),
        ("latency p50/p99", lambda r: [_latency(r)]),
    ]


def _cells(table: Table) -> dict[tuple[str, str], Row]:
    return {(r["nemesis"], r["target"]): r for r in table["rows"]}


def _why_not(data: dict[str, Any], workload: str, nemesis: str | None, target: str) -> str:
    for item in data["not_run"]:
        if (item["workload"], item["nemesis"], item["target"]) == (workload, nemesis, target):
            return f"not run: {item['reason']}"
    return "no runs"


def text(data: dict[str, Any]) -> str:
    """The comparison as plain text for the terminal."""
    labels = run_labels(data["runs"])
    label = labels.get
    metrics = _metrics(lambda run_id: label(run_id, run_id))
    width = max(len(name) for name, _ in metrics) + 4
    lines: list[str] = []
    for table in data["tables"]:
        cells = _cells(table)
        lines += ["", f"workload {table['workload']}"]
        for nemesis in table["nemeses"]:
            columns: list[list[list[str]]] = []  # per target, per metric, lines
            for target in table["targets"]:
                found = cells.get((nemesis, target))
                if found is None:
                    why = _why_not(data, table["workload"], nemesis, target)
                    columns.append([[why]] + [[""] for _ in metrics[1:]])
                else:
                    columns.append([cell(found) for _, cell in metrics])
            col = [max([len(target)] + [len(x) for cells_ in column for x in cells_]) + 2
                   for target, column in zip(table["targets"], columns, strict=True)]
            lines.append(f"  {('nemesis ' + nemesis):<{width}}" + "".join(
                f"{t:<{w}}" for t, w in zip(table["targets"], col, strict=True)).rstrip())
            for m, (name, _) in enumerate(metrics):
                depth = max(len(column[m]) for column in columns)
                for i in range(depth):
                    head = name if i == 0 else ""
                    lines.append(f"    {head:<{width - 2}}" + "".join(
                        f"{(column[m][i] if i < len(column[m]) else ''):<{w}}"
                        for column, w in zip(columns, col, strict=True)).rstrip())
    if not data["tables"]:
        lines.append("no runs to compare")
    for item in data["not_run"]:
        if item["nemesis"] is None:
            lines.append(f"not run: {item['target']} x {item['workload']}: {item['reason']}")
    for item in data["skipped_runs"]:
        lines.append(f"skipped {item['path']}: {item['problem']}")
    return "\n".join(lines).lstrip("\n")


# -- HTML ---------------------------------------------------------------------------------------

STYLE = """
body{font-family:sans-serif;margin:1.5em;max-width:100em}
table{border-collapse:collapse;font-size:13px;margin-bottom:1.5em}
td,th{padding:3px 8px;border:1px solid #ccc;vertical-align:top;text-align:left}
th.n{background:#eef}
td.bad{background:#fdd} td.find{background:#ffd} td.ok{background:#dfd}
td.m{font-weight:bold;white-space:nowrap}
"""


def _link(data_dir: Path, paths: dict[str, str], labels: dict[str, str], run_id: str) -> str:
    target = relative_link(paths.get(run_id, run_id), data_dir)
    return (f"<a href='{html.escape(target)}' title='{html.escape(run_id)}'>"
            f"{html.escape(labels.get(run_id, run_id))}</a>")


def _html_kinds(found: dict[str, list[str]], link: Callable[[str], str]) -> str:
    if not found:
        return "none"
    return "<br>".join(f"{html.escape(kind)}: {', '.join(link(r) for r in runs)}"
                       for kind, runs in found.items())


def page(data: dict[str, Any], out_dir: Path, title: str = "kraft compare") -> str:
    """compare.html: one self-contained page, links to each run's directory relative to it."""
    labels = run_labels(data["runs"])
    paths = {run["run_id"]: run["path"] for run in data["runs"]}

    def link(run_id: str) -> str:
        return _link(out_dir, paths, labels, run_id)

    plain = _metrics(lambda run_id: labels.get(run_id, run_id))
    rich: dict[str, Callable[[Row], str]] = {
        "runs": lambda r: ", ".join(link(x) for x in r["run_ids"]),
        "anomalies": lambda r: _html_kinds(r["anomalies"], link),
        "findings": lambda r: _html_kinds(r["findings"], link),
    }
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
             f"</title><style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>{len(data['runs'])} runs; generated {html.escape(data.get('generated', ''))}."
             " <code>kraft analyze</code> over the same results directory gives the Spark "
             "pipeline's tables of the same runs (grouped by target).</p><ul>",
             *(f"<li>{html.escape(d)}</li>" for d in DEFINITIONS), "</ul>"]
    for table in data["tables"]:
        cells = _cells(table)
        targets, nemeses = table["targets"], table["nemeses"]
        parts.append(f"<h2>workload {html.escape(table['workload'])}</h2><table><tr><th></th>")
        parts += [f"<th class='n' colspan='{len(targets)}'>nemesis {html.escape(n)}</th>"
                  for n in nemeses]
        parts.append("</tr><tr><th>target</th>")
        parts += [f"<th>{html.escape(t)}</th>" for _ in nemeses for t in targets]
        parts.append("</tr>")
        for name, cell in plain:
            parts.append(f"<tr><td class='m'>{html.escape(name)}</td>")
            for nemesis in nemeses:
                for target in targets:
                    found = cells.get((nemesis, target))
                    if found is None:
                        why = _why_not(data, table["workload"], nemesis, target)
                        parts.append(f"<td>{html.escape(why) if name == 'runs' else ''}</td>")
                        continue
                    shown = (rich[name](found) if name in rich
                             else "<br>".join(html.escape(x) for x in cell(found)))
                    parts.append(f"<td{_css(name, found)}>{shown}</td>")
            parts.append("</tr>")
        parts.append("</table>")
    notes = [f"{item['target']} x {item['workload']}: {item['reason']}"
             for item in data["not_run"] if item["nemesis"] is None]
    notes += [f"skipped {item['path']}: {item['problem']}" for item in data["skipped_runs"]]
    if notes:
        parts.append("<h2>Not compared</h2><ul>")
        parts += [f"<li>{html.escape(n)}</li>" for n in notes]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _css(metric: str, row: Row) -> str:
    if metric == "anomalies":
        return " class='bad'" if row["anomalies"] else " class='ok'"
    if metric == "findings" and row["findings"]:
        return " class='find'"
    effect = row["faults"]["took_effect"]
    if metric == FAULTS and effect and any(
            effect[kind]["done"] == 0 for kind in row["faults"]["requested"]):
        return " class='find'"  # a fault asked for that never took effect
    return ""


# -- Allure -------------------------------------------------------------------------------------

def _millis(text: object) -> int | None:
    try:
        return int(dt.datetime.fromisoformat(str(text)).timestamp() * 1000)
    except ValueError:
        return None


def status_of(run: dict[str, Any], failed_to_run: bool) -> tuple[str, str]:
    """(Allure status, message) of one run, as the campaign gives them: a run that did not run
    through, or whose verdict is unknown, is broken (not a verdict on the target); invalid is
    failed, with the anomaly kinds first (campaigns/categories.json matches on them)."""
    if failed_to_run or run["valid"] not in ("true", "false"):
        problem = run.get("problem") or "the verdict is unknown"
        return "broken", f"harness error or no verdict: {problem}"
    if run["valid"] == "false":
        kinds = ", ".join(run["anomalies"]) or "no anomaly named"
        return "failed", f"invalid: {kinds}"
    findings = ", ".join(run["findings"])
    return "passed", f"valid; findings: {findings}" if findings else "valid"


def allure_results(data: dict[str, Any], alluredir: Path, page_path: Path,
                   failed: Collection[str] = ()) -> int:
    """One Allure result per run (results.json and test.json attached) and one holding the page;
    `failed` names the runs (run ids) whose `kraft test` did not run through. Returns how many
    results were written."""
    from allure_commons.logger import AllureFileLogger
    from allure_commons.model2 import Attachment, Label, Parameter, StatusDetails, TestResult
    from allure_commons.utils import md5, uuid4

    logger = AllureFileLogger(str(alluredir))
    if CATEGORIES.is_file():  # the campaign's categories: invalid runs sorted by anomaly kind
        shutil.copy(CATEGORIES, alluredir / "categories.json")

    def attach(result: TestResult, source: Path, name: str, mime: str, ext: str) -> None:
        if source.is_file():
            file_name = f"{uuid4()}-attachment.{ext}"
            logger.report_attached_file(str(source), file_name)
            result.attachments.append(Attachment(name=name, source=file_name, type=mime))

    written = 0
    for run in data["runs"]:
        run_dir = Path(run["path"])
        test = json.loads((run_dir / "test.json").read_text()) if (
            run_dir / "test.json").is_file() else {}
        full_name = f"kraft-compare.{run['target']}.{run['workload']}.{run['nemesis']}"
        status, message = status_of(run, run["run_id"] in failed)
        result = TestResult(
            uuid=uuid4(), name=f"{run['workload']} under {run['nemesis']} on {run['target']} "
            f"(seed {run['seed']})", fullName=f"{full_name}.seed{run['seed']}",
            historyId=md5(full_name, str(run["seed"])), status=status,
            statusDetails=StatusDetails(message=message), stage="finished",
            start=_millis(test.get("start_time")), stop=_millis(test.get("end_time")),
            labels=[Label("epic", run["target"]), Label("feature", run["workload"]),
                    Label("story", run["nemesis"]), Label("framework", "kraft-compare")],
            parameters=[Parameter("seed", str(run["seed"])),
                        Parameter("run", run["run_id"])])
        attach(result, run_dir / "results.json", "results.json", "application/json", "json")
        attach(result, run_dir / "test.json", "test.json", "application/json", "json")
        logger.report_result(result)
        written += 1
    result = TestResult(
        uuid=uuid4(), name="comparison of the targets", fullName="kraft-compare.comparison",
        historyId=md5("kraft-compare.comparison"), status="passed", stage="finished",
        labels=[Label("epic", "comparison"), Label("feature", "kraft compare"),
                Label("framework", "kraft-compare")])
    attach(result, page_path, "compare.html", "text/html", "html")
    logger.report_result(result)
    return written + 1
