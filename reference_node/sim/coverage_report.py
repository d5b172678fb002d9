"""Branch coverage of the Raft core by simulated seeds: what `kraft simulate --coverage` prints.

Theory of operation: a seed that never steers a cluster into a state where the core decides cannot
catch a bug in that decision, so the report lists, per module and function, every branch the seeds
never took and every line they never ran. The seeds run in this process under coverage.py (branch
coverage) measuring `reference_node/raft/` without the simulator (`sim/`) and the command line.

Coverage must be on before any of the core's code runs, its module top levels (the `def`s and
`class`es) included, but `kraft simulate` has imported the simulator, hence the core, before it
reads its flags. So `Measurement` sets the imported `reference_node.raft` modules aside, starts
coverage, imports a fresh copy of the simulator for the run, and when stopped puts the original
modules back: the rest of the process (a test session) keeps the classes it already holds. A seed
run by the fresh copy must be configured with the fresh copy's classes (`sim_config`).

The report is a function of the coverage data alone, sorted by module and line, so the same seeds
print the same report.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import coverage

import reference_node.raft
from reference_node.sim.simulation import SimConfig, SimResult

PACKAGE = "reference_node.raft"
RAFT_DIR = Path(reference_node.raft.__file__).resolve().parent
ROOT = RAFT_DIR.parent.parent
"""Paths are shown relative to the checkout (`reference_node/raft/core.py`)."""
SOURCE_SHOWN = 60
"""How many characters of a line's source the report quotes."""


@dataclass(frozen=True, slots=True, order=True)
class Branch:
    """A branch never taken: from `line` to `target` (a negative target leaves the function)."""

    line: int
    target: int

    def shown(self, file: str) -> str:
        to = "exit" if self.target < 0 else str(self.target)
        return f"{file}:{self.line} -> {to}"


@dataclass(frozen=True, slots=True)
class FunctionGaps:
    """What one function (or a module's top level, named `(module)`) never did."""

    name: str
    branches: tuple[Branch, ...]
    lines: tuple[tuple[int, int], ...]
    """Runs of statements never run, as (first, last) line numbers."""

    @property
    def first_line(self) -> int:
        return min([b.line for b in self.branches] + [first for first, _ in self.lines])


@dataclass(frozen=True, slots=True)
class ModuleCoverage:
    path: str
    branches: int
    branches_taken: int
    statements: int
    statements_run: int
    gaps: tuple[FunctionGaps, ...]

    @property
    def untaken(self) -> int:
        return self.branches - self.branches_taken


@dataclass(frozen=True, slots=True)
class CoverageReport:
    seeds: int
    modules: tuple[ModuleCoverage, ...]

    @property
    def branches(self) -> int:
        return sum(m.branches for m in self.modules)

    @property
    def branches_taken(self) -> int:
        return sum(m.branches_taken for m in self.modules)

    @property
    def statements(self) -> int:
        return sum(m.statements for m in self.modules)

    @property
    def statements_run(self) -> int:
        return sum(m.statements_run for m in self.modules)

    def render(self) -> list[str]:
        """The table, then every untaken branch and unrun line by module and function."""
        out = [
            f"coverage of {PACKAGE.replace('.', '/')}/ "
            f"over {self.seeds} seed(s):",
            f"  {'module':<36} {'branches taken':>20} {'lines run':>20}",
        ]
        for m in self.modules:
            out.append(_table_row(m.path, m.branches_taken, m.branches,
                                  m.statements_run, m.statements))
        out.append(_table_row("total", self.branches_taken, self.branches,
                              self.statements_run, self.statements))
        gaps = [m for m in self.modules if m.gaps]
        if not gaps:
            out.append("every branch taken, every line run")
            return out
        out.append("never taken, by module and function (file:line -> line: a branch never "
                   "taken; file:line-line: lines never run):")
        for m in gaps:
            out.append(f"{m.path}: {m.untaken} branch(es) untaken")
            out.extend(_gap_lines(m))
        return out


def _table_row(name: str, taken: int, total: int, run: int, statements: int) -> str:
    return (f"  {name:<36} {taken:>6}/{total:<5} {_percent(taken, total):>7}"
            f" {run:>6}/{statements:<5} {_percent(run, statements):>6}")


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _gap_lines(module: ModuleCoverage) -> list[str]:
    """A function's gaps in line order. A branch from a line never run is not listed on its own:
    the run of lines says it, with how many branches it holds."""
    source = (ROOT / module.path).read_text(encoding="utf-8").splitlines()
    file = Path(module.path).name

    def quoted(line: int) -> str:
        text = source[line - 1].strip() if 0 < line <= len(source) else ""
        return text if len(text) <= SOURCE_SHOWN else text[: SOURCE_SHOWN - 3] + "..."

    out: list[str] = []
    for function in module.gaps:
        out.append(f"  {function.name}")
        items: list[tuple[int, str]] = []
        inside = {line for first, last in function.lines for line in range(first, last + 1)}
        for b in function.branches:
            if b.line not in inside:
                items.append((b.line, f"    {b.shown(file):<28} {quoted(b.line)}"))
        for first, last in function.lines:
            where = f"{file}:{first}" + (f"-{last}" if last != first else "")
            held = sum(first <= b.line <= last for b in function.branches)
            never = f"never run ({held} branch{'es' if held > 1 else ''})" if held else "never run"
            items.append((first, f"    {where:<28} {never}: {quoted(first)}"))
        out.extend(text for _, text in sorted(items))
    return out


