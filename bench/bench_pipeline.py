"""How the cost of `kraft analyze` grows with the number of runs, on local[2].

For each size: write a synthetic campaign (1,000 history lines per run by default), then analyze
it in one SparkSession (so the JVM start is counted once, apart). Prints one line per size.

    python bench/bench_pipeline.py --runs 1000 10000 [100000] [--no-recheck] [--dir /tmp/x]

10,000 runs of 1,000 lines are 10^7 operations and about 1.4 GB on disk; 100,000 need ten times
that, so check free space first. A campaign already written with the same size and seed is reused.

Besides the wall time, `cpu_s` is the CPU time the analysis took in this process, the Spark JVM
and its Python workers (Linux: summed over the process tree from /proc). On a machine shared with
other work the wall time says little; `cpu_s / cores` is what the analysis costs on idle cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import IO, Any

from harness.pipeline import job, session
from harness.pipeline.progress import Progress
from testkit import synthetic


def tree_cpu_seconds() -> float | None:
    """CPU seconds used so far by this process and its descendants, alive or reaped (Linux)."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        stats: dict[int, tuple[int, list[str]]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                stats[int(entry)] = (int(fields[1]), fields)  # (parent, fields from state on)
    except (OSError, ValueError, AttributeError):
        return None
    mine = {os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (parent, _) in stats.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                grew = True
    # utime, stime, cutime, cstime: the 14th to 17th fields of stat, 11th to 14th after the name
    return sum(sum(int(x) for x in stats[pid][1][11:15]) for pid in mine if pid in stats) / tick


def campaign(base: Path, runs: int, lines: int, seed: int) -> tuple[Path, float]:
    root = base / f"runs-{runs}-lines-{lines}-seed-{seed}"
    done = root / ".complete"
    if done.exists():
        return root, 0.0
    if root.exists():
        shutil.rmtree(root)
    started = time.monotonic()
    synthetic.generate(root, runs, seed, lines, corrupt=max(1, runs // 1000))
    done.touch()
    return root, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--lines", type=int, default=1000, help="history lines per run")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--dir", type=Path, default=Path("/tmp/kraft-bench-pipeline"))
    p.add_argument("--no-recheck", action="store_true")
    args = p.parse_args(argv)
    session.check_environment()
    args.dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    spark = session.start(args.master, args.dir / "spark")
    print(f"Spark session on {args.master}: {time.monotonic() - started:.1f}s", flush=True)
    print(f"{'runs':>8} {'lines':>11} {'generate_s':>10} {'analyze_s':>9} {'runs/s':>8} "
          f"{'lines/s':>9} {'cpu_s':>7}  recheck={not args.no_recheck}", flush=True)
    # The bench prints its own figures, not the progress line.
    with open(os.devnull, "w") as quiet:
        try:
            _sizes(spark, args, quiet)
        finally:
            spark.stop()
    return 0


def _sizes(spark: Any, args: argparse.Namespace, quiet: IO[str]) -> None:
    for runs in args.runs:
        root, generated = campaign(args.dir, runs, args.lines, args.seed)
        cpu0 = tree_cpu_seconds()
        t0 = time.monotonic()
        result = job.analyze(spark, root, args.dir / f"out-{runs}",
                             recheck=not args.no_recheck, progress=Progress(quiet))
        took = time.monotonic() - t0
        cpu1 = tree_cpu_seconds()
        cpu = f"{cpu1 - cpu0:>7.1f}" if cpu0 is not None and cpu1 is not None else f"{'?':>7}"
        lines = runs * args.lines
        print(f"{runs:>8} {lines:>11} {generated:>10.1f} {took:>9.1f} {runs / took:>8.1f} "
              f"{lines / took:>9.0f} {cpu}  ({result.analyzed} analyzed, "
              f"{len(result.skipped)} skipped)", flush=True)
        steps = ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items())
        print(f"{'':>8} seconds per step: {steps}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
