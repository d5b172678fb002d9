"""Explicit Spark schemas of what the pipeline reads and builds.

Explicit, not inferred: inference would read every file twice and would guess a different type
for a field that is an integer in one run and a string in another (`process` is both).
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    LongType,
    StringType,
    StructField,
    StructType,
)

CORRUPT = "_corrupt"

# One line of history.jsonl. `value` is kept as raw JSON text: Spark's JSON reader stores an
# object in a string field verbatim, and the aggregates never look inside it.
HISTORY = StructType([
    StructField("index", LongType()),
    StructField("time", LongType()),
    StructField("process", StringType()),
    StructField("type", StringType()),
    StructField("f", StringType()),
    StructField("value", StringType()),
    StructField("node", StringType()),
    StructField("error", StringType()),
    StructField(CORRUPT, StringType()),
])

# One run, from its test.json and results.json, and the checkers' verdict when re-checked.
# Verdicts are the strings "true", "false", "unknown".
RUN = StructType([
    StructField("run_id", StringType(), False),
    StructField("path", StringType(), False),
    StructField("test_name", StringType()),
    StructField("start_time", StringType()),
    StructField("target", StringType()),
    StructField("workload", StringType()),
    StructField("nemesis", StringType()),
    StructField("seed", LongType()),
    StructField("stored_valid", StringType()),
    StructField("stored_anomalies", ArrayType(StringType())),
    StructField("valid", StringType()),
    StructField("anomalies", ArrayType(StringType())),
    StructField("problem", StringType()),
])
