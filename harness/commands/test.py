"""`kraft test`: one test run: deploy, run the workload and the nemesis, check, store, verdict.

Exit codes (docs/architecture.md): 0 valid, 1 invalid, 2 unknown, 3 the run itself failed,
64 bad usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import workloads
from checkers import availability
from contracts.backend import Backend
from contracts.results import TEST
from contracts.target import CanDeployBrokers, Target
from harness import backends, disk, targets
from harness.config import (
    MAX_BROKERS,
    TestConfig,
    UsageError,
    did_you_mean,
    parse_list,
    parse_node_config,
    parse_nodes,
)
from harness.store import valid_name

if TYPE_CHECKING:
    from harness.runner import Outcome
from nemesis.brokers import KIND as STALE_INCARNATION
from nemesis.membership import KIND as MEMBERSHIP
from nemesis.partition import BROKER_SHAPES, SHAPES_OPTION
from nemesis.registry import DEFAULT_KINDS, KINDS, OPTIONS, available
from nemesis.spec import Choices, Count, Option, Seconds

EXIT_USAGE = 64
# Past these a number is a typo, and it would fail only at run time (a timer that overflows, an
# op interval that is infinite), after the nodes are deployed: refused before, like inf and nan.
MAX_SECONDS = 10**7  # 115 days
MAX_RATE = 10**6  # ops per second


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _number(low: float, high: float, unit: str, zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number in (low, high], or [0, high] when `zero`; never inf or
    nan, which would reach test.json as `Infinity`, and the run as a timer that cannot be set."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number of {unit}, got {text!r}"
                                             ) from None
        if not math.isfinite(value) or value > high or (
                value < 0 if zero else value < low or value == 0):
            raise argparse.ArgumentTypeError(f"must be a finite number of {unit} from "
                                             f"{0 if zero else low:g} to {high:g}, got {text!r}")
        return value
    parse.__name__ = unit  # what argparse names in its messages
    return parse


_SECONDS = _number(0.001, MAX_SECONDS, "seconds")


def _count(low: int, high: int, unit: str) -> Callable[[str], int]:
    """An argparse type: a whole number from low to high."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of {unit}, got {text!r}"
                                             ) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {text!r}")
        return value
    parse.__name__ = unit
    return parse


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kraft test", description=(
        "Run one Jepsen-style test: deploy the target's nodes, run client processes (the workload's ops) "
        "while the nemesis injects faults, check the history, store the run under "
        "RESULTS_DIR/TEST_NAME/START/, and print the verdict. Exit 0 valid, 1 invalid, "
        "2 unknown, 3 the run failed, 64 bad usage."))
    p.add_argument("--backend", default="auto",
                   help="local | docker | auto (default: auto: docker when an engine answers and a node image is built)")
    p.add_argument("--target", default="reference", help="implementation under test "
                   f"({', '.join(targets.TARGETS)}, or module:attribute); default: reference")
    p.add_argument("--nodes", default="3", help="a count (n1..nN) or comma-separated names")
    p.add_argument("--workload", default=None,
                   help=f"{', '.join(workloads.RUNNABLE)} (default: the target's first: append "
                        "for reference and nats, kv for etcd)")
    p.add_argument("--nemesis", default=None,
                   help=f"comma list of {', '.join(KINDS)}, or none (default: "
                        f"{', '.join(DEFAULT_KINDS)}, those the backend and target allow); "
                        "targeted: whole fault sequences, one per turn, that steer the "
                        "nodes into rare states (a stale follower that campaigns while the "
                        "leader dies and the others restart; a voter crashed right after "
                        "its vote, asked again in the same epoch)")
    p.add_argument("--nemesis-interval", type=_SECONDS, default=5.0,
                   help="seconds between faults, and each fault's duration (default 5)")
    for option in OPTIONS:
        _add_option(p, option)
    p.add_argument("--brokers", type=int, default=0,
                   help="broker nodes deployed after the controllers (process.roles=broker: they "
                        "register, heartbeat and are fenced; the brokers workload describes "
                        f"them), 0 to {MAX_BROKERS} (default 0)")
    p.add_argument("--time-limit", type=_SECONDS, default=60.0, help="seconds of workload (60)")
    p.add_argument("--concurrency", type=int, default=0,
                   help="client processes (default: twice the nodes)")
    p.add_argument("--rate", type=_number(0.001, MAX_RATE, "ops per second"), default=10.0,
                   help="ops per second in total (10)")
    p.add_argument("--op-timeout", type=_SECONDS, default=1.5,
                   help="seconds before an op's outcome is unknown (1.5: shorter than the "
                        "node's check-quorum timeout, so that clients leave a cut-off leader "
                        "while it still believes it leads)")
    p.add_argument("--recovery-time", type=_number(0, MAX_SECONDS, "seconds", zero=True),
                   default=30.0,
                   help="seconds allowed for recovery and final reads after healing (30)")
    p.add_argument("--seed", type=int, default=None, help="seed of every random choice")
    p.add_argument("--node-config", action="append", default=[], metavar="KEY=VALUE",
                   help="a setting passed to every node, e.g. unsafe=skip-flush (repeatable)")
    p.add_argument("--min-availability", default=None, metavar="FLOORS",
                   help="availability floors as a verdict: the share of ok operations among "
                        "those invoked during each fault kind's windows, and outside every "
                        "window, must reach its floor, else the run is INVALID "
                        "(low-availability, naming the kind, the share and the windows). "
                        "A comma list of FRACTION (every fault kind and outside faults) and "
                        "KIND=FRACTION (a fault kind; none: outside faults; during: inside any "
                        "window), e.g. 0.5,kill=0.2 or 90%%; final reads aside. Recorded in "
                        "test.json (kraft check --min-availability re-judges); default: none")
    p.add_argument("--results-dir", default="results", help="where runs are stored (results)")
    p.add_argument("--test-name", default="", help="the run's name in the results dir")
    p.add_argument("--test-count", type=_count(1, 1000, "runs"), default=1, metavar="N",
                   help="run the test N times in a row, seeds SEED, SEED+1, ..., and sum up the "
                        "verdicts and the seeds that failed (1)")
    p.add_argument("--junitxml", default=None, metavar="FILE",
                   help="also write the run as a JUnit XML test case, for CI (VALID passes, "
                        "INVALID fails, UNKNOWN and a failed run are errors)")
    return p


