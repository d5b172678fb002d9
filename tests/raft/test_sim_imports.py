"""The simulator's modules import one way: no circle among them, TYPE_CHECKING imports and imports
inside functions included (a shared type goes to a lower module: sim/node.py, sim/powers.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import reference_node.raft.sim as sim

PACKAGE = "reference_node.raft.sim"


def sim_imports() -> dict[str, set[str]]:
    """Each module of the simulator -> the simulator's modules it imports, however it does."""
    folder = Path(sim.__file__).parent
    modules = {path.stem: path for path in folder.glob("*.py") if path.stem != "__init__"}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                other = target.removeprefix(f"{PACKAGE}.")
                if target.startswith(f"{PACKAGE}.") and other in modules and other != name:
                    graph[name].add(other)
    return graph


def find_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` (its modules in order, the first repeated at the end)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        if name in path:
            return [*path[path.index(name):], name]
        if name in done:
            return None
        path.append(name)
        for other in sorted(graph[name]):
            circle = visit(other)
            if circle is not None:
                return circle
        path.pop()
        done.add(name)
        return None

    for name in sorted(graph):
        circle = visit(name)
        if circle is not None:
            return circle
    return None


def test_the_simulator_has_no_import_circle() -> None:
    graph = sim_imports()
    assert {"host", "nemesis", "shapes", "brokers", "node", "powers"} <= set(graph)
    assert find_circle(graph) is None, " -> ".join(find_circle(graph) or [])


def test_the_lower_modules_stay_below_the_host_and_the_nemesis() -> None:
    graph = sim_imports()
    assert "host" not in graph["brokers"] and "node" in graph["brokers"]
    assert "nemesis" not in graph["shapes"] and "powers" in graph["shapes"]
    for lower in ("node", "powers", "fault_state", "evidence"):
        assert not graph[lower] & {"host", "nemesis", "simulation"}, lower


def test_a_circle_is_found() -> None:
    assert find_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_circle({"a": {"b"}, "b": set(), "c": {"b"}}) is None
