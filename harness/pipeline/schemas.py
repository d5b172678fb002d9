"""The explicit Spark schema of what the pipeline builds: one row per run.

Explicit, not inferred: inference would look at the rows twice and could guess differently from
one batch of runs to the next. The history facts (history.Facts) are nested in the run's row, so
that the one Python task that reads a run hands Spark everything about it at once.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

# One run, from its test.json and results.json, the checkers' verdict when re-checked, and the
# facts of its history (null when the run has a `problem`). Verdicts are "true", "false",
# "unknown".
RUN = StructType([
    StructField("run_id", StringType(), False),
    StructField("path", StringType(), False),
    StructField("test_name", StringType()),
    StructField("start_time", StringType()),
    StructField("target", StringType()),
    StructField("workload", StringType()),
    StructField("nemesis", StringType()),
    StructField("requested", ArrayType(StringType())),  # the fault kinds test.json asks for
    StructField("seed", LongType()),
    StructField("stored_valid", StringType()),
    StructField("stored_anomalies", ArrayType(StringType())),
    StructField("valid", StringType()),
    StructField("anomalies", ArrayType(StringType())),
    StructField("problem", StringType()),
    StructField("lines", LongType()),  # non-blank lines of history.jsonl
    StructField("duration_s", DoubleType()),  # first line to last
    StructField("ops", LongType()),  # client operations (completions paired with an invoke)
    StructField("ok_ops", LongType()),
    StructField("fault_ops", LongType()),  # invoked while some fault window was open
    StructField("fault_ok_ops", LongType()),
    # per f: the latencies (ms) of its ok operations
    StructField("latencies", ArrayType(StructType([
        StructField("f", StringType()), StructField("ms", ArrayType(DoubleType()))]))),
    # per fault kind: operations invoked while it was open, and how many of them were ok
    StructField("faults", ArrayType(StructType([
        StructField("fault", StringType()), StructField("ops", LongType()),
        StructField("ok", LongType())]))),
    # per fault event: time to the next ok completion (null: none came)
    StructField("recoveries", ArrayType(StructType([
        StructField("fault", StringType()), StructField("event", StringType()),
        StructField("ms", DoubleType())]))),
    # per fault kind started: starts that took effect, and starts attempted
    StructField("starts", ArrayType(StructType([
        StructField("fault", StringType()), StructField("done", LongType()),
        StructField("attempted", LongType())]))),
    # KIP-853, from the verdict's `membership` checker (null: the run changed no voters):
    # voter changes committed, and how many of them removed the leader that appended them
    StructField("voter_changes", LongType()),
    StructField("leader_removals", LongType()),
])
