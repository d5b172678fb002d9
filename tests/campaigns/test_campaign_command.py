"""`kraft campaign` (harness/commands/campaign.py) finds the campaign suite of its checkout and
hands pytest the rest of its arguments (a target of one's own among them, issue 46)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.commands import campaign

ROOT = Path(__file__).resolve().parents[2]


def test_the_suite_is_the_checkouts_and_other_arguments_go_to_pytest(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    called: list[list[str]] = []

    def call(cmd: list[str]) -> int:
        called.append(cmd)
        return 0

    monkeypatch.setattr(campaign.subprocess, "call", call)
    assert campaign.main(["--target", "examples.toy:ToyTarget", "--workload", "append"]) == 0
    (cmd,) = called
    assert cmd[3] == str(ROOT / "campaigns") and (ROOT / "campaigns" / "conftest.py").exists()
    assert cmd[4:8] == ["-c", str(ROOT / "campaigns" / "pytest.ini"), "--rootdir",
                        str(ROOT / "campaigns")]
    assert cmd[8:10] == ["-m", "smoke"]
    assert cmd[-4:] == ["--target", "examples.toy:ToyTarget", "--workload", "append"]
    assert f"Runs:           {ROOT / 'results'}" in capsys.readouterr().out


@pytest.mark.parametrize("spelling", [["--kraft-results-dir", "{d}"], ["--kraft-results-dir={d}"]])
def test_the_results_directory_is_passed_whole_and_named_at_the_end(
        spelling: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Either spelling reaches the suite as one option (a bare path would be a test path to
    pytest), and the closing lines name the directory the runs went to."""
    called: list[list[str]] = []
    monkeypatch.setattr(campaign.subprocess, "call", lambda cmd: called.append(cmd) or 0)
    runs = tmp_path / "runs"
    assert campaign.main([part.format(d=runs) for part in spelling]) == 0
    (cmd,) = called
    assert f"--kraft-results-dir={runs}" in cmd and str(runs) not in cmd
    assert f"Runs:           {runs}" in capsys.readouterr().out


def test_a_path_among_the_options_keeps_the_suites_configuration(tmp_path: Path) -> None:
    """The real pytest, collecting only: with the space spelling it once took the path for a test
    path, rooted itself at the project and refused `-m smoke`."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "harness.cli", "campaign", "--kraft-results-dir",
                           str(tmp_path / "runs"), "--alluredir", str(tmp_path / "allure"),
                           "--collect-only", "-q"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "tests collected" in done.stdout and f"Runs:           {tmp_path / 'runs'}" in done.stdout
