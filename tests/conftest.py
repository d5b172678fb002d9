"""Options of the test suite: `--rewrite-scenarios` (tests/raft/scenarios/*.txt)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rewrite-scenarios",
        action="store_true",
        help="rewrite the expected outputs of tests/raft/scenarios/*.txt from the actual ones",
    )