def _add_option(p: argparse.ArgumentParser, option: Option) -> None:
    """A fault's option as a flag: a comma list is read after parsing (`_option_value`), so
    that its message names the flag as the other lists' do."""
    if isinstance(option.type, Seconds):
        p.add_argument(option.flag, dest=option.name, type=_SECONDS, default=option.default,
                       help=option.help)
    elif isinstance(option.type, Count):
        p.add_argument(option.flag, dest=option.name, type=int, default=option.default,
                       help=option.help)
    else:
        p.add_argument(option.flag, dest=option.name, default=None, help=option.help)


def _option_value(option: Option, given: Any) -> Any:
    """The run's value of `option`, from what argparse made of its flag."""
    if isinstance(option.type, Choices):
        return (option.initial() if given is None
                else parse_list(option.flag, given, option.type.allowed, False))
    if isinstance(option.type, Count) and not option.type.low <= given <= option.type.high:
        raise UsageError(f"{option.flag}: must be from {option.type.low} to "
                         f"{option.type.high}, got {given}")
    return given


def default_workload(target: str) -> str:
    """The target's first workload (`kraft test --target etcd` runs kv); for a name that is no
    target, append, and `prepare` then refuses the name in its own line."""
    try:
        return targets.get(target).workloads()[0]
    except (targets.UnknownTarget, IndexError):
        return "append"


