"""Control of real containers over SSH: commands, the daemon and its signals, files over SFTP."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from contracts.backend import BackendError
from harness.backends.docker import DockerBackend
from harness.backends.ssh import CommandFailed

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def http_get(address: tuple[str, int], timeout: float) -> str:
    """'ok', 'refused' or 'no-answer' for one HTTP request from the host (the harness's path)."""
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return "ok" if sock.recv(64).startswith(b"HTTP/1.0 200") else "bad"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "no-answer"


def wait_for(predicate: object, timeout: float = 15.0) -> bool:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_exec_runs_in_node_dir_and_reports_status(cluster: DockerBackend) -> None:
    for node in ("n1", "n2", "n3"):
        assert cluster.exec(node, ["hostname"]).stdout.strip() == node
    assert cluster.exec("n1", ["pwd"]).stdout.strip() == cluster.node_dir("n1")
    result = cluster.exec("n2", ["sh", "-c", "echo out; echo err >&2; exit 7"], check=False)
    assert (result.exit_status, result.stdout, result.stderr) == (7, "out\n", "err\n")
    assert result.argv == ("sh", "-c", "echo out; echo err >&2; exit 7")
    with pytest.raises(CommandFailed, match=r"n3: .*exited 3"):
        cluster.exec("n3", ["sh", "-c", "exit 3"])
    with pytest.raises(BackendError, match="still ran after"):
        cluster.exec("n1", ["sleep", "10"], timeout=1)
    # every command and its exit status is in the run's log
    log = (cluster_run_dir(cluster) / "backend.log").read_text()
    assert "n2 $ cd /var/lib/kraft-jepsen/n2 && sh -c" in log
    assert "n2   exit 7" in log


def test_node_names_resolve_to_peers(cluster: DockerBackend) -> None:
    host, port = cluster.peer_address("n1", "n2", "http")
    assert (host, port) == ("n2", 8000)
    resolved = cluster.exec("n1", ["getent", "hosts", "n2"]).stdout.split()[0]
    assert resolved == cluster.client_address("n2", "http")[0]


def test_daemon_pause_resume_kill_restart(cluster: DockerBackend) -> None:
    node, address = "n1", cluster.client_address("n1", "http")
    cluster.spawn(node, ["python3", "-m", "http.server", "8000"], "logs/http.log")
    try:
        assert wait_for(lambda: http_get(address, 2) == "ok"), "the daemon never served"
        assert cluster.is_running(node)
        with pytest.raises(BackendError, match="already runs"):
            cluster.spawn(node, ["sleep", "1"], "logs/other.log")

        cluster.signal(node, signal.SIGSTOP)
        # The kernel still completes the handshake, but a stopped server never answers.
        assert http_get(address, 1.5) == "no-answer"
        assert cluster.is_running(node), "a paused daemon is still running"
        assert cluster.process_state(node) == "stopped"  # what a pause proves itself by
        assert cluster.wait_exit(node, 0.2) is None

        cluster.signal(node, signal.SIGCONT)
        assert wait_for(lambda: http_get(address, 2) == "ok")
        assert cluster.process_state(node) == "running"

        cluster.signal(node, signal.SIGKILL)
        assert not cluster.is_running(node)
        assert cluster.process_state(node) == "gone"
        assert cluster.wait_exit(node, 5) == -signal.SIGKILL
        assert http_get(address, 2) == "refused"

        cluster.spawn(node, ["python3", "-m", "http.server", "8000"], "logs/http.log")
        assert wait_for(lambda: http_get(address, 2) == "ok"), "the restarted daemon never served"
        cluster.signal(node, signal.SIGTERM)
        assert cluster.wait_exit(node, 10) == -signal.SIGTERM
    finally:
        cluster.signal(node, signal.SIGKILL)
    log = cluster.exec(node, ["cat", "logs/http.log"]).stdout
    assert log.count("GET / HTTP/1.0") >= 2  # both lives appended to the same log


def test_spawn_passes_env_and_reports_a_bad_command(cluster: DockerBackend) -> None:
    cluster.spawn("n2", ["sh", "-c", 'echo "greeting=$GREETING"; exec sleep 60'], "env.log",
                  env={"GREETING": "hello there"})
    try:
        assert wait_for(lambda: b"greeting=hello there" in cluster.read_file("n2", "env.log"))
    finally:
        cluster.signal("n2", signal.SIGKILL)
    with pytest.raises(BackendError, match="cannot start"):
        cluster.spawn("n2", ["/no/such/program"], "bad.log")


def test_signal_without_daemon_is_a_no_op(cluster: DockerBackend) -> None:
    cluster.signal("n3", signal.SIGKILL)
    assert not cluster.is_running("n3")
    assert cluster.process_state("n3") == "gone"
    assert cluster.wait_exit("n3", 0.1) is None


def test_files_round_trip_over_sftp(cluster: DockerBackend, tmp_path: Path) -> None:
    payload = os.urandom(300_000)
    path = f"{cluster.node_dir('n2')}/deep/er/blob.bin"
    cluster.write_file("n2", path, payload)
    assert cluster.read_file("n2", path) == payload
    remote_sum = cluster.exec("n2", ["sha256sum", path]).stdout.split()[0]
    assert remote_sum == hashlib.sha256(payload).hexdigest()

    cluster.exec("n3", ["sh", "-c", "mkdir -p data/a/b && echo one > data/x.log "
                        "&& echo two > data/a/b/y.log && mkfifo data/pipe"])
    cluster.fetch("n3", "data", tmp_path)
    assert (tmp_path / "data" / "x.log").read_text() == "one\n"
    assert (tmp_path / "data" / "a" / "b" / "y.log").read_text() == "two\n"
    assert not (tmp_path / "data" / "pipe").exists()  # not a file: skipped, not hung on

    cluster.fetch("n3", f"{cluster.node_dir('n3')}/data/x.log", tmp_path / "single")
    assert (tmp_path / "single" / "x.log").read_text() == "one\n"
    cluster.fetch("n3", "no/such/thing", tmp_path / "missing")  # a node with no logs yet
    assert list((tmp_path / "missing").iterdir()) == []


def cluster_run_dir(backend: DockerBackend) -> Path:
    spec = backend._spec
    assert spec is not None
    return spec.run_dir
