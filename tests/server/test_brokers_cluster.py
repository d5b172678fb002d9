"""Brokers as processes: 3 controllers and 2 brokers (`process.roles=broker`) on loopback.

Brokers register and become active; the `__brokers` view agrees between the controller and the
brokers; a killed broker is fenced after the session timeout and comes back with a greater
incarnation and a new epoch; a broker cut off from the controllers (SIGSTOP) refuses with
BROKER_NOT_AVAILABLE after its heartbeat timeout; librdkafka's AdminClient, asking a broker,
lists exactly the brokers the controller considers unfenced; garbage BrokerRegistration and
BrokerHeartbeat bytes kill no node. The harness's fencing settings (session 3000 ms, interval
500 ms, broker timeout 4500 ms) keep it short.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reference_node.properties import render
from reference_node.wire import KafkaClient, apis
from reference_node.wire.brokers_view import BrokersView, ViewRefused, read_brokers_view
from reference_node.wire.codec import encode_request, frame
from testkit.cluster import CLUSTER_ID, Cluster, free_ports
from testkit.cluster import brokers_view as view
from testkit.frames import Extremes

pytestmark = pytest.mark.slow

FENCING = {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
           "broker.heartbeat.timeout.ms": "4500"}
SESSION_S, BROKER_TIMEOUT_S = 3.0, 4.5
BROKERS = (4, 5)
SLACK_S = 10.0
"""Room for elections and interpreter start-up on a loaded machine."""


def add_broker(cluster: Cluster, i: int, port: int) -> None:
    """Broker `i`: configured and formatted beside the controllers, not started."""
    voters = ",".join(f"{v}@127.0.0.1:{cluster.ports[v]}" for v in cluster.ids)
    cluster.ports[i] = port
    props = {"node.id": str(i), "process.roles": "broker", "controller.quorum.voters": voters,
             "listeners": f"CONTROLLER://127.0.0.1:{port}",
             "metadata.log.dir": str(cluster.data_dir(i)), **FENCING}
    cluster.config(i).write_text(render(props))
    subprocess.run([sys.executable, "-m", "harness.cli", "node", "format", "--config",
                    str(cluster.config(i)), "--cluster-id", CLUSTER_ID],
                   check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("brokers"), 3, extra=FENCING)
    for i, port in zip(BROKERS, free_ports(len(BROKERS)), strict=True):
        add_broker(c, i, port)
    c.start()
    for i in BROKERS:
        c.start(i)
    try:
        c.wait_leader(timeout=30)
        yield c
    finally:
        for i in list(c.procs):
            if i not in BROKERS:
                os.kill(c.procs[i].pid, signal.SIGCONT)
        c.stop_all()



def controller_view(cluster: Cluster) -> BrokersView:
    """The leader's view (a controller answers it only as the leader)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for i in cluster.ids:
            if i in cluster.procs and (got := view(cluster, i)) is not None:
                assert got.self_report is None
                return got
        time.sleep(0.1)
    raise AssertionError(f"no controller served __brokers; logs in {cluster.root}")


