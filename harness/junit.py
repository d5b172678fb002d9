"""`kraft test --junitxml FILE`: the run as one JUnit test case, for the CI that runs it.

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


def element(outcome: Outcome, test: dict[str, Any], seconds: float) -> ET.Element:
    results = outcome.results
    valid = results.get("valid")
    suite = ET.Element("testsuite", name="kraft", tests="1", time=f"{seconds:.3f}",
                       failures="0", errors="0", skipped="0")
    case = ET.SubElement(suite, "testcase", classname=f"kraft.{test.get('target', 'target')}",
                         name=f"{test.get('name', 'run')} seed {test.get('seed')}",
                         time=f"{seconds:.3f}", file=str(outcome.run_dir))
    if results.get("error") is not None and valid is not False:
        verdict = ET.SubElement(case, "error", type="run-failed",
                                message=f"the run failed: {results['error']}"[:500])
        suite.set("errors", "1")
    elif valid is False:
        anomalies = ", ".join(results.get("anomaly_types") or []) or "see the summary"
        verdict = ET.SubElement(case, "failure", type="INVALID",
                                message=f"INVALID: {anomalies}"[:500])
        suite.set("failures", "1")
    elif valid is not True:
        verdict = ET.SubElement(case, "error", type="UNKNOWN",
                                message=f"UNKNOWN: {results.get('reason', 'no reason given')}"[:500])
        suite.set("errors", "1")
    else:
        verdict = ET.SubElement(case, "system-out")
    verdict.text = outcome.summary
    return suite


def write(path: Path, outcome: Outcome, test: dict[str, Any], seconds: float) -> None:
    tree = ET.ElementTree(element(outcome, test, seconds))
    ET.indent(tree)
    path.parent.mkdir(parents=True, exist_ok=True)
    tree.write(path, encoding="utf-8", xml_declaration=True)
