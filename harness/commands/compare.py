"""`kraft compare`: the same matrix workload x nemesis x seed against several targets, side by side.

Each cell of the matrix is one `kraft test` subprocess (`--jobs` at a time), driven through its
command line as the campaign drives it, each stored under the comparison's results directory as
`<target>-<workload>-<nemesis>-s<seed>/<start>/`: a results directory that `kraft analyze` and
`kraft serve` read as it is. The comparison itself (harness/compare.py) is computed from the stored
runs only, so `kraft compare --runs DIR` renders the same tables again from any results directory.

Everything that would make a run refuse to start is found before the first one starts (exit 64):
an unknown target, a server binary this machine lacks (`Target.missing`), a setting the target
refuses, a bad seeds range, and any option `kraft test` itself would refuse (its own parser checks
every run's command line). A target that cannot run a workload, or inject a fault, has those cells
skipped with a line saying so; a target left with no cell at all is bad usage.

Exit codes: 0 every run ran through (whatever the verdicts: a comparison reports, it does not
judge), 3 a run failed to run (`kraft test` exited other than 0, 1, 2), 64 bad usage, 130
interrupted (the running tests are stopped with SIGINT, they clean up, and what finished before is
still compared).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

from harness import compare, compare_report
from harness.config import UsageError

EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 3, 64, 130
EXIT_MEANING = {0: "VALID", 1: "INVALID", 2: "UNKNOWN", 3: "RUN FAILED", 64: "BAD USAGE"}
KRAFT_TEST = [sys.executable, "-m", "harness.cli", "test"]  # as the campaign runs it
MAX_RUNS = 1000  # past this a seeds range is a typo
MAX_JOBS = 32
DEFAULT_NEMESES = "partition,pause,kill"
# workloads that need options the comparison does not pass (broker nodes)
NOT_COMPARED = {"brokers": "it needs broker nodes (kraft test --brokers)"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    from harness import targets

    p = _Parser(prog="kraft compare", description=(
        "Run the same matrix (workload x nemesis x seed) against several targets, one "
        "`kraft test` per cell, then show one table per workload with the targets side by "
        "side: verdicts, anomalies and findings with the runs that show them, availability "
        "during faults, recovery time, throughput, latency. Writes compare.json and "
        "compare.html beside the runs. Exit 0 every run ran (whatever the verdicts), 3 a run "
        "failed to run, 64 bad usage, 130 interrupted."))
    p.add_argument("--targets", default=",".join(targets.TARGETS),
                   help=f"comma list of targets (default: {','.join(targets.TARGETS)})")
    p.add_argument("--workloads", default=None,
                   help="comma list of workloads (default: every workload one of the targets "
                        "runs, except brokers)")
    p.add_argument("--nemesis", default=DEFAULT_NEMESES,
                   help="comma list of fault kinds, each a run of its own (not combined); "
                        f"`none` for a run without faults (default {DEFAULT_NEMESES})")
    p.add_argument("--seeds", default="1", help="seeds: N, A-B, or a comma list of both (1)")
    p.add_argument("--time-limit", default="30", help="seconds of workload per run (30)")
    p.add_argument("--nodes", default="3", help="a count or comma-separated names (3)")
    p.add_argument("--backend", default="local", help="local | docker | auto (local)")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (1)")
    p.add_argument("--nemesis-interval", default=None,
                   help="seconds between faults and each fault's length (kraft test's default)")
    p.add_argument("--rate", default=None, help="ops per second (kraft test's default)")
    p.add_argument("--node-config", action="append", default=[], metavar="TARGET:KEY=VALUE",
                   help="a setting for every node of one target's runs, e.g. "
                        "etcd:unsafe-no-fsync=true (repeatable)")
    p.add_argument("--results-dir", default=None,
                   help="where the runs and the comparison go (default "
                        "results/compare/<UTC time>/)")
    p.add_argument("--alluredir", default=None,
                   help="also write Allure results there: one per run (epic = target), and "
                        "one with compare.html")
    p.add_argument("--runs", nargs="+", default=None, metavar="DIR",
                   help="run nothing: compare the runs already stored under these results "
                        "directories (or run directories)")
    return p


# -- the plan, checked before anything runs ------------------------------------------------------

@dataclass(frozen=True)
class Planned:
    """One cell of the matrix: one `kraft test` (`argv`, whole), storing its run under
    `<results dir>/<test_name>/`."""

    target: str
    workload: str
    nemesis: str
    seed: int
    test_name: str
    argv: list[str]


@dataclass
class Plan:
    runs: list[Planned]
    not_run: list[compare.NotRun]
    targets: list[str]
    workloads: list[str]
    nemeses: list[str]
    backend: str  # `auto` resolved


def parse_seeds(text: str) -> list[int]:
    """`3`, `1-3`, `1,4,7-9` -> the seeds, in order, once each."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise UsageError(f"--seeds: {part!r} is neither a seed nor a range A-B "
                             f"(e.g. --seeds 1-3 or --seeds 1,5)")
        low = int(match[1])
        high = int(match[2]) if match[2] is not None else low
        if high < low:
            raise UsageError(f"--seeds: the range {part} is empty (write it low-high)")
        if high - low >= MAX_RUNS:
            raise UsageError(f"--seeds: {part} holds more than {MAX_RUNS} seeds")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds


