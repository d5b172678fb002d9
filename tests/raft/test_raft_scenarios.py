"""The protocol scenarios in tests/raft/scenarios/*.txt, run by testkit/raft_scenario.py.

Each file is a command, `----`, and what the cores did; a mismatch fails with a unified diff of the
file. `pytest tests/raft/test_raft_scenarios.py --rewrite-scenarios` writes the actual outputs
back instead, for a reviewer to read in the diff.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from testkit.raft_scenario import ScenarioError, run_scenario

SCENARIOS = sorted((Path(__file__).parent / "scenarios").glob("*.txt"))


def test_there_are_scenarios() -> None:
    assert len(SCENARIOS) >= 5


def test_a_run_replaces_the_expected_output_and_keeps_the_comments() -> None:
    text = "# one voter\ncluster voters=1\n----\nstale\n\nstate 1\n----\n"
    assert run_scenario(text) == (
        "# one voter\ncluster voters=1\n----\n1 state=unattached epoch=0 leader=none voted=none\n\n"
        "state 1\n----\n1 state=unattached epoch=0 leader=none voted=none hw=0 log=[] flushed=0\n"
    )


@pytest.mark.parametrize("text, error", [
    ("cluster voters=1\nstate\n", "line 1: `cluster voters=1` is not followed by `----`"),
    ("cluster voters=1\n----\n\nelect 1\n----\n", "line 4: unknown command `elect`"),
    ("tick 1 +5\n----\n", "line 1: no cluster yet"),
    ("cluster voters=1\n----\n\ndisk 1 log=1\n----\n", "line 4: node 1 is running"),
])
def test_a_malformed_scenario_names_its_line(text: str, error: str) -> None:
    with pytest.raises(ScenarioError, match=re.escape(error)):
        run_scenario(text)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path, request: pytest.FixtureRequest) -> None:
    expected = path.read_text()
    actual = run_scenario(expected)
    if request.config.getoption("--rewrite-scenarios", default=False):
        path.write_text(actual)
        return
    if actual != expected:
        diff = difflib.unified_diff(
            expected.splitlines(keepends=True), actual.splitlines(keepends=True),
            f"{path.name} (expected)", f"{path.name} (actual)",
        )
        pytest.fail("".join(diff), pytrace=False)
