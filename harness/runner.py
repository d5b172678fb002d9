"""One test run, as nested scopes that always clean up (Jepsen's `jepsen.core/run!`).

    store      results/<name>/<start>/ with test.json, results/latest
    backend    hosts for the nodes (setup ... teardown, always)
    db         the target's nodes (setup ... teardown, then collect every node's files); with
               brokers, the run starts once a leader is known and the brokers are unfenced
    run        the workload's generator on client processes, the nemesis schedule beside it,
               until the time limit; a liveness watch (harness/liveness.py) records every exit
               the harness did not cause, from deployment to teardown
    final      stop and heal every fault, start every node that is down again, wait for the
               cluster to recover, record which nodes run, read from every node (each node's
               final read answered by that node, or failed)
    check      the workload's checkers on the history -> results.json; plots; the summary

A failure of the infrastructure (a node that will not start, a backend error, a nemesis that
dies, a history that cannot be written) ends the run with exit code 3, after the same cleanup; so
does Ctrl-C. What was recorded stays in the store, and test.json's `outcome` (`running` until the
end, then `complete`, `interrupted` or `failed`, with `error`) tells a re-check that the history
is partial. The checkers still judge what was recorded, for the summary.
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
from contracts.target import (
    DB,
    CanChangeMembership,
    CanDeployBrokers,
    CanReplayRegistration,
    Client,
    HasDataDir,
    HasLeader,
    Target,
)
from contracts.workload import Workload
from harness import store
from harness.config import TestConfig
from harness.disk import Disks
from harness.interpreter import Interpreter, Worker, perform
from harness.liveness import Watch
from harness.progress import Progress
from harness.summary import render
from nemesis.base import Env
from nemesis.registry import build
from nemesis.schedule import Schedule

EXIT = {True: 0, False: 1, "unknown": 2}
EXIT_FAILED = 3

# seconds a final read is asked again after a refusal the workload calls settled
FINAL_SETTLE = 2.0

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
    # `outcome` says how the run ended; until it ends it is "running", which is what a harness
    # that dies leaves, so that a re-check knows its history is partial
    test = {**config.to_json(), "start_time": start.isoformat(), "backend": backend.name,
            "versions": versions(), "run_dir": str(run_dir), "outcome": "running",
            **target_facts(target)}
    store.write_json(run_dir / TEST, test)
    history = History(run_dir / HISTORY)
    problems: list[str] = []  # what went wrong without stopping the run (the nemesis died)
    error: str | None = None
    outcome = "complete"

    def log(message: str) -> None:
        with contextlib.suppress(OSError), open(run_dir / "harness.log", "a") as harness_log:
            harness_log.write(f"{time.strftime('%H:%M:%S')} {message}\n")

    try:
        _deploy_and_run(config, backend, target, workload, history, run_dir, log, out, problems,
                        test)
    except KeyboardInterrupt:
        error, outcome = "interrupted", "interrupted"
    except RunFailed as exc:  # said in full already
        error, outcome = str(exc), "failed"
    except Exception as exc:
        error, outcome = f"{type(exc).__name__}: {exc}", "failed"
        log(traceback.format_exc())
    finally:
        history.close()
    if error is None and problems:
        error, outcome = "; ".join(problems), "failed"
    test.update(outcome=outcome, end_time=dt.datetime.now().isoformat())
    if error is not None:
        test["error"] = error
    unsaved: list[str] = []  # files of the run that could not be written (a full disk)
    _save(run_dir / TEST, test, unsaved)
    ops = history.ops()
    announce(out, "check")
    results = _check(workload, ops, test, run_dir, log)
    if error is not None:
        results["error"] = error
    _save(run_dir / RESULTS, results, unsaved)
    _plots(ops, run_dir, results, log)
    summary = render(results, ops, run_dir) + f"\nrerun: {test['command']}"
    if unsaved:
        summary += "\n" + "\n".join(unsaved)
    code = EXIT_FAILED if error is not None else EXIT.get(results.get("valid"), 2)
    return Outcome(run_dir, results, code, summary)


def target_facts(target: Target) -> dict[str, Any]:
    """What test.json records of the target for the checkers: the promises it makes (the
    anomalies of the others are findings, checkers/promises.py), whether its nodes leave node
    data for raft-invariants and snapshots, and how a crash of its program shows (its crash
    patterns and the exits it makes by design, for checkers/liveness.py)."""
    return {"promises": sorted(target.promises), "node_data": bool(target.node_data),
            "crash_patterns": list(target.crash_patterns),
            "designed_exits": [exit.to_json() for exit in target.designed_exits]}


def cluster_options(config: TestConfig, target: Target) -> dict[str, str]:
    """The backend's options for this run: the fault filesystem when a disk nemesis needs it, and
    the Debian packages of the target's image layer (docker builds it only when a run needs it)."""
    options = {"fuse": "1"} if config.disk_faults else {}
    packages = " ".join(target.image_packages())
    if packages:
        options["packages"] = packages
    return options


