"""Histories as Spark DataFrames: parsing in the JVM, then the per-operation facts aggregates need.

Every history.jsonl is read by Spark's JSON reader with an explicit schema (schemas.HISTORY); a
line that is not JSON, or lacks one of index/time/process/type/f, marks its run corrupt. The
run of a line comes from its file's path.

Definitions (the summary page repeats them):
- a client operation is a completion (`ok`, `fail`, `info`) of a non-nemesis process; its latency
  is the time from the invoke just before it, of the same process.
- a fault event is a nemesis completion whose `f` is `start-KIND` or `stop-KIND`; a fault window of
  KIND opens at a start and closes at the next stop of that KIND (or at the end of the history).
- an operation is during a fault when it was invoked while some window was open.
- the recovery after a fault event is the time to the next `ok` client completion.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from harness.pipeline import schemas

OP_TYPES = ("invoke", "ok", "fail", "info")
REQUIRED = ("index", "time", "process", "type", "f")
GLOB = str.maketrans({c: "\\" + c for c in "\\[]{}*?"})


def _run_id(file_uri: Column) -> Column:
    # The path comes back URI-encoded ("%20" for a space) with "+" left as is; url_decode would
    # read "+" as a space, so it is escaped first.
    tail = F.regexp_extract(file_uri, r"([^/]+/[^/]+)/history\.jsonl$", 1)
    return F.url_decode(F.replace(tail, F.lit("+"), F.lit("%2B")))


def read(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The lines of the given runs' histories, with `run_id` and a `bad` flag per line."""
    files = [f"{p.translate(GLOB)}/history.jsonl" for p in paths]
    if files:
        lines = (spark.read.schema(schemas.HISTORY)
                 .option("mode", "PERMISSIVE")
                 .option("columnNameOfCorruptRecord", schemas.CORRUPT)
                 .json(files))
    else:  # the reader refuses an empty list of paths
        lines = spark.createDataFrame([], schemas.HISTORY)
    bad = F.col(schemas.CORRUPT).isNotNull() | ~F.col("type").isin(*OP_TYPES)
    for name in REQUIRED:
        bad = bad | F.col(name).isNull()
    return lines.select(_run_id(F.input_file_name()).alias("run_id"), "index", "time", "process",
                        "type", "f", F.coalesce(bad, F.lit(True)).alias("bad"))


def problems(lines: DataFrame) -> DataFrame:
    """(run_id, problem, lines, duration_s, end) per run: what is wrong with its history, if any.

    `end` is the time of its last line, `duration_s` the time from its first line to its last.
    """
    per_run = lines.groupBy("run_id").agg(
        F.count(F.lit(1)).alias("lines"),
        F.sum(F.col("bad").cast("long")).alias("bad_lines"),
        ((F.max("time") - F.min("time")) / 1e9).alias("duration_s"),
        F.max("time").alias("end"),
    )
    problem = F.when(
        F.col("bad_lines") > 0,
        F.format_string("history.jsonl: %d of %d lines are not operations (invalid JSON, "
                        "truncated, or missing index/time/process/type/f)",
                        "bad_lines", "lines"))
    return per_run.select("run_id", problem.alias("problem"), "lines", "duration_s", "end")


def client_ops(lines: DataFrame) -> DataFrame:
    """(run_id, f, type, latency_ms, invoke_time, time) for every client completion."""
    client = lines.where(F.col("process") != "nemesis")
    w = Window.partitionBy("run_id", "process").orderBy("index")
    paired = client.select(
        "run_id", "f", "type", "time",
        F.lag("type").over(w).alias("prev_type"), F.lag("time").over(w).alias("invoke_time"))
    done = paired.where((F.col("type") != "invoke") & (F.col("prev_type") == "invoke"))
    return done.select("run_id", "f", "type", "invoke_time", "time",
                       ((F.col("time") - F.col("invoke_time")) / 1e6).alias("latency_ms"))


def fault_events(lines: DataFrame) -> DataFrame:
    """(run_id, fault, event, time, index): nemesis completions that start or stop a fault."""
    nemesis = lines.where((F.col("process") == "nemesis") & F.col("type").isin("ok", "info"))
    parts = F.regexp_extract("f", r"^(start|stop)-(.+)$", 1), F.regexp_extract(
        "f", r"^(start|stop)-(.+)$", 2)
    return (nemesis.select("run_id", parts[1].alias("fault"), parts[0].alias("event"), "time",
                           "index")
            .where(F.col("event") != ""))


def fault_windows(events: DataFrame, spans: DataFrame) -> DataFrame:
    """(run_id, fault, start, stop): each start paired with the next stop of the same fault."""
    w = Window.partitionBy("run_id", "fault").orderBy("time", "index")
    nxt = events.select("run_id", "fault", "event", F.col("time").alias("start"),
                        F.lead("event").over(w).alias("next_event"),
                        F.lead("time").over(w).alias("next_time"))
    starts = nxt.where(F.col("event") == "start").join(
        spans.select("run_id", "end"), "run_id", "left")
    stop = F.when(F.col("next_event") == "stop", F.col("next_time")).otherwise(F.col("end"))
    return starts.select("run_id", "fault", "start", stop.alias("stop"))


def in_fault_ops(ops: DataFrame, windows: DataFrame) -> DataFrame:
    """The client operations invoked while some fault window was open (each once)."""
    o, w = ops.alias("o"), F.broadcast(windows.alias("w"))
    cond = ((F.col("o.run_id") == F.col("w.run_id")) & (F.col("o.invoke_time") >= F.col("w.start"))
            & (F.col("o.invoke_time") < F.col("w.stop")))
    return o.join(w, cond, "left_semi")


def recoveries(ops: DataFrame, events: DataFrame) -> DataFrame:
    """(run_id, fault, event, recovery_ms): time from each fault event to the next ok completion.

    `recovery_ms` is null when no operation succeeded after the event.
    """
    oks = ops.where(F.col("type") == "ok").select(
        "run_id", "time", F.lit(None).cast("long").alias("index"), F.lit(None).cast("string")
        .alias("fault"), F.lit(None).cast("string").alias("event"), F.col("time").alias("ok_time"))
    evs = events.select("run_id", "time", "index", "fault", "event",
                        F.lit(None).cast("long").alias("ok_time"))
    # Scanning backwards, the earliest ok seen so far is the next one after each row: a growing
    # frame, linear per run (a frame towards the end would be quadratic).
    w = (Window.partitionBy("run_id").orderBy(F.desc("time"), F.desc_nulls_last("index"))
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    both = oks.unionByName(evs).select("*", F.min("ok_time").over(w).alias("next_ok"))
    return both.where(F.col("event").isNotNull()).select(
        "run_id", "fault", "event", ((F.col("next_ok") - F.col("time")) / 1e6)
        .alias("recovery_ms"))
