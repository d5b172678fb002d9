"""Browsing stored runs over HTTP, read-only, like Jepsen's `serve` (the server of `kraft serve`).

Theory of operation. A URL path is a path inside the results directory, so that the pages a run
stores (timeline.html, the Spark pipeline's summary.html with its relative links) work as they
are. `confine` turns a request path into a file and refuses anything that would leave the
directory: `..` or `.` segments, hidden names, backslashes and NULs (after percent-decoding), and
any path whose real location (symlinks followed) is outside it. Three kinds of answer:

- `/`: every run, newest first (`RunSummary`, read from test.json, results.json and the last line
  of history.jsonl), filterable by verdict with `?verdict=`, and the analysis and comparison
  pages found in the results directory's `_`-named folders;
- a run directory: its page, linking the timeline, plots, results.json, history and node logs;
- anything else: the file itself (or a plain listing of a directory).

Only GET and HEAD are answered; the server binds 127.0.0.1 only, since the runs it shows may hold
anything a node logged.
"""

from __future__ import annotations

import html
import json
import mimetypes
import os
import shutil
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from contracts.results import HISTORY, RESULTS, TEST, node_dirs, read_object
from harness.pipeline.discover import discover

HOST = "127.0.0.1"
VERDICTS = ("valid", "invalid", "unknown", "incomplete")
VERDICT_OF = {True: "valid", False: "invalid", "unknown": "unknown"}
RUN_FILES = ("timeline.html", RESULTS, HISTORY, TEST, "harness.log", "backend.log")
NODE_FILES = ("node.log", "events.jsonl", "final.json", "log.jsonl")
PLOT_ORDER = ("leaders.png", "latency-raw.png", "latency-quantiles.png", "rate.png")
TEXT_SUFFIXES = (".jsonl", ".log", ".properties", ".txt", ".csv", ".checkpoint")
TAIL_BYTES = 64 * 1024  # enough for the last line of a history


# --- paths -------------------------------------------------------------------------------------


def confine(root: Path, url_path: str) -> Path | None:
    """The file a URL path names inside `root`, or None when the path is not allowed."""
    decoded = unquote(url_path, errors="strict") if "%" in url_path else url_path
    if "\\" in decoded or "\0" in decoded:
        return None
    parts = [part for part in decoded.split("/") if part]
    if any(part in (".", "..") or part.startswith(".") for part in parts):
        return None
    base = Path(os.path.realpath(root))
    real = Path(os.path.realpath(base.joinpath(*parts)))
    return real if real == base or real.is_relative_to(base) else None


# --- what the index shows of a run -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSummary:
    path: str  # "<test-name>/<start time>", relative to the results directory
    test_name: str
    started: str
    target: str
    nemeses: tuple[str, ...]
    verdict: str  # one of VERDICTS
    anomalies: tuple[str, ...]
    duration_s: float | None


def runs(root: Path) -> list[RunSummary]:
    """Every run of a results directory, newest first: the runs the Spark pipeline finds
    (`latest`, links and `_`/`.` names skipped) that hold a test.json or a history."""
    found = [summarize(root, run) for run in map(Path, (ref.path for ref in discover(root)))
             if (run / TEST).is_file() or (run / HISTORY).is_file()]
    return sorted(found, key=lambda r: (r.path.rsplit("/", 1)[-1], r.path), reverse=True)


def summarize(root: Path, run: Path) -> RunSummary:
    test, results = read_object(run / TEST), read_object(run / RESULTS)
    verdict = VERDICT_OF.get(results.get("valid"), "unknown") if results else "incomplete"
    nemeses = test.get("nemesis") or []
    duration = _last_time_s(run / HISTORY)
    if duration is None and isinstance(test.get("time_limit"), int | float):
        duration = float(test["time_limit"])
    return RunSummary(
        path=run.relative_to(root).as_posix(), test_name=str(test.get("name") or run.parent.name),
        started=str(test.get("start_time") or run.name), target=str(test.get("target") or "?"),
        nemeses=tuple(map(str, nemeses if isinstance(nemeses, list) else [nemeses])),
        verdict=verdict, anomalies=tuple(map(str, results.get("anomaly_types") or ())),
        duration_s=duration)


