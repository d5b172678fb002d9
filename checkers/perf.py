"""The performance view of a run: latency and rate plots with the fault windows shaded, and the
timeline. Like Jepsen's perf checker, it judges nothing; it shows what the faults did.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.patches import Patch

import checkers.timeline as timeline
from checkers import leaders
from checkers.faults import windows
from checkers.history import Op, pairs

NS = 1e9
TYPE_COLORS = {"ok": "#2a9d3f", "fail": "#d1495b", "info": "#e6a700"}
FAULT_COLORS = ["#f4a261", "#8ecae6", "#b8a1d9", "#cdb4a0", "#9fd8a4", "#f2b5d4"]
QUANTILES = (0.5, 0.95, 0.99, 1.0)
MARKERS = "o^sDvP*X"


def render(history: Sequence[Op], out_dir: Path, anomalies: dict[str, Any] | None = None) -> None:
    plots = Path(out_dir) / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    points = _latencies(history)
    _latency_raw(history, points, plots / "latency-raw.png")
    _latency_quantiles(history, points, plots / "latency-quantiles.png")
    _rate(history, points, plots / "rate.png")
    leaders.render(history, Path(out_dir), plots / "leaders.png")
    timeline.write(history, Path(out_dir) / "timeline.html", anomalies)


def _latencies(history: Sequence[Op]) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """(f, completion type) -> (invoke times in s, latencies in ms)."""
    raw: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for pair in pairs(history):
        start, end = pair.invoke["time"], pair.completion["time"]
        raw[(str(pair.invoke["f"]), pair.type)].append((start / NS, (end - start) / 1e6))
    return {key: (np.array([p[0] for p in v]), np.array([p[1] for p in v])) for key, v in sorted(raw.items())}


def _shade(ax: Axes, history: Sequence[Op]) -> list[Patch]:
    colors: dict[str, str] = {}
    for window in windows(history):
        color = colors.setdefault(window.kind, FAULT_COLORS[len(colors) % len(FAULT_COLORS)])
        ax.axvspan(window.start / NS, window.end / NS, color=color, alpha=0.3, linewidth=0)
    return [Patch(color=color, alpha=0.3, label=kind) for kind, color in colors.items()]


def _finish(fig: Any, ax: Axes, handles: list[Any], path: Path, title: str) -> None:
    ax.set_title(title)
    ax.set_xlabel("time (s)")
    if handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _latency_raw(history: Sequence[Op], points: dict[tuple[str, str], Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 5))
    faults = _shade(ax, history)
    markers = {f: MARKERS[i % len(MARKERS)] for i, f in enumerate(sorted({f for f, _ in points}))}
    handles: list[Any] = []
    for (f, type_), (times, latencies) in points.items():
        handles.append(ax.scatter(times, np.maximum(latencies, 1e-3), s=4, marker=markers[f],
                                  color=TYPE_COLORS.get(type_, "gray"), label=f"{f} {type_}",
                                  rasterized=True))
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    _finish(fig, ax, handles + faults, path, "latency of each operation")


def _latency_quantiles(history: Sequence[Op], points: dict[tuple[str, str], Any],
                       path: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 5))
    faults = _shade(ax, history)
    by_f: dict[str, list[Any]] = defaultdict(list)
    for (f, _), (times, latencies) in points.items():
        by_f[f].append((times, latencies))
    duration = max((float(t.max()) for (t, _) in points.values() if len(t)), default=1.0)
    width = max(1.0, duration / 60)
    handles: list[Any] = []
    for f, series in sorted(by_f.items()):
        times = np.concatenate([s[0] for s in series])
        latencies = np.concatenate([s[1] for s in series])
        buckets = (times // width).astype(int)
        for q in QUANTILES:
            xs, ys = [], []
            for bucket in np.unique(buckets):
                xs.append((bucket + 0.5) * width)
                ys.append(np.quantile(latencies[buckets == bucket], q))
            (line,) = ax.plot(xs, np.maximum(ys, 1e-3), label=f"{f} p{q * 100:g}")
            handles.append(line)
    ax.set_yscale("log")
    ax.set_ylabel("latency (ms)")
    _finish(fig, ax, handles + faults, path, f"latency quantiles ({width:g} s windows)")


def _rate(history: Sequence[Op], points: dict[tuple[str, str], Any], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(11, 5))
    faults = _shade(ax, history)
    handles: list[Any] = []
    for (f, type_), (times, latencies) in points.items():
        done = times + latencies / 1e3
        if not len(done):
            continue
        seconds = np.floor(done).astype(int)
        counts = np.bincount(seconds - seconds.min())
        xs = np.arange(seconds.min(), seconds.min() + len(counts)) + 0.5  # mid-second
        (line,) = ax.plot(xs, counts, color=TYPE_COLORS.get(type_), label=f"{f} {type_}",
                          linestyle="-" if f == "append" else "--")
        handles.append(line)
    ax.set_ylabel("completions per second")
    _finish(fig, ax, handles + faults, path, "throughput")
