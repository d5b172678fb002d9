"""`kraft analyze RESULTS_DIR [--master URL] [--out DIR]`: the Spark pipeline over many runs.

Exit codes: 0 analyzed (whatever the verdicts), 64 bad usage or input (no such directory, no Java,
no PySpark, no checkers to re-check with), 3 Spark failed (its log is in the out directory).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

EXIT_OK, EXIT_SPARK, EXIT_USAGE = 0, 3, 64


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kraft analyze",
        description="Load every run under RESULTS_DIR into Spark, re-check the histories with "
                    "the checkers, and write aggregates per target x workload x nemesis "
                    "(Parquet, CSV and summary.html).")
    p.add_argument("results_dir", metavar="RESULTS_DIR", type=Path)
    p.add_argument("--master", default="local[*]",
                   help="Spark master URL (default local[*]; e.g. spark://HOST:7077). Runs and "
                        "OUT must be on a file system every executor sees at the same path.")
    p.add_argument("--out", type=Path, default=None,
                   help="where to write the analysis (default RESULTS_DIR/_analysis)")
    p.add_argument("--no-recheck", action="store_true",
                   help="use the verdicts stored in results.json instead of re-checking")
    p.add_argument("--partitions", type=int, default=None,
                   help="Spark tasks for reading and re-checking the runs (default: automatic)")
    p.add_argument("--driver-memory", default="2g",
                   help="memory of the driver JVM, which holds everything in local mode")
    return p


def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_USAGE
    if not args.results_dir.is_dir():
        print(f"kraft analyze: {args.results_dir} is not a directory; give the results "
              "directory of a campaign (e.g. results/)", file=sys.stderr)
        return EXIT_USAGE
    out: Path = args.out or args.results_dir / "_analysis"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"kraft analyze: cannot create the out directory {out}: {exc}; choose another "
              "with --out", file=sys.stderr)
        return EXIT_USAGE

    from harness.pipeline import runinfo, session

    try:
        session.check_environment()
        if not args.no_recheck:
            runinfo.load_check_run()
    except (session.EnvironmentProblem, ImportError) as exc:
        print(f"kraft analyze: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return _run(args, out)


def _run(args: argparse.Namespace, out: Path) -> int:
    from harness.pipeline import job, session
    from harness.pipeline.progress import Progress

    progress = Progress()
    progress.step(f"starting Spark on {args.master} (its log: {out / 'spark.log'})")
    spark = None
    try:
        spark = session.start(args.master, out, driver_memory=args.driver_memory)
        result = job.analyze(spark, args.results_dir, out, recheck=not args.no_recheck,
                             partitions=args.partitions, progress=progress)
    except (FileNotFoundError, NotADirectoryError) as exc:
        progress.done(f"failed: {exc}")
        return EXIT_USAGE
    except Exception as exc:
        with open(out / "spark.log", "a") as log:
            traceback.print_exc(file=log)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        progress.done(f"Spark failed: {first[:300]}\n  details: {out / 'spark.log'}")
        return EXIT_SPARK
    finally:
        if spark is not None:
            spark.stop()
    progress.done(f"{result.analyzed} of {result.found} runs analyzed in {result.seconds:.1f}s, "
                  f"{len(result.skipped)} skipped; see {out / 'summary.html'}")
    for run_id, problem in result.skipped[:20]:
        print(f"  skipped {run_id}: {problem}", file=sys.stderr)
    if len(result.skipped) > 20:
        print(f"  ... and {len(result.skipped) - 20} more in {out / 'skipped.csv'}",
              file=sys.stderr)
    return EXIT_OK
