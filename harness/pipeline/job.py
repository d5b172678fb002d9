"""One analysis: discover the runs, load and re-check them on Spark, aggregate, write the tables."""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from harness.pipeline import aggregate, discover, runinfo
from harness.pipeline.analysis import Analysis
from harness.pipeline.progress import Progress

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

CSV_LIST_SEPARATOR = ";"
TABLES = ("runs", "summary", "latency", "anomalies", "availability", "recovery", "membership")


def _partitions(spark: SparkSession, runs: int, wanted: int | None) -> int:
    if wanted:
        return max(1, wanted)
    # A hundred runs per task (a second or so of re-checking) keeps the per-task overhead small;
    # at least four tasks per core keeps the cores busy while one task is slow (long histories to
    # check, or a core taken by something else).
    parallelism = spark.sparkContext.defaultParallelism
    return max(1, min(runs, max(4 * parallelism, math.ceil(runs / 100))))


def _load_runs(spark: SparkSession, refs: list[discover.RunRef], recheck: bool,
               partitions: int) -> DataFrame:
    """One row per run (schemas.RUN), each made by one Python task reading the run's files once."""
    from harness.pipeline import schemas

    items = [(r.run_id, r.path, r.problem) for r in refs]
    rdd = spark.sparkContext.parallelize(items, max(1, min(partitions, len(items))))
    rows = rdd.mapPartitions(lambda part: runinfo.run_tuples(part, recheck))
    # The rows are built to the schema by run_tuple; checking each value again in Python would
    # cost as much as building it (a run holds a few thousand latencies).
    return spark.createDataFrame(rows, schemas.RUN, verifySchema=False)


def _frames(runs: DataFrame) -> dict[str, DataFrame]:
    from pyspark.sql import functions as F

    good = runs.where(F.col("problem").isNull())
    return {
        "runs": aggregate.runs(runs),
        "summary": aggregate.summary(good),
        "latency": aggregate.latency(good),
        "anomalies": aggregate.anomalies(good),
        "availability": aggregate.availability(good),
        "recovery": aggregate.recovery(good),
        "membership": aggregate.membership(good),
    }


def _collect(frame: DataFrame) -> tuple[DataFrame, pd.DataFrame]:
    """The table computed once: collected, and kept in Spark's cache for `_write`."""
    frame = frame.persist()
    table: pd.DataFrame = frame.toPandas()
    return frame, table


def _write(name: str, frame: DataFrame, table: pd.DataFrame, out: Path) -> None:
    frame.write.mode("overwrite").parquet(str(out / f"{name}.parquet"))
    frame.unpersist()
    flat = table.copy()
    for column in flat.columns:
        if flat[column].map(lambda v: isinstance(v, list | tuple)).any():
            flat[column] = flat[column].map(
                lambda v: CSV_LIST_SEPARATOR.join(v) if isinstance(v, list | tuple) else v)
    flat.to_csv(out / f"{name}.csv", index=False)


def analyze(spark: SparkSession, results_dir: Path | str, out: Path | str, recheck: bool = True,
            partitions: int | None = None, progress: Progress | None = None) -> Analysis:
    """Analyze every run under `results_dir` into `out` (tables, summary page).

    Raises FileNotFoundError/NotADirectoryError for a bad `results_dir`, ImportError when
    `recheck` is asked and the checkers cannot be imported; Spark's own errors pass through.
    """
    from pyspark import StorageLevel

    from harness.pipeline import report

    started = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress = progress or Progress()
    refs = discover.discover(results_dir)
    if recheck:
        runinfo.load_check_run()  # fail here, clearly, rather than in every task
    progress.follow(spark.sparkContext)
    progress.step(f"{len(refs)} runs found; loading and {'re-checking' if recheck else 'reading'}")
    timings: dict[str, float] = {"discover": time.monotonic() - started}

    # Every table is an aggregation of this frame: it is built once (the only Python work), kept,
    # and dropped at the end.
    runs = _load_runs(spark, refs, recheck, _partitions(spark, len(refs), partitions)).persist(
        StorageLevel.MEMORY_AND_DISK)
    # The tables are small jobs over the cached frame, each mostly waiting on Spark's scheduling
    # and on the Parquet committer: run side by side (Spark takes jobs from several threads), they
    # overlap those waits. The summary page is drawn while the Parquet files are written.
    with ThreadPoolExecutor(len(TABLES), thread_name_prefix="table") as pool:
        try:
            t0 = time.monotonic()
            runs.count()
            timings["load"] = time.monotonic() - t0
            progress.step("computing the tables")
            t0 = time.monotonic()
            frames = _frames(runs)
            collected = dict(zip(TABLES, pool.map(_collect, [frames[n] for n in TABLES]),
                                 strict=True))
            timings["tables"] = time.monotonic() - t0
            t0 = time.monotonic()
            writes = [pool.submit(_write, name, frame, table, out)
                      for name, (frame, table) in collected.items()]
            tables = {name: table for name, (_, table) in collected.items()}
            runs_table = tables["runs"]
            bad = runs_table[runs_table["problem"].notna()]
            skipped = list(zip(bad["run_id"], bad["problem"], strict=True))
            bad[["run_id", "problem", "path"]].to_csv(out / "skipped.csv", index=False)
            analysis = Analysis(out, len(refs), len(refs) - len(skipped), skipped,
                                time.monotonic() - started, tables, timings)
            progress.step("writing the tables and the summary page")
            report.write(analysis, recheck)
            for write in writes:
                write.result()
            timings["write"] = time.monotonic() - t0
        finally:
            runs.unpersist()
    analysis.seconds = time.monotonic() - started
    return analysis