def _check(workload: Workload, ops: list[Op], test: dict[str, Any], run_dir: Path,
           log: Callable[[str], None]) -> dict[str, Any]:
    """The workload's verdict on the history, even of a run that failed half-way (with test.json's
    outcome, the checker then says the history is partial): never raises."""
    try:
        return workload.checker(ops, test, node_dirs(run_dir))
    except Exception as exc:
        log("check failed:\n" + traceback.format_exc())
        return {"valid": "unknown", "reason": f"the checker crashed: {type(exc).__name__}: {exc}",
                "checkers": {}}


def _save(path: Path, data: dict[str, Any], unsaved: list[str]) -> None:
    try:
        store.write_json(path, data)
    except OSError as exc:
        unsaved.append(f"{path.name} could not be written: {exc.strerror or exc}")


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
                    out: TextIO, problems: list[str], test: dict[str, Any]) -> None:
    """`test` (test.json) gains what only the deployment learns (the membership facts)."""
    nodes = config.all_nodes()
    spec = ClusterSpec(run_id=f"{config.test_name[:40]}-{uuid.uuid4().hex[:8]}",
                       nodes=nodes, ports=target.ports, run_dir=run_dir,
                       options=cluster_options(config, target))
    db = target.db()
    membership = _membership(config, db, test)
    if config.brokers and isinstance(db, CanDeployBrokers):
        db.use_brokers(config.broker_nodes())
    disks: Disks | None = None
    watch: Watch | None = None
    try:
        announce(out, "deploy")
        log(f"backend {backend.name}: setup")
        backend.setup(spec)
        try:
            if config.disk_faults and isinstance(db, HasDataDir):
                log("disks: mounting the fault filesystem under each node's data")
                disks = Disks(backend, db, nodes, spec.run_id)
                disks.mount_all()
            log("db: setup")
            db.setup(backend, nodes, config.node_settings())
            if membership is not None and isinstance(db, CanChangeMembership):
                # the drawn ones, and those the spares' formatting made
                membership["directory_ids"] = {**membership.get("directory_ids", {}),
                                               **db.directory_ids}
            _wait_for_leader(db, backend, nodes, config.recovery_time, log)
            _wait_for_brokers(db, backend, nodes, config.broker_nodes(), config.recovery_time,
                              log)
            watch = Watch(backend, nodes, history, target.log_file, log,
                          patterns=[*target.crash_patterns,
                                    *(exit.pattern for exit in target.designed_exits)])
            watch.start()
            _run_workload(config, backend, target, db, workload, history, log, out, problems,
                          watch, disks)
            if membership is not None and isinstance(db, CanChangeMembership):
                membership["final_quorum"] = _final_quorum(db, backend, nodes, log)
        finally:
            if watch is not None:
                watch.stop()
                if watch.error is not None:
                    problems.append(f"the liveness watch died: {watch.error}")
            _teardown_db(db, backend, nodes, run_dir, log)
            if disks is not None:
                _unmount(disks, problems, log, run_dir)
    finally:
        log(f"backend {backend.name}: teardown")
        backend.teardown()


