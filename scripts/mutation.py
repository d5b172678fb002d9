"""Mutation testing of the Raft core: a seeded sample of mutmut's mutants against the simulator.

    python scripts/mutation.py --sample 120 --seed 1 --out results/mutation.json
    python scripts/mutation.py --module election --module replication --sample 40 --seed 7 \\
        --sim-seeds 6 --out /tmp/mutation.json

The core (`reference_node/raft/`; the simulator, beside it in `reference_node/sim/`, is the
test, not the subject) is mutated by mutmut 3 (docs/mutation-testing.md says why mutmut and not
cosmic-ray). A mutant must fail the test that `[tool.mutmut]` in pyproject.toml selects: the
simulator over `--sim-seeds` seeds of 5 nodes with every fault, with and without pre-vote
(tests/test_mutation_sim_budget.py, written into the workspace by this script, stopping at the
first violation), plus the fast unit tests of tests/raft. The whole core has thousands of mutants;
a CI run takes a seeded random sample of them, so that the same `--sample K --seed S` on the same
code tries the same mutants (the before/after figures of a change compare like with like).

Everything happens in a throwaway copy of the project (mutmut writes its `mutants/` tree beside
the sources, which would otherwise land in the work tree). One core: mutmut runs one mutant at a
time (`--max-children 1`). Prints, and writes as JSON to `--out`: mutants generated, sampled,
killed, survived, timed out, the score with a 95% (Wilson) interval, and each survivor with its
file:line and diff. The exit status is 1 only when the score is below `--min-score`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = Path("reference_node/raft")
NOT_MUTATED = ("__init__.py",)
"""`__init__` only re-exports (the simulator, the test, lives beside the core in reference_node/sim/)."""

SIM_BUDGET_TEST = Path("tests/test_mutation_sim_budget.py")
SIM_BUDGET_SOURCE = '''\
"""The simulator as a mutant's test: 5 nodes, every fault, with and without pre-vote."""
import os

import pytest

from reference_node.sim.simulation import SimConfig, run_seed

SEEDS = int(os.environ.get("KRAFT_MUTATION_SIM_SEEDS", "4"))


@pytest.mark.parametrize("pre_vote", [True, False], ids=["prevote", "no-prevote"])
@pytest.mark.parametrize("seed", range(SEEDS))
def test_simulated_seed_keeps_every_invariant(seed: int, pre_vote: bool) -> None:
    result = run_seed(seed, SimConfig(voters=5, pre_vote=pre_vote))
    assert result.ok, result.violation
