"""The layers import one way: each package imports nothing from the packages it must not know.

    contracts    the shared contracts (backend, target, workload, history op, generators)
    checkers     pure functions of a history             -> contracts
    nemesis      faults on a schedule                    -> contracts
    workloads    ops and the checker that judges them    -> contracts, checkers
    harness      the runner, backends, targets, CLIs     -> everything above
    reference_node  the system under test, which runs without the harness

Every import is read from the source (ast), wherever it stands (top of the module, inside a
function, under TYPE_CHECKING, relative) as well as `importlib.import_module("...")` and
`__import__("...")` with a literal name, so a lazy import cannot hide an arrow.

Inside a package the modules import one way too: no circle of modules, however long, and a
TYPE_CHECKING import counts, since a circle closed that way is still two modules that cannot be
read, or changed, one without the other.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("contracts", "checkers", "nemesis", "workloads", "harness", "reference_node")

# package -> the top-level packages it must not import (nothing shipped imports examples/: it
# shows a target written outside the harness, docs/your-own-target.md)
FORBIDDEN: dict[str, frozenset[str]] = {
    "contracts": frozenset({"harness", "nemesis", "workloads", "checkers", "reference_node",
                            "testkit", "tests", "examples"}),
    "checkers": frozenset({"harness", "nemesis", "workloads", "testkit", "tests", "examples"}),
    "nemesis": frozenset({"harness", "workloads", "checkers", "testkit", "tests", "examples"}),
    "workloads": frozenset({"harness", "nemesis", "testkit", "tests", "examples"}),
    "harness": frozenset({"testkit", "tests", "examples"}),
    "reference_node": frozenset({"harness", "nemesis", "workloads", "checkers", "contracts",
                                 "testkit", "tests", "examples"}),
}

# Inside a package, modules that stay below others: module -> what it must not import. The Raft
# core's handlers see the core through `CoreOps` (ops.py), so nothing below them names one; the
# simulator's shared types sit below its host and its nemesis, which they would otherwise close
# a circle with.
_RAFT = "reference_node.raft"
_SIM = "reference_node.sim"
_HANDLERS_AND_CORE = frozenset(f"{_RAFT}.{m}" for m in (
    "election", "replication", "membership", "snapshots", "controller", "lifecycle", "core"))
BELOW: dict[str, frozenset[str]] = {
    **{f"{_RAFT}.{m}": _HANDLERS_AND_CORE
       for m in ("messages", "voters", "records", "image", "api", "states", "ops")},
    **{f"{_SIM}.{m}": frozenset(f"{_SIM}.{u}" for u in ("host", "nemesis", "simulation"))
       for m in ("node", "powers", "fault_state", "evidence", "brokers", "shapes", "oracle")},
}

# moved whole into contracts/ (or under harness/backends/): no re-export shim may stay behind
MOVED = ("harness.history", "harness.generator", "harness.ssh", "harness.backends.base",
         "harness.targets.base")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool = False,
            submodules: Collection[str] = frozenset()) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import in `source`, relative ones made absolute. With
    `submodules`, `from pkg import name` yields pkg.name where that is one of them, and pkg only
    for the names that are not."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            named = [f"{base}.{alias.name}" for alias in node.names]
            if not all(name in submodules for name in named):
                yield node.lineno, base
            for name in named:
                if name in submodules:
                    yield node.lineno, name
        elif isinstance(node, ast.Call) and _names_a_module(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                yield node.lineno, first.value


def _names_a_module(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def modules(package: str, root: Path = ROOT) -> list[Path]:
    return sorted((root / package).rglob("*.py"))


def arrows(path: Path, root: Path, known: set[str]) -> set[str]:
    """The modules of `known` that the module at `path` imports. `from pkg import mod` is an
    arrow to pkg.mod when mod is a module, else to pkg (its __init__)."""
    module = module_name(path, root)
    found = set()
    for _, imported in imports(path.read_text(), module, path.name == "__init__.py",
                               submodules=known):
        while imported and imported not in known:
            imported = imported.rpartition(".")[0]
        if imported and imported != module:
            found.add(imported)
    return found


def graph(package: str, root: Path = ROOT) -> dict[str, list[str]]:
    """Each module of `package` -> the modules of `package` it imports."""
    paths = modules(package, root)
    known = {module_name(path, root) for path in paths}
    return {module_name(path, root): sorted(arrows(path, root, known)) for path in paths}


def cycles(package: str, root: Path = ROOT) -> list[list[str]]:
    """Each circle of modules in `package` (a strongly connected component of two or more
    modules of its import graph, Tarjan's algorithm), sorted."""
    graph_ = graph(package, root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph_[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph_):
        if v not in index:
            visit(v)
    return sorted(found)


def violations(package: str) -> list[str]:
    found = []
    for path in modules(package):
        module = module_name(path)
        for line, imported in imports(path.read_text(), module, path.name == "__init__.py"):
            top = imported.split(".")[0]
            if top in FORBIDDEN[package]:
                found.append(f"{path.relative_to(ROOT)}:{line}: {module} imports {imported}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_imports_nothing_from_the_layers_it_must_not_know(package: str) -> None:
    assert modules(package), f"no modules found under {package}/"
    assert violations(package) == []


def test_every_shipped_package_has_a_rule() -> None:
    assert set(SHIPPED) == set(FORBIDDEN)


@pytest.mark.parametrize("module", MOVED)
def test_a_moved_module_left_no_shim(module: str) -> None:
    assert importlib.util.find_spec(module) is None


def test_the_reader_sees_every_form_of_import() -> None:
    source = """
import harness.runner
from harness import store
from . import sibling
from ..up import thing
def lazy():
    import checkers.perf
    importlib.import_module("workloads.append")
    __import__("nemesis.base")
"""
    found = [name for _, name in imports(source, "pkg.sub.mod")]
    assert found == ["harness.runner", "harness", "pkg.sub", "pkg.up", "checkers.perf",
                     "workloads.append", "nemesis.base"]


def test_the_reader_finds_the_runners_arrows() -> None:
    runner = ROOT / "harness" / "runner.py"
    found = {name for _, name in imports(runner.read_text(), "harness.runner")}
    assert {"contracts.workload", "nemesis.schedule", "checkers"} <= found


@pytest.mark.parametrize("package", [*SHIPPED, "testkit"])
def test_the_modules_of_a_package_import_one_way(package: str) -> None:
    assert cycles(package) == []


def test_a_circle_closed_under_type_checking_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from . import c\n")
    (pkg / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n")
    (pkg / "d.py").write_text("import pkg.a\n")  # leads into the circle, is not in it
    assert cycles("pkg", tmp_path) == [["pkg.a", "pkg.sub.b", "pkg.sub.c"]]
    (pkg / "sub" / "c.py").write_text("A = 1\n")  # the arrow back removed: no circle
    assert cycles("pkg", tmp_path) == []


def test_a_lazy_import_inside_a_function_closes_a_circle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text("def run():\n    from pkg import report\n")
    (pkg / "report.py").write_text("import pkg.job as job\n")
    assert cycles("pkg", tmp_path) == [["pkg.job", "pkg.report"]]


@pytest.mark.parametrize("module", sorted(BELOW))
def test_a_lower_module_imports_nothing_above_it(module: str) -> None:
    package = module.split(".")[0]
    arrows_of = graph(package)
    assert module in arrows_of, f"{module} is gone: update BELOW"
    assert set(arrows_of[module]) & BELOW[module] == set()
