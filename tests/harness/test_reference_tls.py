"""`--node-config security=ssl` for the reference target: what it accepts, and a VALID local run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.commands import test as test_cli
from harness.targets.reference import TLS_KEYS, ReferenceTarget, dialled_hosts, split_security

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("node_config", [
    {"security": "ssl"},
    {"security": "SSL", "ssl.client.auth": "requested"},
    {"security": "plaintext"},
    {"security": "ssl", "ssl.endpoint.identification.algorithm": ""},
])
def test_security_settings_a_run_accepts(node_config: dict[str, str]) -> None:
    assert ReferenceTarget().check_node_config(node_config) is None


@pytest.mark.parametrize(("node_config", "named"), [
    ({"security": "tls"}, "plaintext | ssl"),
    ({"security": "ssl", "ssl.keystore.location": "/etc/mine.pem"}, "ssl.keystore.location"),
    ({"listener.security.protocol.map": "CONTROLLER:SSL"}, "security=ssl"),
    ({"security": "ssl", "ssl.client.auth": "sometimes"}, "ssl.client.auth"),
])
def test_security_settings_a_run_refuses(node_config: dict[str, str], named: str) -> None:
    problem = ReferenceTarget().check_node_config(node_config)
    assert problem is not None and named in problem


def test_the_harness_owns_the_stores_and_the_map() -> None:
    assert split_security({"security": "ssl", "read.mode": "leader"}) == (
        True, {"read.mode": "leader"})
    assert split_security({}) == (False, {})
    assert {"ssl.keystore.location", "ssl.truststore.location",
            "listener.security.protocol.map"} <= set(TLS_KEYS)


def test_a_harness_owned_tls_key_is_one_line_and_exit_64(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert test_cli.main(["--node-config", "ssl.truststore.location=/x.pem"]) == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraft test: --node-config: ssl.truststore.location") and "\n" not in err


class _Addresses:
    """The addresses of the docker backend: peers dial a name, the harness an IP."""

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return (f"172.18.0.{node[1:]}", 9093)

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return ("0.0.0.0", 9093)

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return (dst, 9093)


def test_a_node_certificate_names_every_address_it_is_dialled_by() -> None:
    hosts = dialled_hosts(_Addresses(), ["n1", "n2", "n3"], "n2")  # type: ignore[arg-type]
    assert set(hosts) == {"172.18.0.2", "0.0.0.0", "n2"}


@pytest.mark.slow
def test_a_local_tls_run_is_valid(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "local", "--node-config",
         "security=ssl", "--time-limit", "20", "--results-dir", str(results)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "KRAFT_LOCAL_DIR": str(tmp_path / "local")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "verdict: VALID" in done.stdout
    run = (results / "latest").resolve()
    assert json.loads((run / "test.json").read_text())["node_config"] == {"security": "ssl"}
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert any(op["type"] == "ok" and op["f"] == "append" for op in history)
    for node in ("n1", "n2", "n3"):
        config = (run / "nodes" / node / "server.properties").read_text()
        assert "listener.security.protocol.map=CONTROLLER\\:SSL" in config
        assert (run / "nodes" / node / "tls" / "node.pem").exists()
