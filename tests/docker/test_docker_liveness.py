"""On the docker backend too, a node killed by hand during a run is seen (issue 40): `kraft test`
records its exit (`node-exit`, SIGKILL, not sent by the harness), starts it again at the heal,
and ends UNKNOWN with the reason, never VALID."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness import images
from harness.backends.docker import NODE_LABEL, OWNER_LABEL

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _node_container(client: Any, harness_pid: int, node: str) -> Any:
    owner = f"{socket.gethostname()}:{harness_pid}:"
    for container in client.containers.list(filters={"label": f"{NODE_LABEL}={node}"}):
        if container.labels.get(OWNER_LABEL, "").startswith(owner):
            return container
    return None


def test_a_node_killed_by_hand_in_its_container_makes_the_run_unknown(
        node_image: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "KRAFT_LOCAL_DIR": str(tmp_path / "local")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "docker", "--results-dir",
         str(results), "--nemesis", "none", "--time-limit", "15", "--seed", "7"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    running = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if "[kraft] phase: run" in line:
                running.set()

    threading.Thread(target=read, daemon=True).start()
    client = images.docker_client()
    try:
        assert running.wait(240), "".join(lines)
        time.sleep(4)
        container = _node_container(client, proc.pid, "n2")
        assert container is not None, "no container of n2"
        # as an operator at the host would: the signal goes around the harness
        done = container.exec_run(["kraft-supervise", "signal", "KILL"])
        assert done.exit_code == 0, done.output
        code = proc.wait(300)
    finally:
        if proc.poll() is None:
            proc.kill()
        client.close()
    output = "".join(lines)
    assert code == 2, output
    run = (results / "latest").resolve()
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    exits = [op["value"] for op in history if op["f"] == "node-exit"]
    assert [(e["node"], e["signal"]) for e in exits] == [("n2", "SIGKILL")], exits
    revived = [op["value"]["nodes"] for op in history if op["f"] == "revive"]
    assert revived == [{"n2": "running"}]
    reason = json.loads((run / "results.json").read_text())["reason"]
    assert "n2 was ended by SIGKILL, which the harness did not send" in reason
    assert "verdict: VALID" not in output and "n2 killed by SIGKILL" in output