def config_from(args: argparse.Namespace) -> TestConfig:
    if args.concurrency < 0:
        raise UsageError(f"--concurrency: must not be negative, got {args.concurrency}")
    nemesis_options = {option.name: _option_value(option, getattr(args, option.name))
                       for option in OPTIONS}
    if not 0 <= args.brokers <= MAX_BROKERS:
        raise UsageError(f"--brokers: must be from 0 to {MAX_BROKERS}, got {args.brokers}")
    if args.backend not in backends.NAMES:
        raise UsageError(f"--backend: unknown backend {args.backend!r}; "
                         f"one of: {', '.join(backends.NAMES)}")
    if args.workload is None:
        args.workload = default_workload(args.target)
    if args.workload not in workloads.RUNNABLE:
        raise UsageError(f"--workload: unknown workload {args.workload!r}"
                         f"{did_you_mean(args.workload, workloads.RUNNABLE)}; "
                         f"one of: {', '.join(workloads.RUNNABLE)}")
    if args.test_name and not valid_name(args.test_name):
        raise UsageError(f"--test-name: {args.test_name!r} is not a plain file name")
    nemesis = (list(DEFAULT_KINDS) if args.nemesis is None
               else parse_list("--nemesis", args.nemesis, KINDS, allow_none=True))
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    return TestConfig(backend=args.backend, target=args.target, nodes=parse_nodes(args.nodes),
                      workload=args.workload, nemesis=nemesis,
                      nemesis_interval=args.nemesis_interval,
                      nemesis_options=nemesis_options, brokers=args.brokers,
                      time_limit=args.time_limit, concurrency=args.concurrency, rate=args.rate,
                      op_timeout=args.op_timeout, recovery_time=args.recovery_time, seed=seed,
                      node_config=parse_node_config(args.node_config),
                      min_availability=_floors(args.min_availability),
                      results_dir=args.results_dir, test_name=args.test_name)


def _floors(text: str | None) -> dict[str, float]:
    """`--min-availability`, each kind one the nemesis knows (a floor of a kind the run does
    not inject is not judged, so that one floor serves a whole campaign)."""
    if text is None:
        return {}
    try:
        return availability.parse_floors(text, KINDS)
    except ValueError as exc:
        raise UsageError(f"--min-availability: {exc}") from None


def too_short(config: TestConfig) -> str | None:
    """Said before the run, not after it: a time limit that leaves some requested kind no turn
    to start makes the verdict UNKNOWN, whatever the system does."""
    turns, kinds = config.fault_turns(), len(config.nemesis)
    if turns >= kinds:
        return None
    least = (kinds + 1) * config.nemesis_interval
    return (f"{config.time_limit:g}s with a fault turn every {config.nemesis_interval:g}s "
            f"starts at most {turns} of the {kinds} fault kinds ({', '.join(config.nemesis)}), "
            f"and a kind that never starts makes the run UNKNOWN: give --time-limit {least:g} "
            f"or more, a shorter --nemesis-interval, or fewer kinds with --nemesis")


def broker_wants(config: TestConfig) -> list[str]:
    """The options given that only a target with broker nodes can honour."""
    wanting = ["--brokers"] if config.brokers else []
    if config.workload == "brokers":
        wanting.append("--workload brokers")
    if STALE_INCARNATION in config.nemesis:
        wanting.append(f"--nemesis {STALE_INCARNATION}")
    asked = [s for s in config.nemesis_options[SHAPES_OPTION.name] if s in BROKER_SHAPES]
    if asked:
        wanting.append(f"--partition-shapes {', '.join(asked)}")
    return wanting


