"""The modules of the Raft core (reference_node/raft/*.py, the simulator aside) import one way: no
import circle, `if TYPE_CHECKING:` imports and imports inside functions included. A handler sees
the core through `CoreOps` (ops.py), so nothing below the handlers names one of them."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

RAFT = Path(__file__).resolve().parents[2] / "reference_node" / "raft"
PACKAGE = "reference_node.raft"
HANDLERS = frozenset({"election", "replication", "membership", "snapshots", "controller",
                      "lifecycle"})


def imports_within(directory: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same directory it imports (short names), from every import
    statement wherever it stands."""
    modules = {p.stem for p in directory.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for name in modules:
        found: set[str] = set()
        for node in ast.walk(ast.parse((directory / f"{name}.py").read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from reference_node.raft import controller` names the module in the alias.
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for target in targets:
                short = target.removeprefix(f"{package}.")
                if target.startswith(f"{package}.") and short in modules and short != name:
                    found.add(short)
        graph[name] = found
    return graph


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def test_the_core_modules_import_one_way() -> None:
    graph = imports_within(RAFT, PACKAGE)
    assert {"records", "controller", "lifecycle", "states", "ops", "core"} <= set(graph)
    assert circle(graph) is None, f"an import circle in reference_node/raft: {circle(graph)}"


@pytest.mark.parametrize("lower", ["messages", "voters", "records", "image", "api", "states",
                                   "ops"])
def test_no_module_below_the_handlers_imports_one(lower: str) -> None:
    assert not imports_within(RAFT, PACKAGE)[lower] & (HANDLERS | {"core"})


def test_an_import_under_type_checking_or_in_a_function_closes_a_circle(tmp_path: Path) -> None:
    # Neither runs when the module is imported, yet each is an arrow a reader (and mypy) follows.
    (tmp_path / "low.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg.high import High\n")
    (tmp_path / "high.py").write_text("from pkg.low import x\n")
    (tmp_path / "side.py").write_text("def f():\n    from pkg import high\n")
    (tmp_path / "top.py").write_text("import pkg.side\n")
    graph = imports_within(tmp_path, "pkg")
    assert graph == {"low": {"high"}, "high": {"low"}, "side": {"high"}, "top": {"side"}}
    assert set(circle(graph) or ()) == {"low", "high"}
