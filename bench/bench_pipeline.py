"""How the cost of `kraft analyze` grows with the number of runs, on local[2].

For each size: write a synthetic campaign (1,000 history lines per run by default), then analyze
it in one SparkSession (so the JVM start is counted once, apart). Prints one line per size.

    python bench/bench_pipeline.py --runs 1000 10000 [100000] [--no-recheck] [--dir /tmp/x]

10,000 runs of 1,000 lines are 10^7 operations and about 1.2 GB on disk; 100,000 need ten times
that, so check free space first. A campaign already written with the same size and seed is reused.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import IO, Any

from harness.pipeline import job, session, synthetic
from harness.pipeline.progress import Progress


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
          f"{'lines/s':>9}  recheck={not args.no_recheck}", flush=True)
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
        t0 = time.monotonic()
        result = job.analyze(spark, root, args.dir / f"out-{runs}",
                             recheck=not args.no_recheck, progress=Progress(quiet))
        took = time.monotonic() - t0
        lines = runs * args.lines
        print(f"{runs:>8} {lines:>11} {generated:>10.1f} {took:>9.1f} {runs / took:>8.1f} "
              f"{lines / took:>9.0f}  ({result.analyzed} analyzed, {len(result.skipped)} "
              "skipped)", flush=True)
        steps = ", ".join(f"{k} {v:.1f}" for k, v in result.timings.items())
        print(f"{'':>8} seconds per step: {steps}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
