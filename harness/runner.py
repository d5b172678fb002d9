"""One test run, as nested scopes that always clean up (Jepsen's `jepsen.core/run!`).

    store      results/<name>/<start>/ with test.json, results/latest
    backend    hosts for the nodes (setup ... teardown, always)
    db         the target's nodes (setup ... teardown, then collect every node's files)
    run        the workload's generator on client processes, the nemesis schedule beside it,
               until the time limit
    final      stop and heal every fault, wait for the cluster to recover, read from every node
    check      the workload's checkers on the history -> results.json; plots; the summary

A failure of the infrastructure (a node that will not start, a backend error) ends the run with
exit code 3, after the same cleanup; so does Ctrl-C. What was recorded stays in the store.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import queue
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from contracts.backend import Backend, ClusterSpec
from contracts.generator import Stagger, TimeLimit
from contracts.history import History, Op
from contracts.results import HISTORY, NODES, RESULTS, TEST, node_dirs
from contracts.target import DB, Client, HasLeader, Target
from contracts.workload import Workload
from harness import store
from harness.config import TestConfig
from harness.interpreter import Interpreter, Worker, perform
from harness.progress import Progress
from harness.summary import render
from nemesis.base import Env
from nemesis.registry import build
from nemesis.schedule import Schedule

EXIT = {True: 0, False: 1, "unknown": 2}
EXIT_FAILED = 3

# One line per phase on stderr, read by the campaign suite to open an Allure step per phase.
PHASES = ("deploy", "run", "heal", "check")


def announce(out: TextIO, phase: str) -> None:
    print(f"[kraft] phase: {phase}", file=out, flush=True)


@dataclass
class Outcome:
    run_dir: Path
    results: dict[str, Any]
    exit_code: int
    summary: str


class RunFailed(RuntimeError):
    pass


def versions() -> dict[str, str]:
    from importlib import metadata
    found = {"python": sys.version.split()[0]}
    for dist in ("kraft-jepsen", "kio"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[dist] = metadata.version(dist)
    return found


def run(config: TestConfig, backend: Backend, target: Target, workload: Workload,
        out: TextIO = sys.stderr) -> Outcome:
    start = dt.datetime.now()
    run_dir = store.create_run_dir(Path(config.results_dir), config.test_name, start)
    test = {**config.to_json(), "start_time": start.isoformat(), "backend": backend.name,
            "versions": versions(), "run_dir": str(run_dir)}
    store.write_json(run_dir / TEST, test)
    history = History(run_dir / HISTORY)
    error: str | None = None

    def log(message: str) -> None:
        with open(run_dir / "harness.log", "a") as harness_log:
            harness_log.write(f"{time.strftime('%H:%M:%S')} {message}\n")

    try:
        _deploy_and_run(config, backend, target, workload, history, run_dir, log, out)
    except KeyboardInterrupt:
        error = "interrupted"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log(traceback.format_exc())
    finally:
        history.close()
    ops = history.ops()
    announce(out, "check")
    if error is not None:
        results: dict[str, Any] = {"valid": "unknown", "error": error, "checkers": {}}
    else:
        results = workload.checker(ops, test, node_dirs(run_dir))
    store.write_json(run_dir / RESULTS, results)
    _plots(ops, run_dir, results, log)
    summary = render(results, ops, run_dir)
    code = EXIT_FAILED if error is not None else EXIT.get(results.get("valid"), 2)
    return Outcome(run_dir, results, code, summary)


def _plots(ops: list[Op], run_dir: Path, results: dict[str, Any],
           log: Callable[[str], None]) -> None:
    try:
        # here, not at the top: matplotlib is slow to import, and a run without it still stands
        from checkers import perf
    except ImportError:
        return
    try:
        anomalies = results.get("anomalies")
        perf.render(ops, run_dir, anomalies if isinstance(anomalies, dict) else None)
    except Exception:
        log("plots failed:\n" + traceback.format_exc())


def _deploy_and_run(config: TestConfig, backend: Backend, target: Target, workload: Workload,
                    history: History, run_dir: Path, log: Callable[[str], None],
                    out: TextIO) -> None:
    spec = ClusterSpec(run_id=f"{config.test_name[:40]}-{uuid.uuid4().hex[:8]}",
                       nodes=config.nodes, ports=target.ports, run_dir=run_dir)
    db = target.db()
    try:
        announce(out, "deploy")
        log(f"backend {backend.name}: setup")
        backend.setup(spec)
        try:
            log("db: setup")
            db.setup(backend, config.nodes, config.node_config)
            _wait_for_leader(db, backend, config.nodes, config.recovery_time, log)
            _run_workload(config, backend, target, db, workload, history, log, out)
        finally:
            _teardown_db(db, backend, config.nodes, run_dir, log)
    finally:
        log(f"backend {backend.name}: teardown")
        backend.teardown()


def _teardown_db(db: DB, backend: Backend, nodes: list[str], run_dir: Path,
                 log: Callable[[str], None]) -> None:
    try:
        db.teardown(backend, nodes)
    except Exception:
        log("db teardown failed:\n" + traceback.format_exc())
    for node in nodes:
        try:
            db.collect(backend, node, run_dir / NODES / node)
        except Exception:
            log(f"collect {node} failed:\n" + traceback.format_exc())


def _wait_for_leader(db: DB, backend: Backend, nodes: list[str], patience: float,
                     log: Callable[[str], None]) -> None:
    if not isinstance(db, HasLeader):
        return
    env = Env(backend, db, nodes)
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        leader = env.leader()
        if leader is not None:
            log(f"leader: {leader}")
            return
        time.sleep(0.2)
    log(f"no leader after {patience}s")


def _run_workload(config: TestConfig, backend: Backend, target: Target, db: DB,
                  workload: Workload, history: History, log: Callable[[str], None],
                  out: TextIO) -> None:
    seeds = config.seeds()
    env = Env(backend, db, config.nodes)
    schedule = Schedule(build(config.nemesis, env, config.partition_shapes),
                        config.nemesis_interval, seeds["nemesis"], history, log)
    completions: queue.Queue[tuple[Worker, Op]] = queue.Queue()

    def make_client(node: str) -> Callable[[], Client]:
        def open_client() -> Client:
            client = target.client()
            client.open(backend, config.nodes, node)
            return client
        return open_client

    workers = [Worker(slot, config.concurrency, make_client(config.nodes[slot % len(config.nodes)]),
                      config.nodes[slot % len(config.nodes)], history, completions,
                      config.op_timeout)
               for slot in range(config.concurrency)]
    interpreter = Interpreter(history, workers)
    gen = TimeLimit(Stagger(workload.generator(seeds["generator"]),
                            int(1e9 / config.rate), seeds["generator"] ^ 1),
                    int(config.time_limit * 1e9))
    started = time.monotonic()

    def status() -> str:
        elapsed = time.monotonic() - started
        active = dict(schedule.active)
        fault = ", ".join(f"{kind}({choice.get('shape') or choice.get('target')})"
                          for kind, choice in active.items()) or "none"
        fault += f"; {schedule.started} started"
        return (f"[{elapsed:5.0f}s] ops {interpreter.done} done, {interpreter.in_flight} in "
                f"flight | faults: {fault} | {max(0.0, config.time_limit - elapsed):.0f}s left")

    announce(out, "run")
    progress = Progress(status, out)
    history.start_clock()
    progress.start()
    schedule.start()
    try:
        interpreter.run(gen, drain_timeout=config.op_timeout + 5)
    finally:
        interpreter.stopping.set()
        schedule.stop()
        progress.stop()
        announce(out, "heal")
        schedule.heal_all()
    log("healed; waiting for recovery")
    _wait_for_leader(db, backend, config.nodes, config.recovery_time, log)
    _final_reads(config, workload, history, make_client, interpreter.next_process(), log)


def _final_reads(config: TestConfig, workload: Workload, history: History,
                 make_client: Callable[[str], Callable[[], Client]], process: int,
                 log: Callable[[str], None]) -> None:
    """One read from every node, retried (each try in the history) until it succeeds or the
    recovery time runs out."""
    deadline = time.monotonic() + config.recovery_time
    for node in config.nodes:
        open_client = make_client(node)
        client: Client | None = None

        def client_for(open_client: Callable[[], Client] = open_client) -> Client:
            nonlocal client
            if client is None:
                client = open_client()
            return client
        while True:
            invoke = history.record({**workload.final_op(), "process": process})
            done = history.record(perform(invoke, client_for, config.op_timeout))
            if done["type"] == "info":
                process += 1
                if client is not None:
                    _close(client)
                    client = None
            if done["type"] == "ok" or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if client is not None:
            _close(client)
        log(f"final read on {node}: {done['type']} {json.dumps(done.get('error'))}")
        process += 1


def _close(client: Client) -> None:
    with contextlib.suppress(Exception):
        client.close()
