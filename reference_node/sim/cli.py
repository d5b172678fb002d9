"""`kraft simulate`: run the deterministic simulation over a range of seeds.

Exit 0 when every seed keeps every invariant and liveness holds, 1 on the first violation (printed
with its seed, the last events and the command that replays that seed), 64 on bad usage. At the
end it says how many snapshots the seeds wrote and installed (KIP-630 runs in every seed, with
small thresholds: a run that installed none did not exercise it), and, with the `membership` fault,
how many voter changes (KIP-853) were committed and refused; with `--brokers N`, what the brokers did
(their state changes, the controller's records and refusals, the stale registrations replayed).
`--faults` takes draw weights (`crash:3,partition-halves:3,drop`) or the `heavy` mix; a weighted
run prints its weights beside its result, as they shape every seed's schedule.
`--coverage` runs the seeds under branch coverage and prints which decisions of the core they never
took (sim/coverage_report.py); without it nothing is measured and the run is as fast as ever.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from reference_node.raft.config import Unsafe
from reference_node.sim.brokers import BrokerStats
from reference_node.sim.faults import FAULTS, MIXES, Weights, parse_fault_mix
from reference_node.sim.host import SnapshotStats
from reference_node.sim.membership import MembershipStats
from reference_node.sim.simulation import SimConfig, SimResult, run_seed

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 64


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def parse_seeds(text: str) -> list[int]:
    """`A-B` (inclusive) or a comma list of seeds (and ranges)."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part[1:]:
                lo_text, hi_text = part.split("-", 1)
                lo, hi = int(lo_text), int(hi_text)
                if hi < lo:
                    raise UsageError(f"empty seed range {part!r}")
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise UsageError(f"bad --seeds {text!r}: want A-B or a comma list of integers") from None
    if not seeds:
        raise UsageError("--seeds names no seed")
    return seeds


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kraft simulate",
        description="Deterministic simulation of KRaft cores under faults, checking Raft's "
        "invariants after every event.",
        epilog="faults: " + ", ".join(FAULTS) + "; unsafe switches: " + Unsafe.names(),
    )
    p.add_argument("--nodes", type=int, default=5, help="voters (default 5)")
    p.add_argument("--observers", type=int, default=1, help="observers (default 1)")
    p.add_argument("--brokers", type=int, default=0,
                   help="brokers: observers that register and heartbeat, with the broker-* "
                   "faults (default 0)")
    p.add_argument("--seeds", default="0-9", help="A-B or a comma list (default 0-9)")
    p.add_argument("--faults", default="all",
                   help="all, none, " + ", ".join(MIXES) + " (a weighted mix: partitions and "
                   "crashes drawn more often), or a comma list of fault names, each with an "
                   "optional draw weight: crash:3,partition-halves:3,drop (weight 1 when left out)")
    p.add_argument("--unsafe", default="", help="comma list of unsafe switches to turn on")
    p.add_argument("--time", type=float, default=30.0, help="simulated seconds per seed (30)")
    p.add_argument("--trace", help="write the event trace of the run to this file")
    p.add_argument("--no-prevote", action="store_true", help="turn pre-vote (KIP-996) off")
    p.add_argument("--clients", type=int, default=3, help="concurrent simulated clients (3)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--coverage", action="store_true",
                   help="measure branch coverage of reference_node/raft/ (without sim/) and print "
                   "every branch the seeds never took (needs coverage.py, in the dev extra)")
    return p


def _config(args: argparse.Namespace) -> SimConfig:
    if not 1 <= args.nodes <= 50:
        raise UsageError(f"--nodes must be 1..50, got {args.nodes}")
    if not 0 <= args.observers <= 50:
        raise UsageError(f"--observers must be 0..50, got {args.observers}")
    if not 0 <= args.brokers <= 50:
        raise UsageError(f"--brokers must be 0..50, got {args.brokers}")
    if args.time <= 0:
        raise UsageError(f"--time must be positive, got {args.time}")
    if args.clients < 1:
        raise UsageError(f"--clients must be at least 1, got {args.clients}")
    try:
        faults, weights = parse_fault_mix(args.faults)
        unsafe = Unsafe.parse(args.unsafe)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return SimConfig(
        voters=args.nodes, observers=args.observers, faults=faults, weights=weights,
        unsafe=unsafe,
        time_ms=int(args.time * 1000), pre_vote=not args.no_prevote, clients=args.clients,
        trace=bool(args.trace), brokers=args.brokers,
    )


def replay_command(args: argparse.Namespace, seed: int) -> str:
    parts = ["kraft simulate", f"--nodes {args.nodes}", f"--observers {args.observers}",
             f"--seeds {seed}", f"--faults {args.faults}", f"--time {args.time:g}"]
    if args.brokers:
        parts.insert(3, f"--brokers {args.brokers}")
    if args.unsafe:
        parts.append(f"--unsafe {args.unsafe}")
    if args.no_prevote:
        parts.append("--no-prevote")
    if args.clients != 3:
        parts.append(f"--clients {args.clients}")
    return " ".join(parts)


