"""The Raft core's handlers see the core through `CoreOps` (ops.py), so nothing below them names
one of them. (That no module of the core closes an import circle is tests/test_layers.py's rule.)"""

from __future__ import annotations

import ast
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


def test_the_core_is_split_by_job() -> None:
    assert {"records", "controller", "lifecycle", "states", "ops", "core"} <= set(
        imports_within(RAFT, PACKAGE))


@pytest.mark.parametrize("lower", ["messages", "voters", "records", "image", "api", "states",
                                   "ops"])
def test_no_module_below_the_handlers_imports_one(lower: str) -> None:
    assert not imports_within(RAFT, PACKAGE)[lower] & (HANDLERS | {"core"})


def test_a_function_level_import_is_an_arrow(tmp_path: Path) -> None:
    (tmp_path / "ops.py").write_text("def f():\n    from pkg import core\n")
    (tmp_path / "core.py").write_text("")
    assert imports_within(tmp_path, "pkg") == {"ops": {"core"}, "core": set()}
