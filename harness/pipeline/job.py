"""One analysis: discover the runs, load and re-check them on Spark, aggregate, write the tables."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.pipeline import aggregate, discover, runinfo
from harness.pipeline import history as hist
from harness.pipeline.progress import Progress

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

CSV_LIST_SEPARATOR = ";"


@dataclass
class Analysis:
    """What an analysis found and where it wrote it."""

    out: Path
    found: int
    analyzed: int
    skipped: list[tuple[str, str]]  # (run_id, problem)
    seconds: float
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def _partitions(spark: SparkSession, runs: int, wanted: int | None) -> int:
    if wanted:
        return max(1, wanted)
    # A few hundred runs per task keeps the per-task overhead small; at least two tasks per core
    # keeps the cores busy while one task is slow (a long history to check).
    parallelism = spark.sparkContext.defaultParallelism
    return max(1, min(runs, max(2 * parallelism, math.ceil(runs / 250))))


def _load_runs(spark: SparkSession, refs: list[discover.RunRef], recheck: bool,
               partitions: int) -> DataFrame:
    from harness.pipeline import schemas

    readable = [(r.run_id, r.path) for r in refs if not r.problem]
    missing = [(r.run_id, r.path, *([None] * 10), r.problem) for r in refs if r.problem]
    rdd = spark.sparkContext.parallelize(readable, max(1, min(partitions, len(readable))))
    checked = spark.createDataFrame(
        rdd.mapPartitions(lambda part: runinfo.run_tuples(part, recheck)), schemas.RUN)
    return checked.unionByName(spark.createDataFrame(missing, schemas.RUN))


def _frames(spark: SparkSession, refs: list[discover.RunRef], recheck: bool,
            partitions: int) -> dict[str, DataFrame]:
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    meta = _load_runs(spark, refs, recheck, partitions)
    lines = hist.read(spark, [r.path for r in refs if not r.problem]).persist(
        StorageLevel.MEMORY_AND_DISK)
    spans = hist.problems(lines).persist()
    runs = (meta.join(spans.withColumnRenamed("problem", "history_problem"), "run_id", "left")
            .withColumn("problem", F.coalesce(
                "problem", "history_problem",
                F.when(F.col("lines").isNull(), F.lit("history.jsonl is empty"))))
            .drop("history_problem").persist())
    good = runs.where(F.col("problem").isNull())
    keys = F.broadcast(good.select("run_id", *aggregate.GROUP))
    ops = hist.client_ops(lines).join(keys, "run_id").persist(StorageLevel.MEMORY_AND_DISK)
    events = hist.fault_events(lines).join(keys, "run_id")
    windows = hist.fault_windows(events, spans).persist()
    fault_ops = hist.in_fault_ops(ops, windows)
    by_kind = ops.alias("o").join(
        F.broadcast(windows.alias("w")),
        (F.col("o.run_id") == F.col("w.run_id")) & (F.col("o.invoke_time") >= F.col("w.start"))
        & (F.col("o.invoke_time") < F.col("w.stop"))).select("o.*", "w.fault")
    recoveries = hist.recoveries(ops, events).join(keys, "run_id")
    return {
        "summary": aggregate.summary(good, ops, fault_ops),
        "latency": aggregate.latency(ops),
        "anomalies": aggregate.anomalies(good),
        "availability": aggregate.availability(by_kind),
        "recovery": aggregate.recovery(recoveries),
        "runs": aggregate.runs(runs),
    }


def _write(name: str, frame: DataFrame, out: Path) -> pd.DataFrame:
    frame = frame.persist()
    frame.coalesce(1).write.mode("overwrite").parquet(str(out / f"{name}.parquet"))
    table: pd.DataFrame = frame.toPandas()
    frame.unpersist()
    flat = table.copy()
    for column in flat.columns:
        if flat[column].map(lambda v: isinstance(v, list | tuple)).any():
            flat[column] = flat[column].map(
                lambda v: CSV_LIST_SEPARATOR.join(v) if isinstance(v, list | tuple) else v)
    flat.to_csv(out / f"{name}.csv", index=False)
    return table


def analyze(spark: SparkSession, results_dir: Path | str, out: Path | str, recheck: bool = True,
            partitions: int | None = None, progress: Progress | None = None) -> Analysis:
    """Analyze every run under `results_dir` into `out` (tables, summary page).

    Raises FileNotFoundError/NotADirectoryError for a bad `results_dir`, ImportError when
    `recheck` is asked and the checkers cannot be imported; Spark's own errors pass through.
    """
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
    frames = _frames(spark, refs, recheck, _partitions(spark, len(refs), partitions))
    tables: dict[str, Any] = {}
    for name in ("runs", "summary", "latency", "anomalies", "availability", "recovery"):
        progress.step(f"computing {name}")
        tables[name] = _write(name, frames[name], out)
    runs = tables["runs"]
    bad = runs[runs["problem"].notna()]
    skipped = list(zip(bad["run_id"], bad["problem"], strict=True))
    bad[["run_id", "problem", "path"]].to_csv(out / "skipped.csv", index=False)
    analysis = Analysis(out, len(refs), len(refs) - len(skipped), skipped,
                        time.monotonic() - started, tables)
    progress.step("writing the summary page")
    report.write(analysis, recheck)
    analysis.seconds = time.monotonic() - started
    return analysis
