"""docs/your-own-target.md and its example (examples/, issue 46): the page's listings are the
example's files, whole and in order, and the example runs as the page says, from the repository's
root: `kraft test --target examples.toy:ToyTarget` is VALID, and its known defect (`lossy=true`,
a log kept in memory only) is INVALID on a pinned seed. Short runs on the local backend."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "your-own-target.md"
EXAMPLE = "examples.toy:ToyTarget"
LISTING = re.compile(r"<!-- listing: (\S+) -->\n```python\n(.*?)```\n", re.DOTALL)
LISTED = {"examples/toy.py", "examples/toy_server.py"}
# Seed 2, a kill every 0.5 s: of every node at 0.5 s, of the leader n1 (the node that serves) at
# 2.3 s, each after appends were acknowledged; without the defect the same run is VALID.
DEFECT_SEED = "2"


def listings(page: str) -> dict[str, list[str]]:
    """Each file's listings on the page, in order: a ```python block right after a
    `<!-- listing: PATH -->` line."""
    found: dict[str, list[str]] = {}
    for path, code in LISTING.findall(page):
        found.setdefault(path, []).append(code)
    return found


def test_every_listing_of_the_guide_is_its_file_whole_and_in_order() -> None:
    """A file listed in several parts reads as the file: the parts are its top-level blocks,
    each separated by the two blank lines the file has between them."""
    found = listings(GUIDE.read_text())
    assert set(found) == LISTED
    for path, parts in found.items():
        text = (ROOT / path).read_text()
        shown = "\n\n\n".join(part.rstrip("\n") for part in parts) + "\n"
        assert shown == text, (f"docs/your-own-target.md's listings of {path} differ from the "
                               f"file: copy the file's blocks into the page again")


def test_a_listing_that_drifts_from_its_file_is_caught() -> None:
    page = GUIDE.read_text().replace("PORT = \"toy\"", "PORT = \"toy2\"", 1)
    parts = listings(page)["examples/toy.py"]
    assert "\n\n\n".join(p.rstrip("\n") for p in parts) + "\n" != \
        (ROOT / "examples/toy.py").read_text()


def _kraft_test(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`kraft test --target examples.toy:ToyTarget ARGS`, run from the repository's root (that
    the module is found there without `python -m`'s help: test_target_loading.py)."""
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "local",
         "--target", EXAMPLE, "--time-limit", "3", "--nemesis-interval", "0.5",
         "--results-dir", str(results), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=180,
        env={**os.environ, "KRAFT_LOCAL_DIR": str(tmp_path / "registry"),
             "PYTHONUNBUFFERED": "1"})
    return done, (results / "latest").resolve()


def _ops(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_the_example_runs_from_the_root_and_is_valid(tmp_path: Path) -> None:
    done, run = _kraft_test(tmp_path, "--nemesis", "kill,pause", "--seed", DEFECT_SEED)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict: VALID" in done.stdout
    test = json.loads((run / "test.json").read_text())
    assert test["target"] == EXAMPLE and test["node_data"] is False
    assert (run / "nodes" / "n1" / "server.log").exists()
    assert (run / "nodes" / "n1" / "log.txt").read_text().strip()


@pytest.mark.slow
def test_its_known_defect_is_invalid_on_a_pinned_seed(tmp_path: Path) -> None:
    done, run = _kraft_test(tmp_path, "--nemesis", "kill", "--seed", DEFECT_SEED,
                            "--node-config", "lossy=true")
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads((run / "results.json").read_text())
    assert "lost-write" in results["anomaly_types"], results["anomaly_types"]
    kills = [op for op in _ops(run) if op["process"] == "nemesis"
             and op["f"] == "start-kill" and op["type"] == "ok"]
    assert any("n1" in op["value"]["nodes"] for op in kills), "the pin no longer kills n1"


def test_a_setting_the_example_does_not_know_is_refused_before_deploying(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.commands import test as test_cli

    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    code = test_cli.main(["--backend", "local", "--target", EXAMPLE, "--results-dir",
                          str(tmp_path / "results"), "--node-config", "unsafe=no-check-quorum"])
    assert code == 64
    assert capsys.readouterr().err.strip() == (
        "kraft test: --node-config: the toy has no setting unsafe; it has lossy, fsync, crash")
    assert not (tmp_path / "results").exists()
