"""A TLS cluster on the docker backend (`--node-config security=ssl`): the run's certificates reach
the containers, name the addresses peers (container names) and the harness (container IPs) dial,
and only holders of a certificate of the run's CA are served.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from contracts.backend import ClusterSpec
from harness.backends.docker import DockerBackend
from harness.targets.reference import ReferenceDB, ReferenceTarget
from harness.targets.reference_client import AppendClient
from harness.targets.reference_tls import CertificateAuthority
from nemesis.base import Env
from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.wire import KafkaClient, WireError, tls

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NODES = ["n1", "n2", "n3"]


def test_kraft_test_with_security_ssl_is_valid_on_docker(node_image: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "docker", "--node-config",
         "security=ssl", "--time-limit", "20", "--results-dir", str(results)],
        cwd=ROOT, capture_output=True, text=True, timeout=400,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "KRAFT_LOCAL_DIR": str(tmp_path / "local")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "verdict: VALID" in done.stdout
    run = (results / "latest").resolve()
    assert json.loads((run / "test.json").read_text())["node_config"] == {"security": "ssl"}
    for node in NODES:
        config = (run / "nodes" / node / "server.properties").read_text()
        assert "listener.security.protocol.map=CONTROLLER\\:SSL" in config
        assert "ssl.client.auth=required" in config
        cert = x509.load_pem_x509_certificate((run / "nodes" / node / "tls" / "node.pem")
                                              .read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert node in names.get_values_for_type(x509.DNSName)  # how peers dial it
        assert names.get_values_for_type(x509.IPAddress)  # how the harness dials it


@pytest.fixture(scope="module")
def tls_cluster(node_image: str, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[DockerBackend, ReferenceTarget, ReferenceDB]]:
    backend = DockerBackend(image=node_image)
    target = ReferenceTarget()
    db = target.db()
    assert isinstance(db, ReferenceDB)
    try:
        backend.setup(ClusterSpec(run_id=f"test-tls-{os.getpid()}-{uuid.uuid4().hex[:6]}", nodes=NODES, ports=target.ports,
                                  run_dir=tmp_path_factory.mktemp("run")))
        db.setup(backend, NODES, {"security": "ssl"})
        yield backend, target, db
    finally:
        db.teardown(backend, NODES)
        backend.teardown()


def _leader(backend: DockerBackend, db: ReferenceDB) -> str:
    env = Env(backend, db, NODES)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (leader := env.leader()) is not None:
            return leader
        time.sleep(0.3)
    raise AssertionError("no leader")


def test_only_the_runs_certificate_is_served_on_docker(
        tls_cluster: tuple[DockerBackend, ReferenceTarget, ReferenceDB], tmp_path: Path) -> None:
    backend, target, db = tls_cluster
    leader = _leader(backend, db)
    assert db.tls is not None
    certified = target.client("append")
    certified.open(backend, NODES, leader)
    op = {"process": 0, "type": "invoke", "f": "append", "value": {"value": 7}}
    assert certified.invoke(op, 5.0)["type"] == "ok"
    certified.close()

    (tmp_path / "impostor.pem").write_bytes(CertificateAuthority("impostor").issue("n2", ["n2"]))
    trust = str(db.tls.dir / "ca.pem")
    impostors = [None, tls.client_context(tls.TlsSettings(truststore=trust)),
                 tls.client_context(tls.TlsSettings(keystore=str(tmp_path / "impostor.pem"),
                                                    truststore=trust))]
    host, port = backend.client_address(leader, "kafka")
    epoch = 1
    vote = m.VoteRequest(db.cluster_id, epoch + 1000, 2, epoch, 10**9)
    for context in impostors:
        client = AppendClient(ssl=context)
        client.open(backend, NODES, leader)
        for f, value in (("append", {"value": 8}), ("read", {"from": 0})):
            done = client.invoke({"process": 1, "type": "invoke", "f": f, "value": value}, 5.0)
            assert done["type"] == "fail" and done["error"] in (
                "connect-failed", "connection-closed", "bad-response"), done
        client.close()
        with pytest.raises(WireError), KafkaClient(host, port, timeout=5.0, ssl=context) as k:
            k.request(translate.request_to_kio(vote, Endpoint("n2", port)))
