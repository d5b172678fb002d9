"""`kraft test --test-count N`: N runs in a row, seeds SEED..SEED+N-1, summed up as Jepsen's
test-all sums up its tests; with `--junitxml`, one test case each."""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_cli import _env, _kraft

from harness.commands.test import series_exit


@pytest.mark.parametrize(("codes", "exit_code"), [
    ([0, 0, 0], 0), ([0, 2, 0], 2), ([0, 3, 2], 3), ([2, 3, 1, 0], 1), ([1], 1), ([], 3),
])
def test_a_series_exits_with_its_worst_news(codes: list[int], exit_code: int) -> None:
    assert series_exit(codes) == exit_code


def test_three_runs_print_three_verdicts_and_the_seeds_that_failed(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    done = subprocess.run(_kraft(tmp_path, "--time-limit", "3", "--nemesis", "kill",
                                 "--nemesis-interval", "0.5", "--rate", "40", "--seed", "3",
                                 "--node-config", "lossy=true", "--test-count", "3",
                                 "--junitxml", str(report)),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert out.count("verdict: ") == 3, out
    for seed in (3, 4, 5):
        assert f"run {seed - 2} of 3, seed {seed}" in done.stderr
    series = out[out.index("series: 3 of 3 runs: "):]
    stored = sorted((tmp_path / "results").glob("*/2*/test.json"))
    verdicts = {json.loads(p.read_text())["seed"]:
                json.loads((p.parent / "results.json").read_text())["valid"] for p in stored}
    assert sorted(verdicts) == [3, 4, 5]
    for seed, valid in verdicts.items():
        assert (f"seed {seed}: " in series) == (valid is not True), (seed, series)
    assert verdicts[3] is False and done.returncode == 1  # the toy loses writes on seed 3
    suite = ET.parse(report).getroot()
    assert suite.get("tests") == "3" and len(suite.findall("testcase")) == 3
    assert int(suite.get("failures") or 0) == sum(v is False for v in verdicts.values())


def test_a_count_out_of_range_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(_kraft(tmp_path, "--test-count", "0"), env=_env(tmp_path),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 64 and "--test-count" in done.stderr