'''

# mutmut's exit codes of a mutant's test run, grouped as this report counts them
# (mutmut.stats.status_by_exit_code has the full table).
KILLED_CODES = {1, 3}
SURVIVED_CODES = {0}
TIMEOUT_CODES = {36, -24, 24, 152, 255}
NO_TESTS_CODES = {5, 33}

MUTANT_NAME = re.compile(
    r"^(?P<module>[\w.]+)\.x(?:ǁ(?P<cls>\w+)ǁ|_)(?P<function>\w+?)__mutmut_(?P<number>\d+)$"
)


@dataclass(frozen=True, slots=True)
class MutantName:
    """A mutmut 3 mutant name, `pkg.module.x_func__mutmut_3` or `pkg.module.xǁClassǁmethod__mutmut_3`."""

    module: str
    cls: str | None
    function: str
    number: int

    @property
    def path(self) -> Path:
        return Path(*self.module.split(".")).with_suffix(".py")


def parse_mutant_name(name: str) -> MutantName:
    match = MUTANT_NAME.match(name)
    if match is None:
        raise ValueError(f"not a mutmut 3 mutant name: {name!r}")
    return MutantName(match["module"], match["cls"], match["function"], int(match["number"]))


def sample_mutants(names: list[str], k: int, seed: int) -> list[str]:
    """K names chosen by `seed`, in sorted order; all of them when k is 0 or at least their
    number. Each name is ranked by a hash of (seed, name) and the K lowest are kept: the choice
    does not depend on the order mutmut lists them in, and a change to one function of the core
    leaves the rest of the sample as it was (a plain random.sample over the list would redraw
    everything once one mutant is added), so before/after figures compare like with like."""
    ordered = sorted(set(names))
    if k <= 0 or k >= len(ordered):
        return ordered
    rank = {name: hashlib.sha256(f"{seed}:{name}".encode()).hexdigest() for name in ordered}
    return sorted(sorted(ordered, key=rank.__getitem__)[:k])


def wilson_interval(successes: int, trials: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion: unlike the normal approximation it stays
    inside [0, 1] and is honest at the extremes (a 100% sample of 120 is not a certain 100%)."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def status_of(exit_code: int | None) -> str:
    if exit_code in KILLED_CODES:
        return "killed"
    if exit_code in SURVIVED_CODES:
        return "survived"
    if exit_code in TIMEOUT_CODES:
        return "timeout"
    if exit_code in NO_TESTS_CODES:
        return "no tests"
    if exit_code is None:
        return "not checked"
    return "suspicious"


@dataclass(slots=True)
class Survivor:
    name: str
    status: str
    location: str
    diff: str


@dataclass(slots=True)
class Report:
    command: str
    commit: str
    modules: list[str]
    sim_seeds: int
    seed: int
    generated: int
    sampled: int
    counts: dict[str, int]
    score: float
    """(killed + timed out) / sampled: a mutant that hangs the simulator is detected too."""
    ci95: tuple[float, float]
    seconds: float
    seconds_per_mutant: float
    survivors: list[Survivor] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)


def summarise(statuses: dict[str, str]) -> tuple[dict[str, int], float, tuple[float, float]]:
    counts = {s: 0 for s in ("killed", "survived", "timeout", "no tests", "suspicious",
                             "not checked")}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    detected = counts["killed"] + counts["timeout"]
    total = len(statuses)
    return counts, (detected / total if total else 0.0), wilson_interval(detected, total)


def module_paths(modules: list[str]) -> list[str]:
    """`election` or `reference_node/raft/election.py` -> the core files to mutate (all of the
    core when none is given)."""
    core = sorted(p for p in (ROOT / CORE).glob("*.py") if p.name not in NOT_MUTATED)
    if not modules:
        return [str(p.relative_to(ROOT)) for p in core]
    chosen = []
    for module in modules:
        stem = Path(module).stem
        matches = [p for p in core if p.stem == stem]
        if not matches:
            raise SystemExit(f"no core module {module!r} (one of {', '.join(p.stem for p in core)})")
        chosen += [str(p.relative_to(ROOT)) for p in matches]
    return chosen


def toml_value(value: object) -> str:
    """The strings, numbers, booleans and lists of them that the two tool sections hold: JSON
    spells those the way TOML does."""
    return json.dumps(value)


def workspace_pyproject(only_mutate: list[str]) -> str:
    """The project's pytest and mutmut settings, with the module filter of this run."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    mutmut = dict(tool["mutmut"], only_mutate=only_mutate)
    lines = ["[tool.pytest.ini_options]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in tool["pytest"]["ini_options"].items()]
    lines += ["", "[tool.mutmut]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in mutmut.items()]
    return "\n".join(lines) + "\n"


def make_workspace(work: Path, only_mutate: list[str]) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "reference_node", work / "reference_node", ignore=ignore)
    (work / "tests").mkdir()
    shutil.copytree(ROOT / "tests/raft", work / "tests/raft", ignore=ignore)
    shutil.copy(ROOT / "tests/conftest.py", work / "tests/conftest.py")
    (work / SIM_BUDGET_TEST).write_text(SIM_BUDGET_SOURCE)
    (work / "pyproject.toml").write_text(workspace_pyproject(only_mutate))


GENERATE = """
import os
from mutmut.__main__ import (copy_also_copy_files, copy_src_dir, create_mutants,
                             set_mutant_under_test, setup_source_paths)
set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
copy_src_dir(); copy_also_copy_files(); setup_source_paths(); create_mutants(1)
"""


def generate(work: Path) -> list[str]:
    """Every mutant of the selected modules, by name (mutmut's `run` without the running)."""
    subprocess.run([sys.executable, "-c", GENERATE], cwd=work, check=True,
                   stdout=subprocess.DEVNULL)
    return sorted(name for _, name, _ in read_results(work))


def read_results(work: Path) -> list[tuple[Path, str, int | None]]:
    """(source path, mutant name, exit code) from mutmut's per-file `.meta` records."""
    out = []
    for meta in sorted((work / "mutants").rglob("*.py.meta")):
        source = meta.relative_to(work / "mutants").with_suffix("")
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            out.append((source, name, code))
    return out


def locate(work: Path, name: str, diff: str) -> str:
    """file:line of a mutant's first changed line: mutmut's diff covers the function only, so
    the removed line is searched for in the original file from the function's `def` on."""
    mutant = parse_mutant_name(name)
    source = (work / mutant.path).read_text().splitlines()
    removed = next((line[1:].strip() for line in diff.splitlines()
                    if line.startswith("-") and not line.startswith("---")), "")
    start = 0
    if mutant.cls is not None:
        start = next((i for i, line in enumerate(source)
                      if re.match(rf"class {mutant.cls}\b", line)), 0)
    start = next((i for i in range(start, len(source))
                  if re.search(rf"def {mutant.function}\(", source[i])), start)
    line = next((i for i in range(start, len(source)) if removed and source[i].strip() == removed),
                start)
    return f"{mutant.path}:{line + 1}"


def show(work: Path, name: str) -> str:
    shown = subprocess.run(["mutmut", "show", name], cwd=work, capture_output=True, text=True)
    return "\n".join(line for line in shown.stdout.splitlines() if not line.startswith("# "))


def git_state() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "reference_node"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    return f"{head}{' + uncommitted changes under reference_node/' if dirty else ''}"


def run(args: argparse.Namespace, work: Path) -> Report:
    started = time.monotonic()
    modules = module_paths(args.module)
    make_workspace(work, modules)
    generated = generate(work)
    chosen = sample_mutants(generated, args.sample, args.seed)
    print(f"mutants generated: {len(generated)}, sampled: {len(chosen)} (seed {args.seed})",
          flush=True)
    env = dict(os.environ, KRAFT_MUTATION_SIM_SEEDS=str(args.sim_seeds))
    mutated = time.monotonic()
    subprocess.run(["mutmut", "run", "--max-children", "1", *chosen], cwd=work, env=env,
                   stdout=None if args.verbose else subprocess.DEVNULL, check=False)
    mutating = time.monotonic() - mutated
    codes = {name: code for _, name, code in read_results(work)}
    statuses = {name: status_of(codes.get(name)) for name in chosen}
    counts, score, ci95 = summarise(statuses)
    survivors = []
    for name, status in statuses.items():
        if status in ("killed", "timeout"):
            continue
        diff = show(work, name)
        survivors.append(Survivor(name, status, locate(work, name, diff), diff))
    return Report(
        command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), commit=git_state(),
        modules=modules, sim_seeds=args.sim_seeds, seed=args.seed, generated=len(generated),
        sampled=len(chosen), counts=counts, score=score, ci95=ci95,
        seconds=round(time.monotonic() - started, 1),
        seconds_per_mutant=round(mutating / max(1, len(chosen)), 2),
        survivors=survivors, statuses=statuses,
    )


def print_report(report: Report) -> None:
    c = report.counts
    low, high = report.ci95
    print(f"measured: {report.commit}; sim seeds per mutant: {report.sim_seeds} x 2 (pre-vote on/off)")
    print(f"mutants generated: {report.generated}, sampled: {report.sampled}, "
          f"killed: {c['killed']}, survived: {c['survived']}, timed out: {c['timeout']}, "
          f"other: {c['no tests'] + c['suspicious'] + c['not checked']}")
    print(f"score: {report.score:.1%} (95% CI {low:.1%}-{high:.1%}); "
          f"{report.seconds:.0f} s, {report.seconds_per_mutant} s per mutant")
    for survivor in report.survivors:
        print(f"\n{survivor.status}: {survivor.location}  {survivor.name}\n{survivor.diff}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=120,
                        help="mutants to try, drawn at random (0: all of them; default 120)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the draw (default 1)")
    parser.add_argument("--module", action="append", default=[],
                        help="a core module to mutate (election, core, ...); repeatable; "
                             "default: the whole core")
    parser.add_argument("--sim-seeds", type=int, default=4,
                        help="simulated seeds per mode a mutant must survive (default 4)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON report")
    parser.add_argument("--workdir", type=Path,
                        help="the project copy to mutate in (kept); default: a temporary one")
    parser.add_argument("--min-score", type=float, default=0.0,
                        help="exit 1 when the score is below this fraction (default 0: never)")
    parser.add_argument("--verbose", action="store_true", help="show mutmut's own progress")
    args = parser.parse_args(argv)
    if args.workdir is not None:
        if args.workdir.exists() and any(args.workdir.iterdir()) and \
                not (args.workdir / SIM_BUDGET_TEST).exists():
            parser.error(f"--workdir {args.workdir} is not empty and not a workspace of ours")
        shutil.rmtree(args.workdir, ignore_errors=True)
        args.workdir.mkdir(parents=True)
        report = run(args, args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="kraft-mutation.") as work:
            report = run(args, Path(work))
    print_report(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(asdict(report), indent=2) + "\n")
    if report.score < args.min_score:
        print(f"score {report.score:.1%} is below --min-score {args.min_score:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
