"""The results pipeline: `kraft analyze` over the many runs of a campaign, on Spark.

Theory of operation. A campaign leaves runs in the results layout of docs/architecture.md. The
pipeline answers two questions over all of them: how does each target fare under each fault, and do
the stored verdicts still hold. It runs on Spark through PySpark, in local mode by default and
unchanged on a cluster whose executors see the same files.

`discover` lists the runs on the driver; `runinfo`, inside Spark tasks, does all the per-run work
in one pass that reads each file once (the history with `kraft check`'s reader, the re-check with
the code behind it, and `history`'s per-run facts): one row per run, cached, the only Python work.
A run that cannot be read is not an error: it comes back with a `problem`. `aggregate` groups that
frame by target x workload x nemesis, one aggregation per table with no join; `job` writes the
tables as Parquet and CSV, and `report` a one-page summary.html.

Details (the three steps, the cost, the Spark session, the simulated runs):
docs/internals/harness.md#pipeline
"""