def _names(flag: str, text: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    if not names:
        raise UsageError(f"{flag}: empty list")
    return names


def node_configs(items: list[str], targets: list[str]) -> dict[str, list[str]]:
    """`TARGET:KEY=VALUE` items -> each target's `KEY=VALUE` list (a target name may hold a colon:
    `module:Class`; the longest that prefixes the item wins)."""
    found: dict[str, list[str]] = {t: [] for t in targets}
    for item in items:
        owner = next((t for t in sorted(targets, key=len, reverse=True)
                      if item.startswith(f"{t}:")), None)
        if owner is None or "=" not in item[len(owner) + 1:]:
            raise UsageError(f"--node-config: expected TARGET:KEY=VALUE with TARGET one of "
                             f"{', '.join(targets)}, got {item!r}")
        found[owner].append(item[len(owner) + 1:])
    return found


def test_name(target: str, workload: str, nemesis: str, seed: int) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]", ".", f"{target}-{workload}-{nemesis}-s{seed}")


def kraft_test_argv(args: argparse.Namespace, results_dir: Path, backend: str, target: str,
                    workload: str, nemesis: str, seed: int, settings: list[str]) -> list[str]:
    """The command line of one cell: `kraft test` as the campaign runs it (this interpreter)."""
    argv = [*KRAFT_TEST, "--backend", backend, "--target", target, "--workload", workload,
            "--nemesis", nemesis, "--seed", str(seed), "--nodes", args.nodes,
            "--time-limit", args.time_limit, "--results-dir", str(results_dir),
            "--test-name", test_name(target, workload, nemesis, seed)]
    for flag, value in (("--nemesis-interval", args.nemesis_interval), ("--rate", args.rate)):
        if value is not None:
            argv += [flag, value]
    for setting in settings:
        argv += ["--node-config", setting]
    return argv


def _check_cell(argv: list[str]) -> None:
    """Refuse, as `kraft test` would before deploying, a command line it would refuse."""
    from harness.commands import test as test_cli

    try:
        config = test_cli.config_from(test_cli.parser().parse_args(argv[len(KRAFT_TEST):]))
    except SystemExit:  # --help inside a value: cannot happen, but never exit from here
        raise UsageError("bad options for kraft test") from None
    test_cli.check_brokers(config)


