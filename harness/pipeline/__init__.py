"""The results pipeline: `kraft analyze` over the many runs of a campaign, on Spark.

Theory of operation. A campaign leaves runs in the results layout of docs/architecture.md. The
pipeline answers two questions over all of them: how does each target fare under each fault, and do
the stored verdicts still hold. It runs on Spark through PySpark, in local mode by default and
unchanged on a cluster whose executors see the same files.

1. `discover` lists the runs on the driver (`<results>/<test>/<timestamp>/`, links skipped) and
   notes the ones missing a file.
2. `runinfo` runs inside Spark tasks, one partition of runs each, and does all the per-run work in
   one pass that reads each file once: test.json and results.json, the history with the reader
   and validator of `kraft check` (`checkers.history`), the re-check with the code behind it
   (`workloads.check_run`), and `history`'s per-run facts: client operations and their latencies,
   operations during faults (the fault windows of `checkers.faults`, as `kraft check` draws
   them), time to recover after each fault event, and, for a run that changed voters, the voter
   changes committed and leader removals its `membership` checker counted. A run that cannot be read is not an error: it
   comes back with a `problem`, the reason `kraft check` would give. The result is one row per run
   (`schemas.RUN`, facts nested), cached: the only Python work, and the only pass over the files.
3. `aggregate` groups that frame by target x workload x nemesis, one aggregation per table with no
   join (exact quantiles from each group's sorted values); `job` computes the tables side by side,
   writes each as Parquet and CSV, and `report` a one-page summary.html with PNG charts.

Cost (bench/bench_pipeline.py, local[2]): about 8 ms of Python per run of 1,000 lines, most of it
the checkers; the rest is a fixed few seconds of Spark jobs for the tables.

`session` starts Spark with its log sent to `<out>/spark.log`, `progress` shows one line instead.
The simulated runs of the tests and the bench come from `testkit.synthetic`, which executors
never need.
"""
