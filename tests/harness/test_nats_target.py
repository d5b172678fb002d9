"""The nats target: route identification, config rendering and refusals (quick), and a real
three-node nats-server cluster on the local backend (slow): leaders, a partition through the
shared route proxies, the data files the disk nemeses name."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.backend import HasSharedPeerAddress
from contracts.target import PROMISES
from harness.backends.local import LocalBackend
from harness.targets import nats as nats_target
from harness.targets.nats import (
    NatsDB,
    NatsTarget,
    render_config,
    route_dialer,
    settings_problem,
    stream_leader,
)
from harness.targets.nats_client import NatsClient
from testkit.targets import deployed

NODES = ["n1", "n2", "n3"]
needs_server = pytest.mark.skipif(shutil.which("nats-server") is None,
                                  reason="nats-server not installed")

# What a dialing nats-server 2.9.10 sent first on a route (captured through a proxy): CONNECT
# names the server id, INFO the server name.
CONNECT = (b'CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,'
           b'"headers":true,"name":"NAP7AJ6VSTKRERDR35RYPN6B55E7YBYRZ2CTZX7GS2LD7HJG6S3UHUAT",'
           b'"cluster":"jepsen","lnoc":true}\r\n')
INFO = (b'INFO {"server_id":"NAP7AJ6VSTKRERDR35RYPN6B55E7YBYRZ2CTZX7GS2LD7HJG6S3UHUAT",'
        b'"server_name":"n1","version":"2.9.10","proto":2,"host":"127.0.0.1","port":16221,'
        b'"headers":true,"jetstream":true,"cluster":"jepsen","lnoc":true} \r\n')


# -- quick -------------------------------------------------------------------------------------

def test_route_dialer_names_the_server_of_the_info_line() -> None:
    assert route_dialer(CONNECT + INFO, NODES) == "n1"
    assert route_dialer(CONNECT + INFO + b"RS+ $SYS foo\r\n", NODES) == "n1"


def test_route_dialer_waits_for_a_whole_info_line() -> None:
    assert route_dialer(b"", NODES) is None
    assert route_dialer(CONNECT, NODES) is None
    cut = len(CONNECT) + len(INFO) // 2
    assert route_dialer((CONNECT + INFO)[:cut], NODES) is None
    assert route_dialer((CONNECT + INFO)[:-2], NODES) is None  # no CRLF yet


def test_route_dialer_refuses_names_outside_the_run_and_garbage() -> None:
    assert route_dialer(CONNECT + INFO, ["n2", "n3"]) is None
    assert route_dialer(CONNECT + b"INFO {not json\r\n", NODES) is None
    assert route_dialer(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", NODES) is None
    assert route_dialer(CONNECT + b'INFO {"server_name": 7}\r\n', NODES) is None
    identify = nats_target.route_identify(NODES)
    assert identify(CONNECT + INFO) == "n1"


def test_config_puts_jetstream_keys_in_their_block_and_routes_in_the_cluster() -> None:
    text = render_config("n2", ("127.0.0.1", 1), ("127.0.0.1", 2), "/d/data",
                         ("127.0.0.1", 3), [("127.0.0.1", 4), ("127.0.0.1", 5)],
                         ("127.0.0.1", 6),
                         {"max_file_store": "1G", "max_payload": "65536",
                          "write_deadline": "5 s"})
    jetstream = text.split("jetstream {", 1)[1].split("}", 1)[0]
    assert 'store_dir: "/d/data"' in jetstream and "max_file_store: 1G" in jetstream
    cluster = text.split("cluster {", 1)[1].split("\n}", 1)[0]
    assert '"nats-route://127.0.0.1:4"' in cluster and '"nats-route://127.0.0.1:5"' in cluster
    assert 'advertise: "127.0.0.1:6"' in cluster and "no_advertise: true" in cluster
    tail = text.rsplit("}", 1)[1]
    assert "max_payload: 65536" in tail and 'write_deadline: "5 s"' in tail
    assert text.startswith('server_name: "n2"\nlisten: "127.0.0.1:1"\nhttp: "127.0.0.1:2"\n')
    single = render_config("n1", ("h", 1), ("h", 2), "/d", None, [], None, {})
    assert "cluster" not in single


def test_node_config_refuses_what_the_harness_sets() -> None:
    problem = settings_problem({"cluster": "x", "max_payload": "1"})
    assert problem is not None and problem.startswith("cluster: set by the harness")
    assert settings_problem({"store_dir": "/x"}) is not None
    assert settings_problem({"a.b": "1"}) is not None
    assert settings_problem({"max_payload": "65536", "max_file_store": "1G"}) is None


@needs_server
def test_node_config_is_checked_by_the_installed_server() -> None:
    target = NatsTarget()
    # 2.9 has no sync_interval (2.10 added it): nats-server's own words, one line
    problem = target.check_node_config({"sync_interval": "always"})
    assert problem is not None and 'unknown field "sync_interval"' in problem
    assert "\n" not in problem and "/tmp" not in problem
    assert target.check_node_config({"max_payload": "65536"}) is None
    assert target.check_node_config({"listen": "0.0.0.0:1"}) is not None


def test_target_declares_its_promises_and_needs() -> None:
    target = NatsTarget()
    assert target.promises <= set(PROMISES)
    assert "linearizable-reads" not in target.promises
    assert {"linearizable", "no-duplicates"} <= target.promises
    assert target.node_data is False
    assert target.image_packages() == ("nats-server",)
    assert target.missing("docker") is None
    assert target.workloads() == ["append"]
    assert target.check_nodes(5) is None
    six = target.check_nodes(6)
    assert six is not None and "at most 5" in six


def test_missing_server_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nats_target.shutil, "which", lambda _: None)
    lacking = NatsTarget().missing("local")
    assert lacking is not None and "apt-get install nats-server" in lacking


def test_stream_leader_from_jsz() -> None:
    follower = [{"name": "n1", "current": True}]
    jsz = {"meta_cluster": {"name": "jepsen"}, "account_details": [{"stream_detail": [
        {"name": "other", "cluster": {"leader": "n3", "replicas": follower}},
        {"name": "jepsen", "cluster": {"leader": "n2", "replicas": follower}}]}]}
    assert stream_leader(jsz, "n1") == "n2"
    assert stream_leader({"meta_cluster": {}, "account_details": [{"stream_detail": [
        {"name": "jepsen", "cluster": {"name": "jepsen", "replicas": follower}}]}]},
        "n1") is None
    # one server (no meta cluster): the stream is there, so it leads it
    assert stream_leader({"account_details": [{"stream_detail": [{"name": "jepsen"}]}]},
                         "n1") == "n1"
    # just restarted, its group not running: 2.9 names itself leader with no replicas
    restarted = {"meta_cluster": {"name": "jepsen"}, "account_details": [{"stream_detail": [
        {"name": "jepsen", "cluster": {"name": "jepsen", "leader": "n1"}}]}]}
    assert stream_leader(restarted, "n1") is None
    assert stream_leader({}, "n1") is None


# -- slow: a real cluster ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalBackend, NatsDB]]:
    if shutil.which("nats-server") is None:
        pytest.skip("nats-server not installed")
    with deployed(NatsTarget(), NatsDB, NODES, "nats-target-test",
                  tmp_path_factory.mktemp("run")) as deployment:
        yield deployment


def _until(what: str, check, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := check()) is not None:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {what} after {timeout:g}s")


def _agreed(backend: LocalBackend, db: NatsDB, nodes: list[str]) -> str | None:
    views = db.leaders(backend, NODES)
    named = {views[n] for n in nodes}
    return named.pop() if len(named) == 1 and None not in named else None


def _append(node: str, backend: LocalBackend, value: int, timeout: float = 1.0) -> dict:
    client = NatsClient()
    client.open(backend, NODES, node)
    try:
        return client.invoke({"process": 0, "type": "invoke", "f": "append",
                              "value": {"value": value}}, timeout)
    finally:
        client.close()


@pytest.mark.slow
def test_every_node_names_the_same_stream_leader(cluster: tuple[LocalBackend, NatsDB]) -> None:
    backend, db = cluster
    leader = _until("agreed leader", lambda: _agreed(backend, db, NODES))
    assert leader in NODES
    assert isinstance(backend, HasSharedPeerAddress)
    conf = Path(backend.node_dir("n1"), "nats.conf").read_text()
    shared = backend.shared_peer_address("n2", "cluster", nats_target.route_identify(NODES))
    assert f'"nats-route://{shared[0]}:{shared[1]}"' in conf  # routes through the shared proxy


@pytest.mark.slow
def test_a_partitioned_leader_is_replaced_and_the_majority_appends(
        cluster: tuple[LocalBackend, NatsDB]) -> None:
    backend, db = cluster
    leader = _until("agreed leader", lambda: _agreed(backend, db, NODES))
    others = [n for n in NODES if n != leader]
    backend.partition([(a, b) for a in NODES for b in NODES
                       if a != b and leader in (a, b)])
    try:
        # only a cut that holds on the routes (named through the shared proxy) makes the others
        # elect one of themselves
        new = _until("new leader among the majority",
                     lambda: (found if (found := _agreed(backend, db, others)) in others
                              else None))
        assert new != leader
        done = _until("ok append on the majority", lambda: (
            d if (d := _append(others[0], backend, 901))["type"] == "ok" else None))
        assert done["node"] == others[0]
        cut_off = _append(leader, backend, 902)
        assert cut_off["type"] in ("info", "fail"), cut_off  # never acknowledged alone
    finally:
        backend.heal()
    _until("agreed leader after heal", lambda: _agreed(backend, db, NODES))


@pytest.mark.slow
def test_collect_copies_the_store_the_disk_globs_name(
        cluster: tuple[LocalBackend, NatsDB], tmp_path: Path) -> None:
    backend, db = cluster
    _until("ok append", lambda: d if (d := _append("n1", backend, 903))["type"] == "ok"
           else None)
    db.collect(backend, "n1", tmp_path / "n1")
    assert (tmp_path / "n1" / "nats.conf").exists() and (tmp_path / "n1" / "node.log").exists()
    data = tmp_path / "n1" / "data"
    files = db.data_files()
    for kind in ("segment", "quorum-state"):  # a snapshot appears only after a compaction
        assert any(list(data.glob(g)) for g in files[kind]), kind
    assert db.data_dir(backend, "n1").endswith("/data")
