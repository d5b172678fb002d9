"""The local backend probes a link through the very proxy its src dials (`CanProbeLink`): a probe
across a cut is blocked, one along an open link passes, whether dst's daemon runs or not, on
per-link and on shared listeners alike."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from contracts.backend import CanProbeLink, ClusterSpec
from harness.backends.local import LocalBackend

NODES = ["n1", "n2", "n3"]
QUICK = 0.3  # seconds a blocked probe waits: loopback answers in well under a millisecond


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LocalBackend]:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    b = LocalBackend()
    b.setup(ClusterSpec(run_id="probes", nodes=NODES, ports={"peer": 1, "client": 2},
                        run_dir=tmp_path))
    yield b
    b.teardown()


def test_a_probe_across_a_cut_is_blocked_and_one_along_an_open_link_passes(
        backend: LocalBackend) -> None:
    assert isinstance(backend, CanProbeLink)
    # no daemon listens anywhere: the probes' echo is the proxies' own
    assert backend.probe("n1", "n2", QUICK) and backend.probe("n2", "n1", QUICK)
    backend.partition([("n1", "n2")])
    began = time.monotonic()
    assert not backend.probe("n1", "n2", QUICK)
    assert time.monotonic() - began < QUICK + 0.5  # a blocked probe ends with its timeout
    # a TCP connection needs both ways: n2's probe to n1 loses its echo on the cut n1->n2
    assert not backend.probe("n2", "n1", QUICK)
    assert backend.probe("n1", "n3", QUICK) and backend.probe("n3", "n2", QUICK)
    backend.heal()
    assert backend.probe("n1", "n2", QUICK) and backend.probe("n2", "n1", QUICK)


def test_a_probe_does_not_reach_the_nodes_daemon(backend: LocalBackend) -> None:
    """A listener at n2's own port sees no probe: what answers is the proxies' echo."""
    accepted: list[bytes] = []
    server = socket.create_server(backend.bind_address("n2", "peer"))

    def serve() -> None:
        with server:
            server.settimeout(1.0)
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                accepted.append(conn.recv(100))

    thread = threading.Thread(target=serve)
    thread.start()
    assert backend.probe("n1", "n2", QUICK)
    thread.join()
    assert accepted == []


def test_a_probe_of_a_shared_listener_is_named_as_its_src_at_once(
        backend: LocalBackend) -> None:
    """A target with one URL per member (etcd, NATS): the probe takes the shared listener its
    nodes dial, where a connection no `identify` names would never be cut."""
    backend.shared_peer_address("n2", "peer", lambda _data: None)
    backend.partition([("n1", "n2")])
    assert not backend.probe("n1", "n2", QUICK)
    assert backend.probe("n3", "n2", QUICK)
    backend.heal()
    assert backend.probe("n1", "n2", QUICK)