def plan(args: argparse.Namespace, results_dir: Path,
         say: Callable[[str], None]) -> Plan:
    """The matrix, with every check that can fail before a run starts (UsageError)."""
    import workloads as workload_registry
    from harness import backends, disk, targets
    from harness.config import parse_node_config
    from nemesis.registry import DISK_KINDS, KINDS, available

    if not 1 <= args.jobs <= MAX_JOBS:
        raise UsageError(f"--jobs: must be from 1 to {MAX_JOBS}, got {args.jobs}")
    if args.backend not in backends.NAMES:
        raise UsageError(f"--backend: unknown backend {args.backend!r}; "
                         f"one of: {', '.join(backends.NAMES)}")
    target_names = _names("--targets", args.targets)
    nemeses = _names("--nemesis", args.nemesis)
    unknown = [n for n in nemeses if n not in (*KINDS, "none")]
    if unknown:
        raise UsageError(f"--nemesis: unknown fault {', '.join(unknown)}; one of: "
                         f"{', '.join(KINDS)}, none")
    seeds = parse_seeds(args.seeds)
    settings = node_configs(args.node_config, target_names)
    try:
        backend, _note = backends.make(args.backend)
    except Exception as exc:
        raise UsageError(f"--backend {args.backend}: {exc}") from None
    made = {}
    for name in target_names:
        try:
            target = targets.get(name)
        except targets.UnknownTarget as exc:
            raise UsageError(f"--targets: {exc.args[0]}") from None
        lacking = target.missing(backend.name)
        if lacking:
            raise UsageError(f"--targets: {name}: {lacking}")
        problem = target.check_node_config(parse_node_config(settings[name]))
        if problem:
            raise UsageError(f"--node-config: {name}: {problem}")
        made[name] = target
    if args.workloads is None:
        wanted = [w for w in workload_registry.WORKLOADS if w not in NOT_COMPARED
                  and any(w in t.workloads() for t in made.values())]
    else:
        wanted = _names("--workloads", args.workloads)
        for name in wanted:
            if name not in workload_registry.RUNNABLE:
                raise UsageError(f"--workloads: unknown workload {name!r}; one of: "
                                 f"{', '.join(workload_registry.RUNNABLE)}")
            if name in NOT_COMPARED:
                raise UsageError(f"--workloads: {name} is not compared: {NOT_COMPARED[name]}")
    runs: list[Planned] = []
    not_run: list[compare.NotRun] = []
    for name, target in made.items():
        db = target.db()
        disk_why = (disk.unusable(backend, db) if any(n in DISK_KINDS for n in nemeses)
                    else None)
        cannot = available(backend, db, disk_why)
        cells = 0
        for workload in wanted:
            if workload not in target.workloads():
                runs_ = ", ".join(target.workloads())
                why = f"target {name} cannot run {workload} (it runs {runs_})"
                not_run.append(compare.NotRun(workload, None, name, why))
                say(f"skipping {name} x {workload}: {why}")
                continue
            for nemesis in nemeses:
                if nemesis != "none" and cannot.get(nemesis):
                    why = f"{nemesis}: {cannot[nemesis]} (target {name}, {backend.name} backend)"
                    not_run.append(compare.NotRun(workload, nemesis, name, why))
                    say(f"skipping {name} x {workload} x {nemesis}: {why}")
                    continue
                for seed in seeds:
                    argv = kraft_test_argv(args, results_dir, backend.name, name, workload,
                                           nemesis, seed, settings[name])
                    _check_cell(argv)
                    runs.append(Planned(name, workload, nemesis, seed,
                                        test_name(name, workload, nemesis, seed), argv))
                    cells += 1
        if not cells:
            raise UsageError(f"--targets: {name} runs none of this matrix (workloads "
                             f"{', '.join(wanted)}, nemesis {', '.join(nemeses)})")
    if len(runs) > MAX_RUNS:
        raise UsageError(f"the matrix holds {len(runs)} runs, more than {MAX_RUNS}: fewer seeds")
    return Plan(runs, not_run, target_names, wanted, nemeses, backend.name)