def _last_time_s(history: Path) -> float | None:
    """The time of the history's last op, read from its tail (a history can be gigabytes)."""
    try:
        with open(history, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - TAIL_BYTES))
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            op = json.loads(line)
        except ValueError:
            continue
        if isinstance(op, dict) and isinstance(op.get("time"), int | float):
            return float(op["time"]) / 1e9
    return None


def reports(root: Path) -> list[str]:
    """The Spark pipeline's summary.html and the comparison pages: HTML files in the results
    directory's `_`-named folders (`_analysis/`, `_compare/`), two levels deep at most."""
    found: list[str] = []
    for folder in sorted(p for p in root.glob("_*") if p.is_dir() and not p.is_symlink()):
        for page in sorted([*folder.glob("*.html"), *folder.glob("*/*.html")]):
            if confine(root, page.relative_to(root).as_posix()) is not None:
                found.append(page.relative_to(root).as_posix())
    return found


# --- pages -------------------------------------------------------------------------------------

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d232a;
       margin: 0 auto; max-width: 1320px; padding: 14px 24px 40px; }
h1 { font-size: 21px; margin: 4px 0 10px; } h2 { font-size: 16px; margin: 22px 0 8px; }
a { color: #0b5cad; } nav { margin: 6px 0 12px; } nav a, nav b { margin-right: 14px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
th { background: #f2f4f6; font-weight: 600; position: sticky; top: 0; }
tr:hover td { background: #f8fafc; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.verdict { display: inline-block; min-width: 68px; text-align: center; padding: 1px 8px;
           border-radius: 10px; font-weight: 600; font-size: 12px; }
.valid { background: #d3f2dc; color: #16602c; } .invalid { background: #fbd5d9; color: #9b0d1d; }
.unknown { background: #fff0c2; color: #7a5a00; } .incomplete { background: #e4e7eb; color: #4a535c; }
.kinds { color: #9b0d1d; } .muted { color: #6b747c; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(290px, 1fr));
         gap: 4px 18px; margin: 8px 0 4px; padding: 10px 14px; background: #f8fafc;
         border: 1px solid #e3e6ea; border-radius: 6px; }
.facts div { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.facts span { color: #6b747c; margin-right: 6px; }
#files a { display: inline-block; margin: 0 6px 6px 0; padding: 3px 10px; border-radius: 14px;
           border: 1px solid #b9c7d6; background: #f2f7fc; text-decoration: none; }
#files a:first-child { background: #0b5cad; color: #fff; border-color: #0b5cad; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 14px; }
.plots figure { margin: 0; border: 1px solid #e3e6ea; padding: 6px; }
.plots img { width: 100%; height: auto; display: block; }
.plots figcaption { font-size: 12px; color: #4a535c; }
ul.files { columns: 3; padding-left: 18px; }
"""


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><link rel='icon' href='data:,'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>{body}</body></html>")


def _link(href: str, text: str) -> str:
    return f"<a href='{html.escape(href, quote=True)}'>{html.escape(text)}</a>"


def _badge(verdict: str) -> str:
    return f"<span class='verdict {verdict}'>{html.escape(verdict)}</span>"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def index_page(root: Path, verdict: str | None) -> str:
    every = runs(root)
    shown = [r for r in every if verdict in (None, r.verdict)]
    counts = {v: sum(1 for r in every if r.verdict == v) for v in VERDICTS}
    nav = [_link("/", f"all ({len(every)})") if verdict else f"<b>all ({len(every)})</b>"]
    nav += [f"<b>{v} ({counts[v]})</b>" if v == verdict else _link(f"/?verdict={v}", f"{v} ({counts[v]})")
            for v in VERDICTS if counts[v] or v == verdict]
    rows = "".join(_index_row(r) for r in shown) or (
        "<tr><td colspan='8' class='muted'>No runs here" + (" with this verdict" if verdict else "") +
        ". `kraft test --results-dir DIR` stores runs.</td></tr>")
    found = reports(root)
    extra = ("<h2>Analyses and comparisons</h2><ul>" +
             "".join(f"<li>{_link('/' + quote(p), p)}</li>" for p in found) + "</ul>") if found else ""
    return _page("kraft runs", (
        f"<h1>Runs in {html.escape(str(root))}</h1><nav id='filters'>verdict: {''.join(nav)}</nav>"
        "<table id='runs'><thead><tr><th>started</th><th>test</th><th>target</th><th>nemeses</th>"
        "<th>verdict</th><th>anomalies</th><th>duration</th><th>timeline</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>{extra}"))


def _index_row(run: RunSummary) -> str:
    href = "/" + quote(run.path) + "/"
    return (f"<tr class='run' data-verdict='{run.verdict}'><td>{_link(href, run.started)}</td>"
            f"<td>{html.escape(run.test_name)}</td><td>{html.escape(run.target)}</td>"
            f"<td>{html.escape(', '.join(run.nemeses) or 'none')}</td><td>{_badge(run.verdict)}</td>"
            f"<td class='kinds'>{html.escape(', '.join(run.anomalies))}</td>"
            f"<td class='num'>{_duration(run.duration_s)}</td>"
            f"<td>{_link(href + 'timeline.html', 'timeline')}</td></tr>")


def run_page(root: Path, run: Path) -> str:
    summary = summarize(root, run)
    test, results = read_object(run / TEST), read_object(run / RESULTS)
    files = [_link(name, name) for name in RUN_FILES if (run / name).is_file()]
    return _page(f"{summary.test_name} {summary.started}", "".join([
        f"<nav>{_link('/', '← all runs')}</nav>",
        f"<h1>{html.escape(summary.test_name)} · {html.escape(summary.started)} {_badge(summary.verdict)}</h1>",
        f"<nav id='files'>{''.join(files)}</nav>",
        _facts(summary, test), _checkers(results), _plots(run), _nodes(run)]))


def _facts(summary: RunSummary, test: dict[str, Any]) -> str:
    rows = [("target", summary.target), ("backend", test.get("backend")),
            ("workload", test.get("workload")), ("nemeses", ", ".join(summary.nemeses) or "none"),
            ("nodes", " ".join(map(str, test.get("nodes") or []))), ("seed", test.get("seed")),
            ("duration", _duration(summary.duration_s)),
            ("concurrency, rate", f"{test.get('concurrency', '?')}, {test.get('rate', '?')} ops/s"),
            ("node config", " ".join(f"{k}={v}" for k, v in (test.get("node_config") or {}).items())),
            ("anomalies", ", ".join(summary.anomalies) or "none")]
    cells = "".join(f"<div title='{html.escape(str(v), quote=True)}'><span>{html.escape(k)}</span>"
                    f"{html.escape(str(v if v not in (None, '') else '—'))}</div>" for k, v in rows)
    return f"<div class='facts'>{cells}</div>"


def _checkers(results: dict[str, Any]) -> str:
    checkers = results.get("checkers") or {}
    if not isinstance(checkers, dict) or not checkers:
        return ""
    rows = []
    for name, result in checkers.items():
        result = result if isinstance(result, dict) else {}
        verdict = VERDICT_OF.get(result.get("valid"), "unknown")
        counts = result.get("anomaly_counts") or {}
        found = ", ".join(f"{kind}: {n}" for kind, n in counts.items()) if isinstance(counts, dict) else ""
        undecided = result.get("undecided")  # keys a search left unjudged beside its verdict
        if isinstance(undecided, list) and undecided and not result.get("error"):
            found = "; ".join(filter(None, [found, "undecided key(s): "
                                            + ", ".join(map(str, undecided[:10]))]))
        rows.append(f"<tr><td>{html.escape(str(name))}</td><td>{_badge(verdict)}</td>"
                    f"<td class='kinds'>{html.escape(found or str(result.get('error') or ''))}</td></tr>")
    return ("<h2>Checkers</h2><table><thead><tr><th>checker</th><th>verdict</th><th>anomalies</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _plots(run: Path) -> str:
    plots = sorted((run / "plots").glob("*.png"),
                   key=lambda p: (PLOT_ORDER.index(p.name) if p.name in PLOT_ORDER else len(PLOT_ORDER), p.name))
    if not plots:
        return ""
    figures = "".join(f"<figure><a href='plots/{quote(p.name)}'><img src='plots/{quote(p.name)}' "
                      f"alt='{html.escape(p.stem)}'></a><figcaption>{html.escape(p.name)}"
                      "</figcaption></figure>" for p in plots)
    return f"<h2>Plots</h2><div class='plots'>{figures}</div>"


def _nodes(run: Path) -> str:
    nodes = list(node_dirs(run).values())
    if not nodes:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(n.name)}</td><td>" +
        " · ".join(_link(f"nodes/{quote(n.name)}/{f}", f) for f in NODE_FILES if (n / f).is_file()) +
        f" · {_link(f'nodes/{quote(n.name)}/', 'all files')}</td></tr>" for n in nodes)
    return f"<h2>Nodes</h2><table id='nodes'><tbody>{rows}</tbody></table>"


def listing_page(root: Path, folder: Path) -> str:
    """A plain listing of a folder of a run (`root` and `folder` are real paths)."""
    where = folder.relative_to(root).as_posix()
    entries = [e for e in sorted(folder.iterdir()) if not e.name.startswith(".")]
    items = "".join(f"<li>{_link(quote(e.name) + ('/' if e.is_dir() else ''), e.name + ('/' if e.is_dir() else ''))}</li>"
                    for e in entries)
    return _page(where, f"<nav>{_link('/', '← all runs')} {_link('../', '↑ up')}</nav>"
                        f"<h1>{html.escape(where)}/</h1><ul class='files'>{items}</ul>")


# --- the server --------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    """GET and HEAD; any other method gets 501 from the base class, so nothing can change."""

    server: RunsServer
    server_version = "kraft-serve"

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, send_body: bool) -> None:
        url = urlsplit(self.path)
        root = self.server.root
        try:
            target = confine(root, url.path)
        except UnicodeDecodeError:
            target = None
        if target is None:
            self._text(HTTPStatus.FORBIDDEN, "outside the results directory\n", send_body)
        elif not target.exists() and url.path == "/favicon.ico":
            self._text(HTTPStatus.NO_CONTENT, "", send_body)  # what a browser asks for beside a text file
        elif not target.exists():
            self._text(HTTPStatus.NOT_FOUND, "no such file in the results directory\n", send_body)
        elif target.is_dir() and not url.path.endswith("/"):
            # one leading slash: `//host` would send the browser to another site
            self._redirect("/" + quote(unquote(url.path).strip("/")) + "/")
        elif target.is_dir():
            self._html(self._folder_page(target, parse_qs(url.query)), send_body)
        else:
            self._file(target, send_body)

    def _folder_page(self, folder: Path, query: dict[str, list[str]]) -> str:
        root = self.server.root
        if folder == root:
            verdict = next(iter(query.get("verdict", [])), None)
            return index_page(root, verdict if verdict in VERDICTS else None)
        if (folder / TEST).is_file() or (folder / HISTORY).is_file():
            return run_page(root, folder)
        return listing_page(root, folder)

    def _headers(self, status: HTTPStatus, content_type: str, length: int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.end_headers()

    def _html(self, page: str, send_body: bool) -> None:
        body = page.encode("utf-8")
        self._headers(HTTPStatus.OK, "text/html; charset=utf-8", len(body))
        if send_body:
            self.wfile.write(body)

    def _text(self, status: HTTPStatus, text: str, send_body: bool) -> None:
        body = text.encode("utf-8")
        self._headers(status, "text/plain; charset=utf-8", len(body))
        if send_body:
            self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(HTTPStatus.MOVED_PERMANENTLY)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _file(self, path: Path, send_body: bool) -> None:
        try:
            handle = open(path, "rb")  # noqa: SIM115
        except OSError:
            self._text(HTTPStatus.FORBIDDEN, "cannot read this file\n", send_body)
            return
        with handle:
            self._headers(HTTPStatus.OK, content_type(path), os.fstat(handle.fileno()).st_size)
            if send_body:
                shutil.copyfileobj(handle, self.wfile)

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)


def content_type(path: Path) -> str:
    if path.suffix in TEXT_SUFFIXES or path.name in ("quorum-state", "leader-epoch-checkpoint"):
        return "text/plain; charset=utf-8"
    guessed = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"{guessed}; charset=utf-8" if guessed.startswith("text/") or guessed == "application/json" else guessed


class RunsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, root: Path, port: int = 0, quiet: bool = False) -> None:
        self.root = Path(os.path.realpath(root))  # what confinement compares real paths with
        self.quiet = quiet
        super().__init__((HOST, port), Handler)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.server_address[1]}/"
