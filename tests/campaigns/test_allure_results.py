"""The campaign writes Allure results with every label, step and attachment a reader needs, and a
campaign whose defect breaks safety fails in the right category (slow: whole harness runs).

With KRAFT_ALLURE_RESULTS set (CI sets it after running the smoke campaign), the results already
written there are checked instead of running a campaign here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "campaigns"))

from report import categories_of  # noqa: E402

pytestmark = pytest.mark.slow


def run_campaign(tmp_path: Path, *args: str) -> tuple[int, Path]:
    alluredir = tmp_path / "allure"
    cmd = [sys.executable, "-m", "pytest", str(REPO / "campaigns"), "-p", "no:cacheprovider",
           "--alluredir", str(alluredir), "--kraft-results-dir", str(tmp_path / "results"), *args]
    code = subprocess.run(cmd, cwd=REPO, timeout=900).returncode
    return code, alluredir


def results_in(alluredir: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in alluredir.glob("*-result.json")]
    assert found, f"no Allure results in {alluredir}"
    return found


def steps_of(result: dict[str, Any]) -> list[str]:
    return [step["name"] for step in result.get("steps", [])]


def attachment_names(result: dict[str, Any]) -> set[str]:
    names = {a["name"] for a in result.get("attachments", [])}
    for step in result.get("steps", []):
        names |= {a["name"] for a in step.get("attachments", [])}
    return names


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    existing = os.environ.get("KRAFT_ALLURE_RESULTS")
    if existing:
        return Path(existing)
    code, alluredir = run_campaign(tmp_path_factory.mktemp("smoke"), "-m", "smoke",
                                   "--nemesis", "kill", "--time-limit", "8")
    assert code == 0
    return alluredir


def test_every_result_has_labels_steps_and_attachments(smoke_results: Path) -> None:
    results = results_in(smoke_results)
    for result in results:
        labels = {label["name"]: label["value"] for label in result["labels"]}
        assert labels["epic"] == "reference"
        assert labels["feature"] in {"append", "kv"}
        assert labels["story"]
        assert labels["severity"] in {"blocker", "critical", "normal", "minor", "trivial"}
        params = {p["name"] for p in result.get("parameters", [])}
        assert {"seed", "nodes", "time_limit", "backend"} <= params
        assert steps_of(result) == ["deploy", "run", "heal", "check"]
        names = attachment_names(result)
        expected = {"test.json", "history.jsonl", "results.json", "timeline.html",
                    "plots/latency-raw.png", "plots/latency-quantiles.png", "plots/rate.png"}
        assert expected <= names, f"{result['name']}: missing {expected - names}"
        nodes = {name.split("/")[0] for name in names if name.endswith(".log")}
        # a membership run deploys the harness's two spare observers beside the three voters
        spares = {"n4", "n5"} if "membership" in labels["story"] else set()
        assert nodes == {"n1", "n2", "n3"} | spares, names
    assert (smoke_results / "categories.json").exists()
    env = (smoke_results / "environment.properties").read_text()
    assert "backend=" in env and "kio=" in env


def test_a_defect_that_breaks_safety_fails_in_its_category(tmp_path: Path) -> None:
    # The zombie-leader case expects valid; with a zombie that never steps down and answers reads
    # itself, it must fail, and the message must name the anomaly. Two seeds, since a real run
    # may need more than one try.
    for seed in (1, 7):
        code, alluredir = run_campaign(
            tmp_path / f"seed{seed}", "-m", "full", "-k", "partition-leader and not unsafe",
            "--node-config", "unsafe=no-check-quorum", "--node-config", "read.mode=leader",
            "--seed", str(seed), "--time-limit", "25", "--nemesis-interval", "8", "--rate", "20")
        (result,) = results_in(alluredir)
        if result["status"] == "failed":
            break
    assert code == 1
    assert result["status"] == "failed"
    message = result["statusDetails"]["message"]
    # allure-pytest reports pytest.fail(msg) as "Failed: msg".
    assert message.removeprefix("Failed: ").startswith("invalid: ")
    assert "stale-read" in message.splitlines()[0]
    assert "Stale read" in categories_of(message, "failed")