# -- running the matrix --------------------------------------------------------------------------

@dataclass
class Finished:
    planned: Planned
    exit_code: int | None  # None: never started (interrupted before)
    run_dir: Path | None
    log: Path
    seconds: float = 0.0
    interrupted: bool = False


@dataclass
class _Live:
    """The running `kraft test` processes, and whether the comparison is stopping."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    procs: set[subprocess.Popen[bytes]] = field(default_factory=set)
    stopping: bool = False
    started: int = 0

    def stop(self) -> None:
        with self.lock:
            self.stopping = True
            for proc in self.procs:
                # each test is in a session of its own (a terminal's Ctrl-C reaches only the
                # comparison): exactly one SIGINT each, upon which it stops its nodes and stores
                # what it recorded
                proc.send_signal(signal.SIGINT)


def _runs_of(folder: Path) -> set[Path]:
    if not folder.is_dir():
        return set()
    return {p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()}


def _run_one(cell: Planned, results_dir: Path, live: _Live, total: int,
             say: Callable[[str], None]) -> Finished:
    log = results_dir / "_logs" / f"{cell.test_name}.log"
    argv = cell.argv
    folder = results_dir / cell.test_name
    before = _runs_of(folder)
    with live.lock:
        if live.stopping:
            return Finished(cell, None, None, log)
        live.started += 1
        number = live.started
        say(f"[{number}/{total}] start {cell.test_name}: {shlex.join(argv)}")
        start = time.monotonic()
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**os.environ, "PYTHONUNBUFFERED": "1"})
        live.procs.add(proc)
    code = proc.wait()
    with live.lock:
        live.procs.discard(proc)
        interrupted = live.stopping
    new = sorted(_runs_of(folder) - before)
    done = Finished(cell, code, new[-1] if new else None, log, time.monotonic() - start,
                    interrupted)
    verdict = "INTERRUPTED" if interrupted else EXIT_MEANING.get(code, f"exit {code}")
    say(f"[{number}/{total}] done  {cell.test_name}: {verdict} (exit {code}, "
        f"{done.seconds:.0f}s) {done.run_dir or f'no run stored; see {log}'}")
    return done


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT/SIGTERM interrupt the comparison once (KeyboardInterrupt); later ones only say that
    it is stopping. The previous handlers come back after."""
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def later(_signum: int, _frame: FrameType | None) -> None:
        print("kraft compare: stopping the running tests, please wait", file=sys.stderr)

    def first(_signum: int, _frame: FrameType | None) -> None:
        for s in previous:
            signal.signal(s, later)
        raise KeyboardInterrupt

    for s in previous:
        signal.signal(s, first)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def execute(cells: list[Planned], results_dir: Path, jobs: int,
            say: Callable[[str], None]) -> tuple[list[Finished], bool]:
    """Run the cells, `jobs` at a time; (what finished, in plan order; whether interrupted)."""
    (results_dir / "_logs").mkdir(parents=True, exist_ok=True)
    live = _Live()
    interrupted = False
    with _interruptible(), ThreadPoolExecutor(max_workers=jobs,
                                              thread_name_prefix="kraft-test") as pool:
        futures: dict[Future[Finished], int] = {}
        try:
            for i, cell in enumerate(cells):
                futures[pool.submit(_run_one, cell, results_dir, live, len(cells), say)] = i
            for future in as_completed(futures):
                future.result()
        except KeyboardInterrupt:
            interrupted = True
            say("interrupted: stopping the running tests (each stops its nodes and stores its "
                "run), then comparing what finished")
            live.stop()
        done = sorted(((futures[f], f.result()) for f in futures), key=lambda x: x[0])
    return [d for _, d in done], interrupted


# -- output --------------------------------------------------------------------------------------

def _default_dir() -> Path:
    return Path("results") / "compare" / dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")


