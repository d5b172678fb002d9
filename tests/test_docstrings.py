"""Module docstrings keep their theory to about fifteen lines; the details live under docs/.

A shipped module's docstring says what the module is for, its key idea and where the details are;
tables, long lists of rules and per-field explanations go to a page of docs/internals/, and the
docstring points to it (`docs/internals/PAGE.md#heading`). Every such pointer must name a page
that exists and a heading on it, so that a moved or renamed section is caught here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("contracts", "checkers", "nemesis", "workloads", "harness", "reference_node", "testkit")
MAX_LINES = 20

POINTER = re.compile(r"docs/internals/([\w-]+\.md)(?:#([\w-]+))?")


def shipped_modules() -> Iterator[Path]:
    for package in SHIPPED:
        yield from sorted((ROOT / package).rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


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


@pytest.mark.parametrize("path", list(shipped_modules()), ids=relative)
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


def test_the_index_lists_every_page() -> None:
    internals = ROOT / "docs" / "internals"
    index = (internals / "README.md").read_text()
    pages = {page.name for page in internals.glob("*.md")} - {"README.md"}
    assert pages
    unlisted = sorted(page for page in pages if f"]({page})" not in index)
    assert not unlisted, f"docs/internals/README.md does not list {unlisted}"
