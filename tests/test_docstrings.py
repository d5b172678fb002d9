"""Module docstrings keep their theory to about fifteen lines; the details live under docs/.

A shipped module's docstring says what the module is for, its key idea and where the details are;
tables, long lists of rules and per-field explanations go to a page of docs/internals/, and the
docstring points to it (`docs/internals/PAGE.md#heading`). Every such pointer must name a page
that exists and a heading on it, so that a moved or renamed section is caught here.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("contracts", "checkers", "nemesis", "workloads", "harness", "reference_node", "testkit")
MAX_LINES = 25

# rewritten by the redesign; trimmed after it lands
EXEMPT = frozenset({
    "checkers/__init__.py", "checkers/compose.py", "checkers/history.py",
    "contracts/history.py", "contracts/target.py", "contracts/workload.py",
    "harness/__init__.py", "harness/check_cli.py", "harness/cli.py", "harness/test_cli.py",
    "harness/*_cli.py", "harness/pipeline/__init__.py", "harness/pipeline/runinfo.py",
    "harness/runner.py",
    "harness/targets/etcd.py", "harness/targets/etcd_client.py", "harness/targets/nats.py",
    "harness/targets/nats_client.py", "harness/targets/reference.py",
    "harness/targets/reference_client.py",
    "reference_node/cli.py", "reference_node/server/*", "reference_node/storage/snapshot.py",
    "workloads/*",
})

POINTER = re.compile(r"docs/internals/([\w-]+\.md)(?:#([\w-]+))?")


def shipped_modules() -> Iterator[Path]:
    for package in SHIPPED:
        yield from sorted((ROOT / package).rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def exempt(path: Path) -> bool:
    return any(fnmatch.fnmatch(relative(path), pattern) for pattern in EXEMPT)


def docstring_lines(source: str) -> list[str]:
    """The source lines the module docstring spans, without a last line holding only the closing
    quotes; [] for a module without one."""
    body = ast.parse(source).body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        return []
    node = body[0]
    assert node.end_lineno is not None
    lines = source.splitlines()[node.lineno - 1:node.end_lineno]
    if len(lines) > 1 and lines[-1].strip() in ('"""', "'''"):
        lines.pop()
    return lines


def anchors(page: Path) -> set[str]:
    """The anchors of a markdown page's headings, as GitHub makes them."""
    found = set()
    for line in page.read_text().splitlines():
        heading = re.match(r"#+\s+(.*)", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


def test_docstring_lines_counts_the_text_not_the_closing_quotes() -> None:
    assert docstring_lines('"""One.\n\nTwo.\n"""\n\nx = 1\n') == ['"""One.', "", "Two."]
    assert docstring_lines('"""One line."""\n') == ['"""One line."""']
    assert docstring_lines("x = 1\n") == []


def test_anchors_are_githubs() -> None:
    page = ROOT / "docs" / "internals" / "simulator.md"
    assert {"host", "fault_state", "invariants"} <= anchors(page)


def test_exempt_names_only_what_the_redesign_rewrites() -> None:
    assert exempt(ROOT / "reference_node/server/node.py")
    assert exempt(ROOT / "harness/analyze_cli.py")
    assert not exempt(ROOT / "reference_node/sim/host.py")
    assert not exempt(ROOT / "reference_node/quorum_cli.py")


@pytest.mark.parametrize("path", [p for p in shipped_modules() if not exempt(p)], ids=relative)
def test_module_docstring_is_short(path: Path) -> None:
    lines = docstring_lines(path.read_text())
    assert len(lines) <= MAX_LINES, (
        f"{relative(path)}: its docstring is {len(lines)} lines; keep the theory of operation to "
        f"about fifteen and move tables and long lists to a page of docs/internals/")


@pytest.mark.parametrize("path", list(shipped_modules()), ids=relative)
def test_docs_pointers_resolve(path: Path) -> None:
    text = "\n".join(docstring_lines(path.read_text()))
    for page_name, anchor in POINTER.findall(text):
        page = ROOT / "docs" / "internals" / page_name
        assert page.exists(), f"{relative(path)} points to a missing page {page_name}"
        if anchor:
            assert anchor in anchors(page), f"{relative(path)}: no heading #{anchor} in {page_name}"
