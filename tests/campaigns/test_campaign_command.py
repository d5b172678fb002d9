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
    assert cmd[4:6] == ["-m", "smoke"]
    assert cmd[-4:] == ["--target", "examples.toy:ToyTarget", "--workload", "append"]
    assert f"Runs:           {ROOT / 'results'}" in capsys.readouterr().out