def report_violation(result: SimResult, args: argparse.Namespace) -> None:
    v = result.violation
    assert v is not None
    out = sys.stdout
    print(f"VIOLATION {v.invariant} (seed {result.seed}): {v.detail}", file=out)
    print(f"last {len(result.last_events)} events:", file=out)
    for line in result.last_events:
        print(f"  {line}", file=out)
    print(f"replay: {replay_command(args, result.seed)} --trace trace-{result.seed}.txt", file=out)


def main(argv: list[str]) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        seeds = parse_seeds(args.seeds)
        config = _config(args)
    except UsageError as exc:
        print(f"kraft simulate: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.coverage:
        return _main_measured(args, seeds, config)
    return run_seeds(args, seeds, config, run_seed)


def _main_measured(args: argparse.Namespace, seeds: list[int], config: SimConfig) -> int:
    try:
        from reference_node.sim.coverage_report import Measurement
    except ImportError as exc:
        print(f"kraft simulate: --coverage needs coverage.py (pip install -e '.[dev]'): {exc}",
              file=sys.stderr)
        return EXIT_USAGE
    with Measurement() as measurement:
        code = run_seeds(args, seeds, measurement.sim_config(config), measurement.run_seed)
    for line in measurement.report().render():
        print(line)
    return code


def run_seeds(args: argparse.Namespace, seeds: list[int], config: SimConfig,
              run: Callable[[int, SimConfig], SimResult]) -> int:
    """Each seed in turn until the first violation; the exit code."""
    trace_lines: list[str] = []
    started = time.monotonic()
    events = 0
    snapshots = SnapshotTotals()
    membership: MembershipStats | None = MembershipStats() if config.membership else None
    brokers: BrokerStats | None = BrokerStats() if config.brokers else None
    for i, seed in enumerate(seeds):
        result = run(seed, config)
        events += result.events
        snapshots.add(result.snapshots)
        if membership is not None and result.membership is not None:
            membership.add(result.membership)
        if brokers is not None and result.brokers is not None:
            brokers.add(result.brokers)
        if result.trace is not None:
            if len(seeds) > 1:
                trace_lines.append(f"# seed {seed}")
            trace_lines.extend(result.trace)
        if not args.quiet:
            print(f"\rseed {seed} ({i + 1}/{len(seeds)}): {result.events} events, "
                  f"{result.acked} appends acked, {result.reads} reads", end="", file=sys.stderr)
        if not result.ok:
            if not args.quiet:
                print(file=sys.stderr)
            if args.trace:
                _write_trace(args.trace, trace_lines)
            report_violation(result, args)
            _print_weights(config.weights)
            print(snapshots.line())
            _print_membership(membership)
            if brokers is not None:
                print(brokers.line())
            return EXIT_VIOLATION
    elapsed = time.monotonic() - started
    if not args.quiet:
        print(file=sys.stderr)
    if args.trace:
        _write_trace(args.trace, trace_lines)
    print(f"ok: {len(seeds)} seeds, {events} events in {elapsed:.1f} s "
          f"({events / max(elapsed, 1e-9):.0f} events/s); no violation, liveness held")
    _print_weights(config.weights)
    print(snapshots.line())
    _print_membership(membership)
    if brokers is not None:
        print(brokers.line())
    return EXIT_OK


def _print_weights(weights: Weights) -> None:
    """The draw weights of a weighted run (nothing when every fault is drawn alike): the run's
    schedule depends on them as much as on the seed."""
    if weights:
        listed = ", ".join(f"{name}:{weight}" for name, weight in weights)
        print(f"fault weights: {listed} (every other fault 1)")


def _print_membership(stats: MembershipStats | None) -> None:
    """What the membership nemesis did over the seeds run (nothing when it was off)."""
    if stats is None:
        return
    done = stats.committed
    refused = ", ".join(f"{n} {name}" for name, n in sorted(stats.refused.items()))
    print(f"membership: {sum(done.values())} voter changes committed ({done['add']} adds, "
          f"{done['remove'] + done['remove-leader']} removals, {done['remove-leader']} of the "
          f"leader itself), {sum(stats.refused.values())} refused ({refused or 'none'}); "
          f"{stats.restarts} observer restarts, {stats.wipes} disks wiped")


class SnapshotTotals:
    """Snapshot figures summed over the seeds run."""

    def __init__(self) -> None:
        self.seeds = 0
        self.total = SnapshotStats()
        self.seeds_installing = 0

    def add(self, stats: SnapshotStats) -> None:
        self.seeds += 1
        self.total.written += stats.written
        self.total.installed += stats.installed
        self.total.refused += stats.refused
        self.total.logs_invalid += stats.logs_invalid
        self.total.refused_starts += stats.refused_starts
        self.seeds_installing += stats.installed > 0

    def line(self) -> str:
        t = self.total
        extra = "".join((
            f", {t.refused} downloads refused" if t.refused else "",
            f", {t.logs_invalid} logs found invalid at start ({t.refused_starts} starts "
            "refused)" if t.logs_invalid else "",
        ))
        return (f"snapshots: {t.written} written, {t.installed} installed by followers "
                f"(in {self.seeds_installing} of {self.seeds} seeds){extra}")


def _write_trace(path: str, lines: list[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
        f.write("\n")
