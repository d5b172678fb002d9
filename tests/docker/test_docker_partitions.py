"""Partitions made with iptables inside real containers, observed with fresh connections.

What a one-way cut src->dst means for TCP: dst drops every packet from src, so src's SYNs to dst
never arrive; dst's SYNs to src do arrive (src answers with a SYN-ACK, which dst then drops), so
a connection fails both ways, but the src->dst path of the handshake is provably open in one
direction only. The tests check exactly that: who sees the SYN (SYN-RECV on the listener) and
which way datagrams flow.
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from harness.backends.docker import CHAIN, DockerBackend

pytestmark = [pytest.mark.docker, pytest.mark.slow]

PROBE = "/var/lib/kraft-jepsen/probe.py"
PROBE_SOURCE = b'''
import socket, sys, time
mode = sys.argv[1]
if mode == "tcp":  # tcp HOST PORT TIMEOUT: one fresh connection
    s = socket.socket()
    s.settimeout(float(sys.argv[4]))
    try:
        s.connect((sys.argv[2], int(sys.argv[3])))
        print("connected")
    except TimeoutError:
        print("timeout")
    except ConnectionRefusedError:
        print("refused")
elif mode == "udp-recv":  # udp-recv PORT SECONDS: how many datagrams arrive
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", int(sys.argv[2])))
    deadline, count = time.monotonic() + float(sys.argv[3]), 0
    while time.monotonic() < deadline:
        s.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            s.recv(100)
            count += 1
        except TimeoutError:
            pass
    print(count)
elif mode == "udp-send":  # udp-send HOST PORT COUNT
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for _ in range(int(sys.argv[4])):
        s.sendto(b"ping", (sys.argv[2], int(sys.argv[3])))
        time.sleep(0.1)
'''


@pytest.fixture(scope="module")
def net(cluster: DockerBackend) -> DockerBackend:
    """The shared cluster with a TCP listener on every node (not the daemon: that slot is free)."""
    for node in ("n1", "n2", "n3"):
        cluster.write_file(node, PROBE, PROBE_SOURCE)
        cluster.exec(node, ["sh", "-c", "nohup python3 -m http.server 8001 "
                                        ">/dev/null 2>&1 </dev/null &"])
    for node in ("n1", "n2", "n3"):
        for _ in range(100):
            if tcp(cluster, "n1" if node != "n1" else "n2", node) == "connected":
                break
            time.sleep(0.1)
    return cluster


@pytest.fixture(autouse=True)
def healed(net: DockerBackend) -> object:
    yield
    net.heal()


def tcp(backend: DockerBackend, src: str, dst: str, timeout: float = 2.0) -> str:
    host, port = backend.peer_address(src, dst, "probe")
    return backend.exec(src, ["python3", PROBE, "tcp", host, str(port), str(timeout)],
                        timeout=timeout + 30).stdout.strip()


def syn_recv_from(backend: DockerBackend, listener: str, peer: str) -> bool:
    """Whether `listener` holds a half-open connection from `peer`: it got peer's SYN."""
    lines = backend.exec(listener, ["ss", "-Htn", "state", "syn-recv"]).stdout
    return f"{backend.ip(peer)}:" in lines


def udp_delivered(backend: DockerBackend, src: str, dst: str) -> int:
    port = backend.bind_address(dst, "udp")[1]
    received: list[str] = []
    receiver = threading.Thread(target=lambda: received.append(backend.exec(
        dst, ["python3", PROBE, "udp-recv", str(port), "4"]).stdout.strip()))
    receiver.start()
    time.sleep(1.0)  # let the receiver bind before the first datagram
    backend.exec(src, ["python3", PROBE, "udp-send", dst, str(port), "20"])
    receiver.join(timeout=60)
    return int(received[0])


def host_reaches(backend: DockerBackend, node: str) -> bool:
    with socket.create_connection(backend.client_address(node, "probe"), timeout=3):
        return True


def test_one_way_partition_cuts_only_the_syn_path_from_src(net: DockerBackend) -> None:
    assert tcp(net, "n1", "n2") == "connected"
    net.partition([("n1", "n2")])
    assert f"-A {CHAIN} -s {net.ip('n1')}/32 -j DROP" in net.rules("n2")
    assert CHAIN in net.rules("n1") and "DROP" not in net.rules("n1")

    # n1 -> n2: the SYN never reaches n2.
    assert tcp(net, "n1", "n2") == "timeout"
    assert not syn_recv_from(net, "n2", "n1")
    # n2 -> n1: the SYN reaches n1 (half-open there), only the SYN-ACK back to n2 is lost.
    assert tcp(net, "n2", "n1") == "timeout"
    assert syn_recv_from(net, "n1", "n2")
    # datagrams show the direction plainly
    assert udp_delivered(net, "n2", "n1") > 0
    assert udp_delivered(net, "n1", "n2") == 0
    # links not cut, and the harness's own path to every node, stay open
    assert tcp(net, "n1", "n3") == "connected"
    assert tcp(net, "n3", "n2") == "connected"
    assert host_reaches(net, "n1") and host_reaches(net, "n2")

    net.heal()
    assert tcp(net, "n1", "n2") == "connected"
    assert udp_delivered(net, "n1", "n2") > 0
    assert "DROP" not in net.rules("n2")


def test_two_way_partition_and_replacement(net: DockerBackend) -> None:
    net.partition([("n1", "n3"), ("n3", "n1")])
    assert tcp(net, "n1", "n3") == "timeout"
    assert tcp(net, "n3", "n1") == "timeout"
    assert not syn_recv_from(net, "n1", "n3") and not syn_recv_from(net, "n3", "n1")
    assert tcp(net, "n2", "n1") == "connected"

    # a new partition replaces the old one: n1-n3 heals, n2 is cut off from n3
    net.partition([("n2", "n3")])
    assert tcp(net, "n1", "n3") == "connected"
    assert tcp(net, "n2", "n3") == "timeout"
    assert host_reaches(net, "n3")
