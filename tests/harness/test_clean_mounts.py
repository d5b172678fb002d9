"""`kraft clean` unmounts the disk nemeses' filesystems that a local run left behind when its
harness died (SIGKILL: no teardown ran), and leaves a live run's mounted. Real FUSE mounts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.backends import pids
from harness.commands import clean as clean_cli
from nemesis.faultfs import check_usable, mounts

pytestmark = pytest.mark.skipif(check_usable() is not None, reason=f"no FUSE: {check_usable()}")


def mount_under(run: Path, node: str) -> Path:
    data = run / "nodes" / node / "data"
    subprocess.run([sys.executable, "-m", "harness.cli", "faultfs", "mount",
                    f"{data}.backing", str(data), "--control",
                    f"/tmp/kfs-test-{os.getpid()}-{run.name}.sock",
                    "--fsname", f"kraft-faultfs:test-{os.getpid()}", "--daemon"],
                   check=True, timeout=30)
    (data / "file").write_text("unsynced")
    return data


def mounted(path: Path) -> bool:
    return any(point == str(path) for _, point in mounts())


def test_clean_unmounts_a_dead_harness_mounts_and_spares_a_live_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    dead = pids.base_dir() / "dead-run"
    pids.claim(dead, dead_owner.pid)  # its harness is gone, as after a SIGKILL
    live = pids.base_dir() / "live-run"
    pids.claim(live, os.getpid())
    orphan, ours = mount_under(dead, "n1"), mount_under(live, "n1")
    try:
        assert mounted(orphan) and mounted(ours)
        assert clean_cli.main([]) == 0
        assert not mounted(orphan) and not dead.exists()
        assert mounted(ours) and (ours / "file").read_text() == "unsynced"
        assert clean_cli.main(["--all"]) == 0  # --all takes live runs too
        assert not mounted(ours) and not live.exists()
    finally:
        for path in (orphan, ours):
            if mounted(path):
                subprocess.run(["fusermount3", "-u", "-z", str(path)], check=False)
