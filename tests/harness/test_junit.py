"""`kraft test --junitxml FILE` (harness/junit.py): one test case per run, read back with the
standard library's XML parser as a CI's test reporter reads it."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from test_cli import _env, _kraft

from harness import junit
from harness.runner import Outcome

TEST = {"name": "reference-append-kill", "seed": 7, "target": "reference"}


def _case(tmp_path: Path, results: dict[str, Any]) -> ET.Element:
    outcome = Outcome(tmp_path, results, 0, "summary text\nrerun: kraft test --seed 7")
    path = tmp_path / "out" / "junit.xml"
    junit.write(path, [(outcome, TEST, 12.5)])
    suite = ET.parse(path).getroot()
    assert suite.tag == "testsuite" and suite.get("tests") == "1"
    (case,) = suite.findall("testcase")
    assert case.get("name") == "reference-append-kill seed 7"
    assert case.get("classname") == "kraft.reference" and case.get("time") == "12.500"
    return suite


@pytest.mark.parametrize(("results", "tag", "kind", "message", "counts"), [
    ({"valid": True}, None, None, None, ("0", "0")),
    ({"valid": False, "anomaly_types": ["lost-write", "stale-read"]}, "failure", "INVALID",
     "INVALID: lost-write, stale-read", ("1", "0")),
    ({"valid": "unknown", "reason": "no fault took effect"}, "error", "UNKNOWN",
     "UNKNOWN: no fault took effect", ("0", "1")),
    ({"valid": "unknown", "error": "n2 would not start"}, "error", "run-failed",
     "the run failed: n2 would not start", ("0", "1")),
    # a finding stands even in a run that failed later: it is a failure, not an error
    ({"valid": False, "anomaly_types": ["lost-write"], "error": "interrupted"}, "failure",
     "INVALID", "INVALID: lost-write", ("1", "0")),
])
def test_each_verdict_is_the_case_a_ci_expects(tmp_path: Path, results: dict[str, Any],
                                               tag: str | None, kind: str | None,
                                               message: str | None,
                                               counts: tuple[str, str]) -> None:
    suite = _case(tmp_path, results)
    (case,) = suite.findall("testcase")
    assert (suite.get("failures"), suite.get("errors")) == counts
    if tag is None:
        assert case.find("failure") is None and case.find("error") is None
        return
    verdict = case.find(tag)
    assert verdict is not None
    assert verdict.get("type") == kind and verdict.get("message") == message
    assert "rerun: kraft test --seed 7" in (verdict.text or "")


def test_a_junit_path_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = subprocess.run(_kraft(tmp_path, "--time-limit", "1", "--junitxml",
                                 str(blocker / "junit.xml")),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 64, done.stdout + done.stderr
    assert "--junitxml: cannot write to" in done.stderr
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_a_toy_run_writes_its_case(tmp_path: Path) -> None:
    path = tmp_path / "reports" / "kraft.xml"
    done = subprocess.run(_kraft(tmp_path, "--time-limit", "3", "--nemesis", "kill",
                                 "--nemesis-interval", "0.5", "--rate", "40", "--seed", "3",
                                 "--node-config", "lossy=true", "--junitxml", str(path)),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"junit: {path}" in done.stdout
    suite = ET.parse(path).getroot()
    failure = suite.find("testcase/failure")
    assert failure is not None and failure.get("type") == "INVALID"
    assert "lost-write" in (failure.get("message") or "")
    assert "verdict: INVALID" in (failure.text or "")