def check_brokers(config: TestConfig) -> None:
    """The combinations that need brokers, or that brokers cannot run with, refused before
    anything is deployed (the target's power to deploy them is checked by `main`)."""
    if config.workload == "brokers" and not config.brokers:
        raise UsageError("--workload brokers: needs broker nodes to describe (--brokers N)")
    if STALE_INCARNATION in config.nemesis and not config.brokers:
        raise UsageError(f"--nemesis {STALE_INCARNATION}: needs broker nodes (--brokers N)")
    asked = [s for s in config.nemesis_options[SHAPES_OPTION.name] if s in BROKER_SHAPES]
    if asked and not config.brokers:
        raise UsageError(f"--partition-shapes {', '.join(asked)}: needs broker nodes "
                         "(--brokers N)")
    if not config.brokers:
        return
    if MEMBERSHIP in config.nemesis:
        raise UsageError(f"--brokers: not with the {MEMBERSHIP} nemesis (it could make a "
                         "broker a voter, and broker ids never vote)")
    try:
        fencing = config.fencing()
    except ValueError:
        raise UsageError("--node-config: the broker.* timeouts must be integers of ms") from None
    if fencing["broker_timeout_ms"] <= fencing["session_timeout_ms"]:
        raise UsageError("--node-config: broker.heartbeat.timeout.ms must be greater than "
                         "broker.session.timeout.ms (a broker must stop serving only after the "
                         "controller has fenced it)")


def check_results_dir(results_dir: str) -> None:
    """The results directory can take a run: made if missing, and a file written and removed in
    it, so that a run does not fail on it after the nodes are deployed."""
    _writable("--results-dir", Path(results_dir))


def check_junit_path(given: str) -> None:
    """The JUnit file can be written where asked, before anything is deployed."""
    path = Path(given)
    if path.is_dir():
        raise UsageError(f"--junitxml: {given} is a directory; give a file name")
    _writable("--junitxml", path.parent)


