"""`kraft simulate`: exit codes, usage errors, the violation report, the trace file and the
coverage report."""

import re
import sys
from pathlib import Path

import pytest

from reference_node.sim.cli import main, parse_seeds


def test_clean_run_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "0-1", "--time", "6", "-q"]) == 0
    assert "ok: 2 seeds" in capsys.readouterr().out


def test_violation_exits_one_with_replay(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--seeds", "0", "--unsafe", "skip-flush", "-q"])
    out = capsys.readouterr().out
    assert code == 1
    assert "VIOLATION MajorityReachedHighWatermark (seed 0)" in out
    assert "replay: kraft simulate" in out and "--seeds 0" in out and "--unsafe skip-flush" in out
    assert "deliver" in out or "flushed" in out  # the last events


@pytest.mark.parametrize(
    "argv",
    [
        ["--unsafe", "nope"],
        ["--faults", "meteor"],
        ["--seeds", "x-y"],
        ["--seeds", "5-1"],
        ["--nodes", "0"],
        ["--time", "-1"],
        ["--bogus"],
    ],
)
def test_bad_usage_exits_64(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 64
    assert "kraft simulate:" in capsys.readouterr().err


def test_seed_lists() -> None:
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("4,7,9-10") == [4, 7, 9, 10]


def test_trace_file_is_reproducible(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    assert main(["--seeds", "3", "--time", "4", "-q", "--trace", str(a)]) == 0
    assert main(["--seeds", "3", "--time", "4", "-q", "--trace", str(b)]) == 0
    assert a.read_bytes() == b.read_bytes() and len(a.read_bytes()) > 10_000


UNTAKEN_BRANCH = re.compile(r"\b\w+\.py:\d+ -> (\d+|exit)\b")


def _coverage_section(out: str) -> str:
    return out[out.index("coverage of reference_node/raft/"):]


def test_coverage_prints_the_table_and_the_untaken_branches(
    capsys: pytest.CaptureFixture[str],
) -> None:
    core_before = sys.modules["reference_node.raft.core"]
    assert main(["--seeds", "0-1", "--time", "4", "-q", "--coverage"]) == 0
    out = capsys.readouterr().out
    assert "ok: 2 seeds" in out
    report = _coverage_section(out)
    assert re.search(r"reference_node/raft/election\.py +\d+/\d+ ", report)
    assert "reference_node/sim/" not in report and "sim/cli.py:" not in report
    assert UNTAKEN_BRANCH.search(report), report
    # Coverage was on before the measured modules' top level ran: no module's defs are missing.
    assert "(module)" not in report
    # The measured copy was set aside afterwards: the process keeps the classes it holds.
    assert sys.modules["reference_node.raft.core"] is core_before
    assert sys.modules["reference_node"].raft is sys.modules["reference_node.raft"]


def test_coverage_report_is_the_same_for_the_same_seeds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reports = []
    for _ in range(2):
        assert main(["--seeds", "4-5", "--time", "3", "-q", "--coverage"]) == 0
        reports.append(_coverage_section(capsys.readouterr().out))
    assert reports[0] == reports[1]


def test_no_coverage_without_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seeds", "0-1", "--time", "4", "-q"]) == 0
    out = capsys.readouterr().out
    assert "coverage" not in out and not UNTAKEN_BRANCH.search(out)
