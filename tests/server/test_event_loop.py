"""`kraft node --event-loop`: uvloop when it is installed, asyncio's own loop otherwise."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reference_node.server.event_loop import EventLoopUnavailable, Runner, choose

uvloop = pytest.importorskip("uvloop")


def _loop_module(run: Runner) -> str:
    """The module of the loop class that `run` runs a coroutine on."""
    seen: list[str] = []

    async def note() -> int:
        seen.append(type(asyncio.get_running_loop()).__module__)
        return 0

    assert run(note()) == 0
    return seen[0]


def test_auto_runs_on_uvloop_when_it_is_installed() -> None:
    name, run = choose("auto")
    assert name == "uvloop"
    assert _loop_module(run) == "uvloop"


def test_asyncio_runs_on_the_standard_loop() -> None:
    name, run = choose("asyncio")
    assert name == "asyncio"
    assert _loop_module(run).startswith("asyncio.")


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # the next import raises ImportError
    name, run = choose("auto")
    assert (name, run) == ("asyncio", asyncio.run)
    with pytest.raises(EventLoopUnavailable, match=r"pip install uvloop.*--event-loop asyncio"):
        choose("uvloop")
    with pytest.raises(EventLoopUnavailable, match="choose one of auto, uvloop, asyncio"):
        choose("trio")


def test_the_node_asked_for_a_missing_uvloop_exits_64_and_says_how_to_fix(
        tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "uvloop.py").write_text("raise ImportError('uvloop is broken here')\n")
    conf = tmp_path / "n.properties"
    conf.write_text("node.id=1\ncontroller.quorum.voters=1@127.0.0.1:1\n"
                    f"listeners=CONTROLLER://127.0.0.1:0\nmetadata.log.dir={tmp_path}\n")
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "node", "--config", str(conf),
                           "--event-loop", "uvloop"],
                          capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(shim)})
    assert proc.returncode == 64, proc.stderr
    assert "uvloop is broken here" in proc.stderr
    assert "--event-loop asyncio" in proc.stderr
