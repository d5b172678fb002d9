"""The results pipeline: `kraft analyze` over the many runs of a campaign, on Spark.

Theory of operation. A campaign leaves runs in the results layout of ARCHITECTURE.md. The pipeline
answers two questions over all of them: how does each target fare under each fault, and do the
stored verdicts still hold. It runs on Spark through PySpark, in local mode by default and
unchanged on a cluster whose executors see the same files.

1. `discover` lists the runs on the driver (`<results>/<test>/<timestamp>/`, links skipped) and
   notes the ones missing a file.
2. `runinfo` runs inside Spark tasks, one partition of runs each: it reads test.json and
   results.json, and re-checks the run with `checkers.check_run`, the code behind `kraft check`.
   A run that cannot be read is not an error: it comes back with a `problem`.
3. `history` reads every history.jsonl with Spark's JSON reader and an explicit schema (`schemas`),
   flags runs with corrupt lines, and derives per-operation facts: latency, whether a fault window
   was open, time to recover after each fault event.
4. `aggregate` groups by target x workload x nemesis; `job` writes each table as Parquet and CSV,
   and `report` a one-page summary.html with PNG charts.

`session` starts Spark with its log sent to `<out>/spark.log`, `progress` shows one line instead;
`synthetic` writes simulated runs for the tests and the bench.
"""
