"""`kraft test --junitxml FILE`: each run as a JUnit test case, for the CI that runs it.

CI systems read JUnit XML (pytest's `--junitxml`, Jenkins, GitLab, GitHub's test reporters). A
VALID run passes; an INVALID one is a failure whose message names the anomalies; an UNKNOWN run
is an error (it is no pass, and no finding either), with the reason; a run that failed (exit 3)
is an error too. The text of each is the run's summary, which ends with the results' path and
the command that reruns it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from harness.runner import Outcome


def element(runs: list[tuple[Outcome, dict[str, Any], float]]) -> ET.Element:
    """One suite, one case per run (`--test-count N` makes N)."""
    suite = ET.Element("testsuite", name="kraft", tests=str(len(runs)),
                       time=f"{sum(seconds for _, _, seconds in runs):.3f}")
    counts = {"failure": 0, "error": 0}
    for outcome, test, seconds in runs:
        tag = _case(suite, outcome, test, seconds)
        if tag in counts:
            counts[tag] += 1
    suite.set("failures", str(counts["failure"]))
    suite.set("errors", str(counts["error"]))
    suite.set("skipped", "0")
    return suite


def _case(suite: ET.Element, outcome: Outcome, test: dict[str, Any], seconds: float) -> str:
    results = outcome.results
    valid = results.get("valid")
    case = ET.SubElement(suite, "testcase", classname=f"kraft.{test.get('target', 'target')}",
                         name=f"{test.get('name', 'run')} seed {test.get('seed')}",
                         time=f"{seconds:.3f}", file=str(outcome.run_dir))
    if results.get("error") is not None and valid is not False:
        verdict = ET.SubElement(case, "error", type="run-failed",
                                message=f"the run failed: {results['error']}"[:500])
    elif valid is False:
        anomalies = ", ".join(results.get("anomaly_types") or []) or "see the summary"
        verdict = ET.SubElement(case, "failure", type="INVALID",
                                message=f"INVALID: {anomalies}"[:500])
    elif valid is not True:
        verdict = ET.SubElement(case, "error", type="UNKNOWN",
                                message=f"UNKNOWN: {results.get('reason', 'no reason given')}"[:500])
    else:
        verdict = ET.SubElement(case, "system-out")
    verdict.text = outcome.summary
    return verdict.tag


def write(path: Path, runs: list[tuple[Outcome, dict[str, Any], float]]) -> None:
    tree = ET.ElementTree(element(runs))
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