def until(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def all_active(cluster: Cluster) -> BrokersView | None:
    got = controller_view(cluster)
    return got if all(got.brokers.get(i, {}).get("state") == "active" for i in BROKERS) \
        else None


def test_brokers_register_become_active_and_views_agree(cluster: Cluster) -> None:
    ctrl = until("both brokers active", lambda: all_active(cluster), 30 + SLACK_S)
    for i in BROKERS:
        b = ctrl.brokers[i]
        assert (b["host"], b["port"]) == ("127.0.0.1", cluster.ports[i])
        assert b["epoch"] >= 0 and b["since"] >= b["epoch"]

    def agreeing(i: int) -> BrokersView | None:
        got = view(cluster, i)
        return got if got is not None and got.brokers == controller_view(cluster).brokers \
            else None

    for i in BROKERS:
        own = until(f"broker {i}'s view agrees", lambda i=i: agreeing(i), 15).self_report
        assert own is not None
        assert (own["node"], own["role"], own["state"]) == (i, "broker", "active")
        assert own["incarnation"] == ctrl.brokers[i]["incarnation"]
        assert own["epoch"] == ctrl.brokers[i]["epoch"]
        assert own["self_fenced"] is False and own["contact_age_ms"] is not None
    # the CLI, on a controller list and on a broker
    bootstrap = ",".join(f"127.0.0.1:{cluster.ports[i]}" for i in cluster.ids)
    out = subprocess.run([sys.executable, "-m", "harness.cli", "cluster", "brokers",
                          "--bootstrap-server", bootstrap, "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert answer["role"] == "controller" and answer["self"] is None
    assert sorted(answer["brokers"]) == ["4", "5"]
    out = subprocess.run([sys.executable, "-m", "harness.cli", "cluster", "brokers",
                          "--bootstrap-server", f"127.0.0.1:{cluster.ports[4]}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[:2] == ["BrokerId", "State"]
    assert "active" in out.stdout and f"127.0.0.1:{cluster.ports[5]}" in out.stdout
    # broker events tell the same story
    states = [e for e in cluster.events(4) if e["type"] == "broker-state"]
    assert states and states[-1]["state"] == "active"


def admin_brokers(cluster: Cluster, i: int) -> set[int]:
    admin_module = pytest.importorskip("confluent_kafka.admin")
    admin = admin_module.AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.ports[i]}"})
    return set(admin.list_topics(timeout=10).brokers)


def test_killed_broker_is_fenced_and_returns_with_a_greater_incarnation(
        cluster: Cluster) -> None:
    before = until("both brokers active", lambda: all_active(cluster), 30 + SLACK_S)
    # acceptance: what librdkafka sees on a broker is what the controller considers unfenced
    assert until("AdminClient lists both", lambda: admin_brokers(cluster, 4) == {4, 5}, 15)
    old = before.brokers[5]
    cluster.kill(5)
    killed = time.monotonic()

    def fenced() -> BrokersView | None:
        got = controller_view(cluster)
        return got if got.brokers[5]["fenced"] else None

    after = until("broker 5 fenced", fenced, SESSION_S + SLACK_S)
    assert time.monotonic() - killed >= SESSION_S - 0.5, "fenced before its session expired"
    assert after.brokers[5]["state"] == "inactive" and not after.brokers[4]["fenced"]
    assert after.unfenced() == [4]
    assert until("AdminClient lists broker 4 only",
                 lambda: admin_brokers(cluster, 4) == set(after.unfenced()), 15)
    leader = controller_view(cluster).leader_id
    assert any(e["type"] == "broker-fence" and e["broker"] == 5
               and e["reason"] == "session-expired" for e in cluster.events(leader))
    cluster.start(5)

    def re_registered() -> dict[str, Any] | None:
        b = controller_view(cluster).brokers[5]
        return b if b["state"] == "active" and b["epoch"] != old["epoch"] else None

    new = until("broker 5 back and active", re_registered, 30 + SLACK_S)
    assert uuid.UUID(new["incarnation"]).int > uuid.UUID(old["incarnation"]).int
    assert new["epoch"] > old["epoch"]
    assert until("AdminClient lists both again", lambda: admin_brokers(cluster, 4) == {4, 5}, 15)


def test_a_broker_cut_off_from_the_controllers_refuses(cluster: Cluster) -> None:
    until("both brokers active", lambda: all_active(cluster), 30 + SLACK_S)
    assert view(cluster, 4) is not None
    for i in cluster.ids:
        os.kill(cluster.procs[i].pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        def refusing() -> int | None:
            try:
                with KafkaClient("127.0.0.1", cluster.ports[4], timeout=3.0) as client:
                    read_brokers_view(client, 3.0)
            except ViewRefused as exc:
                return exc.code
            return None

        code = until("broker 4 refuses", refusing, BROKER_TIMEOUT_S + SLACK_S)
        assert code == 8  # BROKER_NOT_AVAILABLE
        assert time.monotonic() - stopped >= BROKER_TIMEOUT_S - 1.0
        with KafkaClient("127.0.0.1", cluster.ports[4], timeout=3.0) as client:
            from reference_node.wire.requests import metadata_request
            meta = client.call(apis.METADATA, metadata_request)
        assert meta.brokers == ()
        assert all(int(t.error_code) == 8 for t in meta.topics)
        assert any(e["type"] == "broker-state" and e["self_fenced"]
                   for e in cluster.events(4))
    finally:
        for i in cluster.ids:
            os.kill(cluster.procs[i].pid, signal.SIGCONT)
    until("broker 4 serves again", lambda: view(cluster, 4), 30 + SLACK_S)


def test_views_and_metadata_name_the_same_endpoints(cluster: Cluster) -> None:
    ctrl = until("both brokers active", lambda: all_active(cluster), 30 + SLACK_S)
    with KafkaClient("127.0.0.1", cluster.ports[5], timeout=3.0) as client:
        from reference_node.wire.requests import metadata_request
        meta = until("broker 5 serves Metadata",
                     lambda: (m if (m := client.call(apis.METADATA, metadata_request)).brokers
                              else None), 15)
    assert {int(b.node_id): (b.host, int(b.port)) for b in meta.brokers} == {
        i: (b["host"], b["port"]) for i, b in ctrl.brokers.items() if not b["fenced"]}
    assert Path(cluster.root).exists()


def test_garbage_broker_requests_kill_no_node(cluster: Cluster) -> None:
    until("both brokers active", lambda: all_active(cluster), 30 + SLACK_S)
    leader = controller_view(cluster).leader_id
    rng = random.Random(62)
    extremes = Extremes(rng, CLUSTER_ID, nulls=True)
    for target in (leader, 4):
        port = cluster.ports[target]
        for key in (apis.BROKER_REGISTRATION, apis.BROKER_HEARTBEAT):
            versions = apis.SUPPORTED_APIS[key]
            for _ in range(40):
                version = rng.randint(versions.min, versions.max)
                garbage = frame(key.to_bytes(2, "big") + version.to_bytes(2, "big")
                                + rng.randbytes(4) + rng.randbytes(rng.randrange(0, 120)))
                send(port, garbage)
                send(port, encode_request(7, extremes.request(key, version), "fuzz"))
    for i in (*cluster.ids, *BROKERS):
        assert cluster.procs[i].poll() is None, f"node {i} died"
        log = (cluster.root / f"node{i}.log").read_text()
        assert "Traceback" not in log, f"node {i}: a handler failed"
    # and the brokers are still active (a well-formed registration of another id may have
    # registered that id: anyone who reaches the port may)
    assert until("both brokers active", lambda: all_active(cluster), 30 + SLACK_S)


def send(port: int, data: bytes) -> None:
    import socket
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(65536):
                pass
    except OSError:
        pass