def _unmount(disks: Disks, problems: list[str], log: Callable[[str], None],
             run_dir: Path) -> None:
    """After the nodes' data was collected: a filesystem that died during the run fails it (its
    verdict would judge the harness's disk, not the target); then nothing stays mounted, and
    each filesystem's log joins its node's results."""
    dead = disks.dead()
    if dead:
        problems.append(f"the fault filesystem under {', '.join(dead)} died during the run "
                        "(see nodes/<node>/faultfs.log)")
    for problem in disks.unmount_all():
        log(problem)
        problems.append(problem)
    for node in disks.nodes:
        try:
            disks.collect(node, run_dir / NODES / node)
        except Exception as exc:
            log(f"collect {node}'s faultfs.log failed: {exc!r}")


def _membership(config: TestConfig, db: DB, test: dict[str, Any]) -> dict[str, Any] | None:
    """With the membership nemesis: tell the DB its spares and the initial voters' directory ids,
    and return test.json's `membership` entry, to be completed as the run learns more."""
    if not config.membership or not isinstance(db, CanChangeMembership):
        return None
    membership: dict[str, Any] = test.setdefault("membership", {})
    db.use_spares(config.spare_nodes(), config.directory_ids())
    return membership


def _final_quorum(db: CanChangeMembership, backend: Backend, nodes: list[str],
                  log: Callable[[str], None]) -> dict[str, Any] | None:
    """The quorum as DescribeQuorum shows it after the final reads (test.json's
    `membership.final_quorum`, for the membership checker), or None when no node could say."""
    try:
        quorum = db.quorum(backend, nodes)
    except Exception as exc:
        log(f"final quorum: {exc!r}")
        return None
    log(f"final quorum: {json.dumps(quorum)}")
    return quorum


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


def _wait_for_brokers(db: DB, backend: Backend, nodes: list[str], brokers: list[str],
                      patience: float, log: Callable[[str], None]) -> None:
    """Until every broker is registered and unfenced (or `patience` runs out): a run whose
    brokers never served before the first fault would test only their refusals."""
    if not brokers or not isinstance(db, CanReplayRegistration):
        return
    deadline = time.monotonic() + patience
    waiting = list(brokers)
    while waiting and time.monotonic() < deadline:
        waiting = [b for b in waiting
                   if (db.registration(backend, nodes, b) or {}).get("state") != "active"]
        if waiting:
            time.sleep(0.2)
    log(f"brokers not active after {patience}s: {', '.join(waiting)}" if waiting
        else f"brokers active: {', '.join(brokers)}")


