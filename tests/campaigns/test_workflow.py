"""The CI workflow is valid: parsed with a YAML parser, with the fields GitHub requires, and only
steps a standard hosted runner can run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

WORKFLOWS = Path(__file__).resolve().parents[2] / ".github" / "workflows"
HOSTED = {"ubuntu-latest", "ubuntu-24.04", "ubuntu-22.04"}
ACTION = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[\w.-]+$")


def load(path: Path) -> dict[Any, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), f"{path}: not a mapping"
    return data


def workflow_files() -> list[Path]:
    return sorted(WORKFLOWS.glob("*.yml")) + sorted(WORKFLOWS.glob("*.yaml"))


def test_there_is_a_campaign_workflow() -> None:
    assert any(p.name == "campaign.yml" for p in workflow_files())


@pytest.mark.parametrize("path", workflow_files(), ids=lambda p: p.name)
def test_workflow_has_required_fields(path: Path) -> None:
    data = load(path)
    # YAML 1.1 reads the key `on` as the boolean True.
    triggers = data.get("on", data.get(True))
    assert triggers, "a workflow needs `on`"
    assert {"push", "schedule"} <= set(triggers), "smoke on push and full nightly"
    for cron in triggers["schedule"]:
        assert len(cron["cron"].split()) == 5
    jobs = data["jobs"]
    assert jobs, "a workflow needs jobs"
    for name, job in jobs.items():
        assert re.fullmatch(r"[A-Za-z_][\w-]*", name), f"bad job id {name!r}"
        assert job.get("runs-on") in HOSTED, f"job {name}: runs-on must be a standard hosted runner"
        steps = job["steps"]
        assert steps
        for step in steps:
            assert ("uses" in step) != ("run" in step), f"job {name}: step needs uses or run: {step}"
            if "uses" in step:
                assert ACTION.match(step["uses"]), f"action without a pinned ref: {step['uses']}"


def test_campaign_publishes_report_with_history_and_uploads_results() -> None:
    steps = load(WORKFLOWS / "campaign.yml")["jobs"]["campaign"]["steps"]
    text = "\n".join(str(s.get("run", "")) + " " + str(s.get("uses", "")) for s in steps)
    assert "kraft campaign" in text and "--full" in text
    assert "allure generate" in text and "history" in text
    assert "actions/upload-artifact" in text and "gh-pages" in text
