"""A broker of a dynamic quorum (KIP-853): it knows no voters, only
`controller.quorum.bootstrap.servers`, and finds the active controller through them, as Kafka's
brokers do once the voters live in the log. Node 1 is a `--standalone` controller; node 2 a broker
formatted `--no-initial-controllers`."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference_node.properties import render
from testkit.cluster import CLUSTER_ID, Cluster, free_ports
from testkit.cluster import brokers_view as view

pytestmark = pytest.mark.slow

FENCING = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
           "broker.heartbeat.timeout.ms": "4500"}


class BootstrapCluster(Cluster):
    """Controller 1 (`--standalone`) and broker 2, both with node 1 as bootstrap server."""

    def __init__(self, root: Path) -> None:
        # Cluster.__init__ formats a static quorum; only its process handling is reused.
        self.root = root
        self.ids = [1, 2]
        self.ports = dict(zip(self.ids, free_ports(2), strict=True))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.tls = None
        self.ssl = None
        for i, role, flag in ((1, "controller", "--standalone"),
                              (2, "broker", "--no-initial-controllers")):
            props = {"node.id": str(i), "process.roles": role,
                     "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.ports[1]}",
                     "listeners": f"CONTROLLER://127.0.0.1:{self.ports[i]}",
                     "metadata.log.dir": str(self.data_dir(i)), **FENCING}
            self.config(i).write_text(render(props))
            done = subprocess.run([sys.executable, "-m", "harness.cli", "node", "format",
                                   "--config", str(self.config(i)), "--cluster-id", CLUSTER_ID,
                                   flag], capture_output=True, text=True, timeout=30)
            assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[BootstrapCluster]:
    c = BootstrapCluster(tmp_path)
    c.start()
    try:
        yield c
    finally:
        c.stop_all()



def test_a_broker_finds_the_controller_through_the_bootstrap_servers(
        cluster: BootstrapCluster) -> None:
    deadline = time.monotonic() + 40
    got = None
    while time.monotonic() < deadline:
        got = view(cluster, 2)
        # active by the controller's answer, and unfenced in its own image (the unfence record
        # reaches it with its next fetch)
        if got is not None and got.self_report is not None \
                and got.self_report["state"] == "active" and 2 in got.brokers \
                and not got.brokers[2]["fenced"]:
            break
        time.sleep(0.2)
    assert got is not None and got.self_report is not None, \
        f"broker 2 never served; logs in {cluster.root}"
    assert got.self_report["state"] == "active"
    assert got.brokers[2]["port"] == cluster.ports[2] and not got.brokers[2]["fenced"]
    controller = view(cluster, 1)
    assert controller is not None and controller.self_report is None
    assert controller.brokers[2]["epoch"] == got.self_report["epoch"]
