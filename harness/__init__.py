"""The test harness: Jepsen's vocabulary, for Raft/KRaft clusters.

Theory of operation. A *test* (config.py) names a *backend* (backends/: where nodes run and how
links are cut), a *target* (targets/: the DB that deploys the implementation under test, and the
client of each workload that speaks to it), a *workload* (workloads/: its ops, a pure generator
of them and the checkers that judge them) and a *nemesis* (nemesis/: faults on a seeded
schedule).

The runner (runner.py) opens nested scopes that always close: results store, backend, DB. Inside,
the interpreter (interpreter.py) asks the generator (contracts/generator.py) for operations and
hands them to client *processes*, worker threads each holding one client; every invoke and
completion goes into the *history* (contracts/history.py) with a monotonic timestamp, beside the
nemesis's start and stop ops. After the time limit every fault is healed, the cluster is given
time to recover, and every node is read once more (`"final": true`). The history is checked,
stored with the nodes' files, and summarised (summary.py); `kraft test` (commands/test.py) maps the
verdict to its exit code.
"""
