"""The one-page summary of an analysis: a few charts and the small tables, as HTML with PNGs."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from harness.pipeline.analysis import Analysis

GROUP = ["target", "workload", "nemesis"]
DEFINITIONS = """
<ul>
<li>A run is <em>valid</em> when the checkers say so{recheck}; the share is over the runs analyzed.</li>
<li>Latency: from a client's invoke to its <code>ok</code> completion, exact quantiles per
operation.</li>
<li>Throughput: <code>ok</code> completions per second of history (first line to last).</li>
<li>A fault window of KIND, as <code>kraft check</code> draws it, opens at the first nemesis
<code>start-KIND</code> op of a run of them and closes at the last <code>stop-KIND</code> op of
the run that follows (or at the end of the history). Availability during faults: the share of
<code>ok</code> among client operations invoked while a window was open; per fault, an operation
counts once for each kind open when it was invoked.</li>
<li>Recovery: from the start of a window, or its end when it was stopped, to the next (strictly
later) <code>ok</code> client completion; <em>recovered</em> counts the events followed by one.</li>
<li>Faults requested / took effect: the fault kinds the runs asked for (test.json), then per
kind the nemesis starts that took effect of those attempted, over the group's runs (a start of no
effect, or that failed, did not take effect).</li>
<li>Voter changes (runs that changed voters, KIP-853): the voter changes committed in the nodes'
logs, as the <code>membership</code> checker counts them, and those that removed the leader that
appended them.</li>
</ul>
"""


def _label(table: pd.DataFrame, columns: list[str]) -> pd.Series:
    return table[columns].astype(str).agg(" / ".join, axis=1)


def _barh(path: Path, labels: pd.Series, values: pd.Series, title: str, xlabel: str) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if values.dropna().empty:
        return False
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(labels) + 1.2))
    ax.barh(list(labels), list(values.fillna(0)))
    ax.invert_yaxis()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _charts(analysis: Analysis) -> list[str]:
    out = analysis.out / "charts"
    out.mkdir(exist_ok=True)
    t = analysis.tables
    made = []
    summary, latency, recovery = t["summary"], t["latency"], t["recovery"]
    specs = [
        ("valid-share.png", summary, GROUP, "valid_share", "Share of valid runs", "share"),
        ("availability.png", summary, GROUP, "availability_during_faults",
         "Share of ok operations during faults", "share"),
        ("latency-p99.png", latency, [*GROUP, "f"], "p99_ms", "p99 latency of ok operations",
         "ms"),
        ("recovery-p50.png", recovery, [*GROUP, "fault", "event"], "p50_ms",
         "Median time to the next ok operation after a fault event", "ms"),
    ]
    for name, table, columns, value, title, unit in specs:
        if len(table) and _barh(out / name, _label(table, columns), table[value], title, unit):
            made.append(f"charts/{name}")
    return made


def _table(frame: pd.DataFrame, limit: int = 500) -> str:
    shown = frame.head(limit).to_html(index=False, na_rep="", border=0, classes="t")
    more = f"<p>... {len(frame) - limit} more rows in the CSV.</p>" if len(frame) > limit else ""
    return shown + more


def write(analysis: Analysis, recheck: bool) -> Path:
    t = analysis.tables
    runs = t["runs"]
    analyzed = runs[runs["problem"].isna()]
    changed = int((analyzed["valid"] != analyzed["stored_valid"]).sum()) if recheck else 0
    charts = "".join(f'<img src="{c}" alt="{c}">' for c in _charts(analysis))
    skipped = runs[runs["problem"].notna()][["run_id", "problem"]]
    recheck_text = " (re-checked by this analysis)" if recheck else " (as stored in results.json)"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>kraft analyze</title><style>",
        "body{font-family:sans-serif;margin:1.5em;max-width:80em}"
        "table.t{border-collapse:collapse;font-size:12px}"
        "table.t td,table.t th{padding:2px 6px;border-bottom:1px solid #ddd;text-align:right}"
        "img{max-width:48%;vertical-align:top;margin:4px}",
        "</style></head><body>",
        "<h1>kraft analyze</h1>",
        f"<p>{analysis.found} runs found, {analysis.analyzed} analyzed, "
        f"{len(analysis.skipped)} skipped; {int((analyzed['valid'] == 'true').sum())} valid. ",
        f"{changed} verdicts differ from the stored ones. " if recheck else "",
        f"Analysis took {analysis.seconds:.1f} s.</p>",
        DEFINITIONS.format(recheck=recheck_text), charts,
        "<h2>Per target, workload and nemesis</h2>", _table(t["summary"]),
        "<h2>Anomalies</h2>", _table(t["anomalies"]),
        "<h2>Latency of ok operations (ms)</h2>", _table(t["latency"]),
        "<h2>Availability per fault</h2>", _table(t["availability"]),
        "<h2>Recovery after fault events (ms)</h2>", _table(t["recovery"]),
        *(["<h2>Voter changes (KIP-853)</h2>", _table(t["membership"])]
          if "membership" in t and len(t["membership"]) else []),
        "<h2>Skipped runs</h2>",
        _table(skipped) if len(skipped) else "<p>None.</p>",
        "<p>Tables: " + ", ".join(
            f"<a href='{html.escape(n)}.csv'>{html.escape(n)}.csv</a>" for n in t) +
        " (and .parquet); <a href='skipped.csv'>skipped.csv</a>; "
        "Spark's log: <a href='spark.log'>spark.log</a>.</p>",
        "</body></html>",
    ]
    page = analysis.out / "summary.html"
    page.write_text("\n".join(parts), encoding="utf-8")
    return page
