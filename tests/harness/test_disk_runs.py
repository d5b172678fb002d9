"""Whole `kraft test` runs with the disk nemeses on the local backend, against the toy target
(tests/harness/toy_target.py, which declares its data directory): a power cut finds a target that
acknowledges appends it never fsyncs, spares one that fsyncs, a filesystem that dies fails the
run (exit 3), and no FUSE means exit 64 before anything is deployed. Real FUSE mounts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main as kraft
from nemesis.faultfs import check_usable, mounts

HERE = Path(__file__).parent
TOY = "toy_target:ToyTarget"
needs_fuse = pytest.mark.skipif(check_usable() is not None, reason=f"no FUSE: {check_usable()}")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "KRAFT_LOCAL_DIR": str(tmp_path / "registry"), "PYTHONUNBUFFERED": "1"}


def _argv(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "test", "--backend", "local", "--target", TOY,
            "--results-dir", str(tmp_path / "results"), "--nodes", "3", "--rate", "50",
            "--nemesis-interval", "1", "--recovery-time", "5", *args]


def _run_dir(tmp_path: Path) -> Path:
    [run] = [p for p in (tmp_path / "results").glob("*/*") if p.parent.name != "latest"]
    return run


def _nemesis(run: Path, f: str) -> list[dict[str, Any]]:
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    return [op for op in ops if op["process"] == "nemesis" and op["f"] == f
            and op["type"] == "ok"]


def _mounted_under(root: Path) -> list[str]:
    return [point for _, point in mounts() if point.startswith(str(root))]


@pytest.mark.slow
@needs_fuse
def test_a_power_cut_loses_what_a_target_acknowledged_without_fsync(tmp_path: Path) -> None:
    done = subprocess.run(_argv(tmp_path, "--nemesis", "power-loss", "--time-limit", "8",
                                "--seed", "4", "--node-config", "fsync=false"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "lost-write" in done.stdout
    run = _run_dir(tmp_path)
    cuts = _nemesis(run, "start-power-loss")
    assert any("n1" in cut["value"]["nodes"] and cut["value"]["lost"]["n1"]["dropped_bytes"]
               for cut in cuts)
    assert (run / "nodes" / "n1" / "faultfs.log").exists()
    assert not _mounted_under(tmp_path)  # nothing stays mounted


@pytest.mark.slow
@needs_fuse
def test_a_target_that_fsyncs_before_it_acknowledges_survives_power_cuts(
        tmp_path: Path) -> None:
    done = subprocess.run(_argv(tmp_path, "--nemesis", "power-loss,fsync-stall",
                                "--time-limit", "8", "--seed", "4"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    run = _run_dir(tmp_path)
    assert _nemesis(run, "start-power-loss") and _nemesis(run, "start-fsync-stall")
    assert not _mounted_under(tmp_path)


@pytest.mark.slow
@needs_fuse
def test_a_filesystem_that_dies_fails_the_run_and_is_unmounted(tmp_path: Path) -> None:
    proc = subprocess.Popen(_argv(tmp_path, "--nemesis", "fsync-stall", "--time-limit", "6",
                                  "--seed", "1"),
                            env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    registry = tmp_path / "registry"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(_mounted_under(registry)) < 3:
        time.sleep(0.1)
    [victim] = [p for p in _mounted_under(registry) if p.endswith("/n2/data")]
    # the filesystem's process: the one serving this mount point
    found = subprocess.run(["pgrep", "-f", f"faultfs.cli mount .* {victim} --control"],
                           capture_output=True, text=True)
    time.sleep(1)
    killed = 0
    for pid in [int(p) for p in found.stdout.split()]:
        with contextlib.suppress(ProcessLookupError):  # the --daemon parent, gone once mounted
            os.kill(pid, signal.SIGKILL)
            killed += 1
    assert killed, f"no faultfs process found for {victim}"
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 3, out + err
    assert "the fault filesystem under n2 died" in out + err
    assert not _mounted_under(tmp_path)


def test_disk_faults_without_fuse_are_refused_before_deploying(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.setenv("KRAFT_FAULTFS_DEVICE", str(tmp_path / "no-such-fuse"))
    monkeypatch.syspath_prepend(str(HERE))
    code = kraft(["test", "--backend", "local", "--target", TOY, "--nemesis", "power-loss",
                  "--results-dir", str(tmp_path / "results")])
    assert code == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraft test: --nemesis: power-loss: ") and "\n" not in err, err
    assert "no-such-fuse" in err and "fuse3" in err
    assert not (tmp_path / "registry").exists() and not (tmp_path / "results").exists()
