"""The tables of an analysis, per target x workload x nemesis (GROUP), from the frame of runs.

`good` is the runs without a problem (schemas.RUN, one row each, history facts nested): every
table is one aggregation over it, no join; only latency and recovery quantiles unnest values.

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


def _ordered(frame: DataFrame, *keys: str | Column) -> DataFrame:
    """`frame` in one partition, sorted: the global order of orderBy, without its range
    partitioning (a sampling job and a shuffle); the tables are small."""
    return frame.coalesce(1).sortWithinPartitions(*keys)


def _r(column: Column) -> Column:
    return F.round(column, DIGITS)


def _share(part: Column, whole: Column) -> Column:
    return _r(F.when(whole > 0, part / whole))


def _count(starts: Column, kind: Column, of: str) -> Column:
    return F.aggregate(F.filter(starts, lambda s: s["fault"] == kind), F.lit(0).cast("long"),
                       lambda total, s: total + s[of])


def faults_took_effect(requested: Column, starts: Column) -> Column:
    """`kill, pause / kill 4 of 5, pause 0 of 3`: the kinds `requested`, then per kind (those
    requested, then any other started, sorted) the `starts` done of those attempted, summed over
    the array; `none` for no faults at all; null when `starts` is (the history was not read).
    `kraft compare` writes the same text (harness/compare_report.py `faults_text`)."""
    kinds = F.array_union(requested, F.array_sort(F.array_distinct(
        F.transform(starts, lambda s: s["fault"]))))
    effect = F.array_join(F.transform(kinds, lambda kind: F.concat(
        kind, F.lit(" "), _count(starts, kind, "done").cast("string"), F.lit(" of "),
        _count(starts, kind, "attempted").cast("string"))), ", ")
    asked = F.when(F.size(requested) > 0, F.array_join(requested, ", ")).otherwise("none")
    return (F.when(starts.isNull(), F.lit(None).cast("string"))
            .when(F.size(kinds) == 0, "none")
            .otherwise(F.concat(asked, F.lit(" / "), effect)))


FAULTS = "faults_requested_took_effect"


def runs(all_runs: DataFrame) -> DataFrame:
    """One row per run found, analyzed or not (`problem` says why not)."""
    requested = F.coalesce(F.col("requested"), F.array().cast("array<string>"))
    return _ordered(all_runs.select(
        "run_id", "test_name", "start_time", *GROUP, "seed", "valid", "stored_valid",
        "anomalies", "stored_anomalies", "lines", _r(F.col("duration_s")).alias("duration_s"),
        faults_took_effect(requested, F.col("starts")).alias(FAULTS), "problem", "path"),
        "run_id")


def summary(good: DataFrame) -> DataFrame:
    """Per group: runs, verdicts, throughput and availability during faults."""
    table = good.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("runs"),
        F.sum((F.col("valid") == "true").cast("long")).alias("valid"),
        F.sum((F.col("valid") == "false").cast("long")).alias("invalid"),
        F.sum((F.col("valid") == "unknown").cast("long")).alias("unknown"),
        F.sum((F.col("valid") != F.col("stored_valid")).cast("long")).alias("verdict_changed"),
        F.sum("duration_s").alias("duration_s"),
        *[F.sum(c).alias(c) for c in ("ops", "ok_ops", "fault_ops", "fault_ok_ops")],
        # the group's nemesis is its runs' requested kinds joined: they are the same for all
        F.array_distinct(F.flatten(F.collect_list("requested"))).alias("requested"),
        F.flatten(F.collect_list("starts")).alias("starts"),
    )
    return _ordered(table.select(
        *GROUP, "runs", "valid", "invalid", "unknown",
        _share(F.col("valid"), F.col("runs")).alias("valid_share"), "verdict_changed",
        "ops", "ok_ops", _r(F.col("duration_s")).alias("duration_s"),
        _share(F.col("ok_ops"), F.col("duration_s")).alias("throughput_ok_per_s"),
        "fault_ops", "fault_ok_ops",
        _share(F.col("fault_ok_ops"), F.col("fault_ops")).alias("availability_during_faults"),
        faults_took_effect(F.col("requested"), F.col("starts")).alias(FAULTS),
    ), *GROUP)


def _quantile(values: Column, q: float) -> Column:
    """The q-quantile of a sorted array, interpolated linearly between ranks: Spark's
    `percentile` (and pandas' `quantile`), computed the way `percentile` computes it."""
    n = F.size(values)
    pos = (n - 1) * F.lit(q)
    lo, hi = F.floor(pos), F.ceil(pos)
    at_lo = F.element_at(values, (lo + 1).cast("int"))
    at_hi = F.element_at(values, (hi + 1).cast("int"))
    return F.when(n <= 0, F.lit(None).cast("double")).when(lo == hi, at_lo).otherwise(
        (hi - pos) * at_lo + (pos - lo) * at_hi)


def _quantiles(values: Column) -> list[Column]:
    """p50/p95/p99 and the mean of an array of sorted values (null when it is empty).

    Exact quantiles from the sorted values of a whole group: Spark's `percentile` over the same
    values, unnested one row each, costs several times more (a hash map of boxed doubles).
    """
    n = F.size(values)
    total = F.aggregate(values, F.lit(0.0), lambda acc, x: acc + x)
    return [*[_r(_quantile(values, x)).alias(f"p{round(x * 100)}_ms") for x in QUANTILES],
            _r(F.when(n > 0, total / n)).alias("mean_ms")]


def latency(good: DataFrame) -> DataFrame:
    """Per group and operation: latency quantiles of the `ok` completions, in milliseconds.

    Exact quantiles, interpolated linearly between ranks (as pandas' `quantile` does).
    """
    per_f = good.select(*GROUP, F.explode("latencies").alias("l"))
    per = per_f.groupBy(*GROUP, F.col("l.f").alias("f")).agg(
        F.array_sort(F.flatten(F.collect_list("l.ms"))).alias("ms"))
    return _ordered(per.select(*GROUP, "f", F.size("ms").alias("ok_ops"),
                               *_quantiles(F.col("ms"))), *GROUP, "f")


def anomalies(good: DataFrame) -> DataFrame:
    """Per group and anomaly kind: how many runs showed it."""
    kinds = good.select(*GROUP, F.explode("anomalies").alias("anomaly"))
    return _ordered(kinds.groupBy(*GROUP, "anomaly").agg(F.count(F.lit(1)).alias("runs")),
                    *GROUP, "anomaly")


def availability(good: DataFrame) -> DataFrame:
    """Per group and fault kind: share of ok among operations invoked while that fault was open."""
    kinds = good.select(*GROUP, F.explode("faults").alias("k"))
    per = kinds.groupBy(*GROUP, F.col("k.fault").alias("fault")).agg(
        F.sum("k.ops").alias("ops"), F.sum("k.ok").alias("ok"))
    return _ordered(per.select(*GROUP, "fault", "ops", "ok",
                               _share(F.col("ok"), F.col("ops")).alias("availability")),
                    *GROUP, "fault")


def membership(good: DataFrame) -> DataFrame:
    """Per group of runs that changed voters (KIP-853): voter changes committed and leader
    removals, in all and per run."""
    judged = good.where(F.col("voter_changes").isNotNull())
    per = judged.groupBy(*GROUP).agg(
        F.count(F.lit(1)).alias("runs"),
        F.sum("voter_changes").alias("voter_changes"),
        F.sum(F.coalesce(F.col("leader_removals"), F.lit(0))).alias("leader_removals"),
        F.sum((F.col("leader_removals") > 0).cast("long")).alias("runs_removing_leader"))
    return _ordered(per.select(
        *GROUP, "runs", "voter_changes", "leader_removals", "runs_removing_leader",
        _share(F.col("voter_changes"), F.col("runs")).alias("voter_changes_per_run")), *GROUP)


def recovery(good: DataFrame) -> DataFrame:
    """Per group, fault kind and event (start/stop): time to the next ok operation, in ms."""
    events = good.select(*GROUP, F.explode("recoveries").alias("e")).select(
        *GROUP, "e.fault", "e.event", F.col("e.ms").alias("recovery_ms"))
    per = events.groupBy(*GROUP, "fault", "event").agg(
        F.count(F.lit(1)).alias("events"),
        F.array_sort(F.collect_list("recovery_ms")).alias("ms"),  # without the nulls
        F.max("recovery_ms").alias("max"))
    return _ordered(per.select(*GROUP, "fault", "event", "events",
                               F.size("ms").alias("recovered"), *_quantiles(F.col("ms")),
                               _r(F.col("max")).alias("max_ms")),
                    *GROUP, "fault", F.desc("event"))