def render(runs: list[compare.Run], out_dir: Path, plan_: Plan | None, alluredir: Path | None,
           failed: set[str], analyze_dir: str) -> dict[str, Any]:
    """Write compare.json and compare.html, print the text, and the Allure results."""
    data = compare.tables(runs, *(
        (plan_.targets, plan_.workloads, plan_.nemeses, plan_.not_run) if plan_ else ()))
    data = {"generated": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), **data}
    json_path, html_path = out_dir / "compare.json", out_dir / "compare.html"
    tmp = out_dir / ".compare.json.tmp"
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, json_path)
    html_path.write_text(compare_report.page(data, out_dir), encoding="utf-8")
    print(compare_report.text(data))
    print()
    if alluredir is not None:
        count = compare_report.allure_results(data, alluredir, html_path, failed)
        print(f"allure: {count} results in {alluredir} (kraft report renders them)")
    print(f"`kraft analyze {analyze_dir}` runs the Spark pipeline over the same runs "
          "(grouped by target)")
    print(f"table:  {json_path}")
    print(f"page:   {html_path}")
    return data


def main(argv: list[str]) -> int:
    def say(line: str) -> None:
        print(f"kraft compare: {line}", file=sys.stderr, flush=True)

    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    except UsageError as exc:
        say(str(exc))
        return EXIT_USAGE
    out_dir = Path(args.results_dir) if args.results_dir else _default_dir()
    alluredir = Path(args.alluredir) if args.alluredir else None
    from harness.commands.test import check_results_dir

    try:
        if args.runs is not None:
            return _compare_stored(args.runs, out_dir, alluredir, say)
        matrix = plan(args, out_dir, say)
        check_results_dir(str(out_dir))  # made only once the matrix holds
    except UsageError as exc:
        say(str(exc))
        return EXIT_USAGE
    say(f"{len(matrix.runs)} runs ({', '.join(matrix.targets)} x {', '.join(matrix.workloads)}"
        f" x {', '.join(matrix.nemeses)} x seeds {args.seeds}), {args.jobs} at a time, "
        f"{matrix.backend} backend, into {out_dir}")
    finished, interrupted = execute(matrix.runs, out_dir, args.jobs, say)
    complete = [f for f in finished if f.exit_code is not None and not f.interrupted]
    failed = [f for f in complete if f.exit_code not in (0, 1, 2)]
    runs = [compare.read_run(f"{f.planned.test_name}/{f.run_dir.name}", str(f.run_dir.resolve()))
            for f in complete if f.run_dir is not None]
    render(runs, out_dir, matrix, alluredir,
           {f"{f.planned.test_name}/{f.run_dir.name}" for f in failed if f.run_dir},
           str(out_dir))
    for f in failed:
        say(f"{f.planned.test_name} failed to run (exit {f.exit_code}); its output: {f.log}")
    if interrupted:
        compared = {f.planned.test_name for f in complete}
        left = [cell.test_name for cell in matrix.runs if cell.test_name not in compared]
        say(f"interrupted: {len(left)} runs not compared: {', '.join(left)}")
        return EXIT_INTERRUPTED
    return EXIT_RUN_FAILED if failed else EXIT_OK


def _compare_stored(directories: list[str], out_dir: Path, alluredir: Path | None,
                    say: Callable[[str], None]) -> int:
    try:
        runs = compare.find_runs(directories)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise UsageError(f"--runs: {exc}; give results directories (e.g. results/)") from None
    if not any(r.placed for r in runs):
        raise UsageError(f"--runs: no runs found under {', '.join(directories)} "
                         "(a results directory holds <test-name>/<start>/test.json)")
    from harness.commands.test import check_results_dir

    check_results_dir(str(out_dir))
    say(f"comparing {len(runs)} stored runs, into {out_dir}")
    render(runs, out_dir, None, alluredir, set(), " ".join(directories))
    return EXIT_OK