class Measurement:
    """Coverage of the core while seeds run on a fresh import of the simulator (module doc)."""

    def __init__(self) -> None:
        self._coverage = coverage.Coverage(
            data_file=None, branch=True, source=[str(RAFT_DIR)], config_file=False,
        )
        # The set-aside modules were imported unmeasured on purpose: no warning about them.
        self._coverage.set_option("run:disable_warnings", ["module-not-measured"])
        self._saved: dict[str, ModuleType] = {}
        self._simulation: ModuleType | None = None
        self._seeds = 0

    def start(self) -> None:
        self._saved = {name: module for name, module in sys.modules.items() if _is_raft(name)}
        for name in self._saved:
            del sys.modules[name]
        self._coverage.start()
        try:
            self._simulation = importlib.import_module(f"{SIMULATOR}.simulation")
        except BaseException:
            self.stop()  # the process gets its modules back, and no tracer is left running
            raise

    def stop(self) -> None:
        self._coverage.stop()
        for name in [name for name in sys.modules if _is_raft(name)]:
            del sys.modules[name]
        sys.modules.update(self._saved)
        # Importing the fresh copy rebound the parent package's attributes; give the originals back.
        for package in (PACKAGE, SIMULATOR):
            if package in self._saved:
                sys.modules["reference_node"].__dict__[package.rpartition(".")[2]] = \
                    self._saved[package]
        self._simulation = None

    def __enter__(self) -> Measurement:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _fresh(self) -> ModuleType:
        if self._simulation is None:
            raise RuntimeError("the measurement is not running")
        return self._simulation

    def sim_config(self, config: SimConfig) -> SimConfig:
        """`config` rebuilt from the fresh copy's classes (its `Unsafe` members are others)."""
        fresh = self._fresh()
        values: dict[str, Any] = {f.name: getattr(config, f.name)
                                  for f in dataclasses.fields(config)}
        values["unsafe"] = fresh.Unsafe.of(switch.value for switch in config.unsafe)
        return cast(SimConfig, fresh.SimConfig(**values))

    def run_seed(self, seed: int, config: SimConfig) -> SimResult:
        """One seed on the fresh copy; `config` from `sim_config`."""
        run = cast(Callable[[int, SimConfig], SimResult], self._fresh().run_seed)
        self._seeds += 1
        return run(seed, config)

    def report(self) -> CoverageReport:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "coverage.json"
            self._coverage.json_report(outfile=str(path))
            data = json.loads(path.read_text(encoding="utf-8"))
        return report_from_json(data, self._seeds)


SIMULATOR = "reference_node.sim"
FRESH = (PACKAGE, SIMULATOR, "reference_node.storage")
"""The packages imported afresh for a measured run: the core, the simulator that drives it (whose
modules hold the set-aside core's classes otherwise), and the storage its simulator reads
snapshots with (which builds the core's `Image` and `VoterSet`: the set-aside copy's would not be
the fresh core's classes, and an image decoded at a restart would not recognise its entry kinds)."""


def _is_raft(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in FRESH)


def report_from_json(data: dict[str, Any], seeds: int) -> CoverageReport:
    """The report from coverage.py's JSON report (format 3: with per-function regions)."""
    modules = []
    for file_name, file in data["files"].items():
        summary = file["summary"]
        modules.append(ModuleCoverage(
            path=_shown_path(file_name),
            branches=summary.get("num_branches", 0),
            branches_taken=summary.get("covered_branches", 0),
            statements=summary["num_statements"],
            statements_run=summary["covered_lines"],
            gaps=_function_gaps(file),
        ))
    return CoverageReport(seeds=seeds, modules=tuple(sorted(modules, key=lambda m: m.path)))


def _shown_path(file_name: str) -> str:
    path = Path(file_name)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        return path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def _function_gaps(file: dict[str, Any]) -> tuple[FunctionGaps, ...]:
    executed = set(file["executed_lines"])
    gaps = []
    for name, region in file.get("functions", {}).items():
        branches = tuple(sorted(Branch(a, b) for a, b in region.get("missing_branches", [])))
        lines = tuple(_runs(region["missing_lines"], executed))
        if branches or lines:
            gaps.append(FunctionGaps(name=name or "(module)", branches=branches, lines=lines))
    return tuple(sorted(gaps, key=lambda g: (g.first_line, g.name)))


def _runs(missing: Iterable[int], executed: set[int]) -> list[tuple[int, int]]:
    """Missing statements joined into runs that no executed statement interrupts."""
    runs: list[tuple[int, int]] = []
    for line in sorted(missing):
        if runs and not any(run in executed for run in range(runs[-1][1] + 1, line)):
            runs[-1] = (runs[-1][0], line)
        else:
            runs.append((line, line))
    return runs