def _writable(flag: str, directory: Path) -> None:
    """`directory` is made if missing, and a file written and removed in it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory, prefix=".kraft-write-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag}: cannot write to {directory}: {exc.strerror or exc}") from None


def _interrupt_once() -> None:
    """First SIGINT/SIGTERM interrupts the run; later ones wait for the cleanup."""
    def first(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, later)
        signal.signal(signal.SIGTERM, later)
        raise KeyboardInterrupt

    def later(_signum: int, _frame: FrameType | None) -> None:
        print("kraft test: stopping the nodes, please wait", file=sys.stderr)

    signal.signal(signal.SIGINT, first)
    signal.signal(signal.SIGTERM, first)


def prepare(config: TestConfig, nemesis_asked: bool = True) -> tuple[Target, Backend, str]:
    """Everything a run needs that can be refused before anything is deployed: the target (a
    known name, the workload, the node settings, what this machine lacks for it on the chosen
    backend), the backend (`auto` resolved, with its note), and the faults they can do. With
    `nemesis_asked` a fault they cannot do is refused; otherwise (the default faults) it is
    dropped from `config.nemesis`. Raises UsageError, or a backend's KeyError or ImportError,
    each with one line; `kraft compare` asks it for each of its targets."""
    try:
        target = targets.get(config.target)
    except targets.UnknownTarget as exc:
        raise UsageError(f"--target: {exc.args[0]}") from None
    can_run = target.workloads()
    if config.workload not in can_run:
        raise UsageError(f"--workload: target {config.target} cannot run {config.workload}; "
                         f"it runs: {', '.join(can_run)}")
    db = target.db()
    if not isinstance(db, CanDeployBrokers):
        # named for the target first: asking for `--brokers N` would only be refused in turn
        wanting = broker_wants(config)
        if wanting:
            raise UsageError(f"{wanting[0]}: target {config.target} has no broker nodes")
    check_brokers(config)
    problem = target.check_node_config(config.node_settings())
    if problem:
        raise UsageError(f"--node-config: {problem}")
    problem = target.check_nodes(len(config.nodes))  # e.g. NATS: at most 5 replicas
    if problem:
        raise UsageError(f"--nodes: {problem}")
    backend, note = backends.make(config.backend)
    lacking = target.missing(backend.name)
    if lacking:
        raise UsageError(f"--target {config.target}: {lacking}")
    disk_why = disk.unusable(backend, db) if config.disk_faults else None
    can = available(backend, db, disk_why)
    refused = {k: why for k, why in can.items() if k in config.nemesis and why}
    if refused and nemesis_asked:
        raise UsageError("--nemesis: " + "; ".join(f"{k}: {w}" for k, w in refused.items())
                         + f" (target {config.target}, {backend.name} backend)")
    config.nemesis = [k for k in config.nemesis if k not in refused]
    return target, backend, note


def main(argv: list[str]) -> int:
    from harness.runner import run
    try:
        args = parser().parse_args(argv)
        config = config_from(args)
        target, backend, note = prepare(config, nemesis_asked=args.nemesis is not None)
        check_results_dir(config.results_dir)
        if args.junitxml:
            check_junit_path(args.junitxml)
    except UsageError as exc:
        print(f"kraft test: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return 0 if exc.code in (0, None) else EXIT_USAGE
    except (targets.UnknownTarget, KeyError, ImportError) as exc:
        message = exc.args[0] if exc.args else str(exc)
        print(f"kraft test: {message}", file=sys.stderr)
        return EXIT_USAGE
    print(note, file=sys.stderr)
    spares = config.spare_nodes()
    print(f"kraft test: {config.test_name}, {len(config.nodes)} nodes"
          f"{f' + {len(spares)} spares' if spares else ''}"
          f"{f' + {config.brokers} brokers' if config.brokers else ''}, nemesis "
          f"{'+'.join(config.nemesis) or 'none'}, {config.time_limit:g}s, seed {config.seed}",
          file=sys.stderr)
    if warning := too_short(config):
        print(f"kraft test: warning: {warning}", file=sys.stderr)
    _interrupt_once()
    workload = workloads.get(config.workload)
    done: list[tuple[Outcome, dict[str, Any], float]] = []
    for i in range(args.test_count):
        one = config if i == 0 else dataclasses.replace(config, seed=config.seed + i)
        if args.test_count > 1:
            print(f"kraft test: run {i + 1} of {args.test_count}, seed {one.seed}",
                  file=sys.stderr)
        started = time.monotonic()
        try:
            outcome = run(one, backend, target, workload)
        except OSError as exc:  # e.g. the results directory cannot be written
            print(f"kraft test: {exc}", file=sys.stderr)
            return 3
        print(outcome.summary)
        test = json.loads((outcome.run_dir / TEST).read_text(encoding="utf-8"))
        done.append((outcome, test, time.monotonic() - started))
        if outcome.results.get("error") == "interrupted":
            break  # Ctrl-C ends the series, not only the run
    if args.test_count > 1:
        print(tally(done, args.test_count))
    if args.junitxml:
        from harness import junit

        try:
            junit.write(Path(args.junitxml), done)
        except OSError as exc:
            print(f"kraft test: --junitxml: cannot write {args.junitxml}: "
                  f"{exc.strerror or exc}", file=sys.stderr)
            return 3
        print(f"junit: {Path(args.junitxml).resolve()}")
    return series_exit([outcome.exit_code for outcome, _, _ in done])


def series_exit(codes: list[int]) -> int:
    """One exit for a series: a finding first (1), then a run that failed (3), then a verdict
    left open (2); 0 only when every run was VALID."""
    for code in (1, 3, 2):
        if code in codes:
            return code
    return 0 if codes and set(codes) == {0} else 3


def tally(done: list[tuple[Outcome, dict[str, Any], float]], asked: int) -> str:
    """Jepsen's test-all summary: how many runs came to each verdict, and the runs to look at."""
    words = {0: "VALID", 1: "INVALID", 2: "UNKNOWN", 3: "FAILED"}
    counts = Counter(words.get(outcome.exit_code, "FAILED") for outcome, _, _ in done)
    lines = [f"series: {len(done)} of {asked} runs: "
             + ", ".join(f"{n} {verdict}" for verdict, n in counts.items())]
    for outcome, test, _ in done:
        if outcome.exit_code != 0:
            why = (", ".join(outcome.results.get("anomaly_types") or [])
                   or outcome.results.get("reason") or outcome.results.get("error") or "")
            lines.append(f"  seed {test.get('seed')}: {words.get(outcome.exit_code, 'FAILED')}"
                         f"{f' ({str(why)[:120]})' if why else ''}  {outcome.run_dir}")
    return "\n".join(lines)
