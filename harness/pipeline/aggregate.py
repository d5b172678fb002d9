"""The tables of an analysis, per target x workload x nemesis (GROUP), from the loaded frames.

All of them are small (one row per group, or per group and operation, fault or anomaly kind), so
the caller may collect them. Figures are rounded to 6 decimals, so that the same runs give the
same tables whatever order a cluster happened to add them up in.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

GROUP = ["target", "workload", "nemesis"]
QUANTILES = (0.5, 0.95, 0.99)
DIGITS = 6


def _r(column: Column) -> Column:
    return F.round(column, DIGITS)


def _share(part: Column, whole: Column) -> Column:
    return _r(F.when(whole > 0, part / whole))


def runs(all_runs: DataFrame) -> DataFrame:
    """One row per run found, analyzed or not (`problem` says why not)."""
    return all_runs.select(
        "run_id", "test_name", "start_time", *GROUP, "seed", "valid", "stored_valid",
        "anomalies", "stored_anomalies", "lines", _r(F.col("duration_s")).alias("duration_s"),
        "problem", "path").orderBy("run_id")


def summary(good: DataFrame, ops: DataFrame, fault_ops: DataFrame) -> DataFrame:
    """Per group: runs, verdicts, throughput and availability during faults."""
    verdicts = good.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("runs"),
        F.sum((F.col("valid") == "true").cast("long")).alias("valid"),
        F.sum((F.col("valid") == "false").cast("long")).alias("invalid"),
        F.sum((F.col("valid") == "unknown").cast("long")).alias("unknown"),
        F.sum((F.col("valid") != F.col("stored_valid")).cast("long")).alias("verdict_changed"),
        F.sum("duration_s").alias("duration_s"),
    )
    counts = ops.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("ops"),
        F.sum((F.col("type") == "ok").cast("long")).alias("ok_ops"),
    )
    faulty = fault_ops.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("fault_ops"),
        F.sum((F.col("type") == "ok").cast("long")).alias("fault_ok_ops"),
    )
    table = verdicts.join(counts, GROUP, "left").join(faulty, GROUP, "left").na.fill(
        0, ["ops", "ok_ops", "fault_ops", "fault_ok_ops"])
    return table.select(
        *GROUP, "runs", "valid", "invalid", "unknown",
        _share(F.col("valid"), F.col("runs")).alias("valid_share"), "verdict_changed",
        "ops", "ok_ops", _r(F.col("duration_s")).alias("duration_s"),
        _share(F.col("ok_ops"), F.col("duration_s")).alias("throughput_ok_per_s"),
        "fault_ops", "fault_ok_ops",
        _share(F.col("fault_ok_ops"), F.col("fault_ops")).alias("availability_during_faults"),
    ).orderBy(*GROUP)


def latency(ops: DataFrame) -> DataFrame:
    """Per group and operation: latency quantiles of the `ok` completions, in milliseconds.

    Exact quantiles, interpolated linearly between ranks (as pandas' `quantile` does).
    """
    q = F.percentile(F.col("latency_ms"), F.array(*[F.lit(x) for x in QUANTILES]))
    per = ops.where(F.col("type") == "ok").groupBy(*GROUP, "f").agg(
        F.count(F.lit(1)).alias("ok_ops"), q.alias("q"), F.avg("latency_ms").alias("mean"))
    names = [f"p{round(x * 100)}_ms" for x in QUANTILES]
    return per.select(*GROUP, "f", "ok_ops", *[_r(F.col("q")[i]).alias(n)
                                               for i, n in enumerate(names)],
                      _r(F.col("mean")).alias("mean_ms")).orderBy(*GROUP, "f")


def anomalies(good: DataFrame) -> DataFrame:
    """Per group and anomaly kind: how many runs showed it."""
    kinds = good.select(*GROUP, F.explode("anomalies").alias("anomaly"))
    return kinds.groupBy(*GROUP, "anomaly").agg(F.count(F.lit(1)).alias("runs")).orderBy(
        *GROUP, "anomaly")


def availability(fault_ops_by_kind: DataFrame) -> DataFrame:
    """Per group and fault kind: share of ok among operations invoked while that fault was open."""
    per = fault_ops_by_kind.groupBy(*GROUP, "fault").agg(
        F.count(F.lit(1)).alias("ops"), F.sum((F.col("type") == "ok").cast("long")).alias("ok"))
    return per.select(*GROUP, "fault", "ops", "ok",
                      _share(F.col("ok"), F.col("ops")).alias("availability")).orderBy(
        *GROUP, "fault")


def recovery(recoveries: DataFrame) -> DataFrame:
    """Per group, fault kind and event (start/stop): time to the next ok operation, in ms."""
    q = F.percentile(F.col("recovery_ms"), F.array(*[F.lit(x) for x in QUANTILES]))
    per = recoveries.groupBy(*GROUP, "fault", "event").agg(
        F.count(F.lit(1)).alias("events"), F.count("recovery_ms").alias("recovered"),
        q.alias("q"), F.avg("recovery_ms").alias("mean"), F.max("recovery_ms").alias("max"))
    return per.select(*GROUP, "fault", "event", "events", "recovered",
                      *[_r(F.col("q")[i]).alias(f"p{round(x * 100)}_ms")
                        for i, x in enumerate(QUANTILES)],
                      _r(F.col("mean")).alias("mean_ms"), _r(F.col("max")).alias("max_ms"),
                      ).orderBy(*GROUP, "fault", F.desc("event"))