def _run_workload(config: TestConfig, backend: Backend, target: Target, db: DB,
                  workload: Workload, history: History, log: Callable[[str], None],
                  out: TextIO, problems: list[str], watch: Watch,
                  disks: Disks | None = None) -> None:
    seeds = config.seeds()
    nodes = config.all_nodes()
    env = Env(backend, db, nodes, disk=disks, brokers=config.broker_nodes())
    schedule = Schedule(build(config.nemesis, env, config.nemesis_options,
                              initial_voters=len(config.nodes)),
                        config.nemesis_interval, seeds["nemesis"], history, log)
    completions: queue.Queue[tuple[Worker, Op]] = queue.Queue()

    def make_client(node: str) -> Callable[[], Client]:
        def open_client() -> Client:
            client = target.client(workload.name)
            client.open(backend, nodes, node)
            return client
        return open_client

    workers = [Worker(slot, config.concurrency, make_client(nodes[slot % len(nodes)]),
                      nodes[slot % len(nodes)], history, completions, config.op_timeout)
               for slot in range(config.concurrency)]
    interpreter = Interpreter(history, workers)
    gen = TimeLimit(Stagger(workload.generator(seeds["generator"]),
                            int(1e9 / config.rate), seeds["generator"] ^ 1),
                    int(config.time_limit * 1e9))
    started = time.monotonic()

    def status() -> str:
        elapsed = time.monotonic() - started
        active = dict(schedule.active)
        fault = ", ".join(f"{kind}({_what(choice)})"
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
    if schedule.error is not None:
        problems.append(f"the nemesis died: {schedule.error}")
    _stop_if_unrecorded(history)
    # a node that exited on its own, or that a heal could not restart, is started once more
    watch.revive(db, env.broken)
    log("healed; waiting for recovery")
    _wait_for_leader(db, backend, nodes, config.recovery_time, log)
    watch.settle(env.broken)
    _final_reads(config, workload, history, make_client, interpreter.next_process(), log)


def _what(choice: dict[str, Any]) -> str:
    """A fault's choice in a few words, for the progress line."""
    if choice.get("op"):  # a membership change
        return f"{choice['op']} {choice.get('node')}"
    return str(choice.get("shape") or choice.get("target") or choice.get("node"))


def _stop_if_unrecorded(history: History) -> None:
    """A history that cannot be stored (a full disk) ends the run here, before the final reads
    that could not be recorded either."""
    problem = history.write_error
    if problem is not None:
        raise RunFailed(f"{HISTORY} could not be written ({problem.strerror or problem}): the "
                        f"run stopped after {len(history.ops())} operations")


def _final_reads(config: TestConfig, workload: Workload, history: History,
                 make_client: Callable[[str], Callable[[], Client]], process: int,
                 log: Callable[[str], None]) -> None:
    """The workload's final reads (one, or one per key), asked of every node in turn, each of
    that node alone (a client never moves a final op to another node: what it answers is a
    statement about that node), each retried (each try in the history) until it succeeds, the
    node refuses it for good (the workload's `final_refusals`), or the recovery time runs out. A
    read that no node answered is asked of every node again while the recovery time lasts (on a
    target whose followers serve no reads, the leader may have moved during the round)."""
    deadline = time.monotonic() + config.recovery_time
    # refusals that are a node's settled answer (a controller that does not lead refuses a
    # describe for good): asking again would only spend the recovery time
    settled = frozenset(getattr(workload, "final_refusals", ()))
    unanswered = workload.final_ops()
    while True:
        answered, process = _final_round(config, unanswered, history, make_client, process,
                                         settled, deadline, log)
        unanswered = [read for i, read in enumerate(unanswered) if i not in answered]
        if not unanswered or time.monotonic() >= deadline:
            return


def _final_round(config: TestConfig, reads: list[Op], history: History,
                 make_client: Callable[[str], Callable[[], Client]], process: int,
                 settled: frozenset[str], deadline: float,
                 log: Callable[[str], None]) -> tuple[set[int], int]:
    """`reads` asked of every node once (each retried as `_final_reads` says): the positions of
    those some node answered ok, and the next free process number. Once a node has refused one
    read for good, its refusals of the next are taken at the first answer."""
    answered: set[int] = set()
    for node in config.all_nodes():
        open_client = make_client(node)
        client: Client | None = None
        patience = FINAL_SETTLE

        def client_for(open_client: Callable[[], Client] = open_client) -> Client:
            nonlocal client
            if client is None:
                client = open_client()
            return client
        for position, read in enumerate(reads):
            settle = time.monotonic() + patience
            while True:
                invoke = history.record({**read, "process": process})
                done = history.record(perform(invoke, client_for, config.op_timeout))
                _stop_if_unrecorded(history)
                if done["type"] == "info":
                    process += 1
                    if client is not None:
                        _close(client)
                        client = None
                give_up = min(deadline, settle) if done.get("error") in settled else deadline
                if done["type"] == "ok" or time.monotonic() >= give_up:
                    break
                time.sleep(0.5)
            if done["type"] == "ok":
                answered.add(position)
            elif done.get("error") in settled:
                patience = 0.0
            # the node that answered, when the client says another than the one asked
            by = done.get("node")
            elsewhere = f" (answered by {by})" if by is not None and by != node else ""
            log(f"final {read['f']} {json.dumps(read.get('value'))} on {node}{elsewhere}: "
                f"{done['type']} {json.dumps(done.get('error'))}")
        if client is not None:
            _close(client)
        process += 1
    return answered, process


def _close(client: Client) -> None:
    with contextlib.suppress(Exception):
        client.close()
