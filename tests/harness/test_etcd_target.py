"""The etcd target without a server: member ids, naming peer connections, `--node-config`, the
command line each member gets, outcome classification and the gateway's request bodies."""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
import requests
from urllib3.exceptions import NewConnectionError, ProtocolError

from contracts.backend import Backend, CommandResult, HasSharedPeerAddress, Identify
from contracts.target import PROMISES
from harness.targets import etcd
from harness.targets.etcd import EtcdDB, EtcdTarget, check_node_config, identify, member_id
from harness.targets.etcd_client import (
    CallError,
    cas_body,
    classify,
    not_sent,
    read_value,
    value_of,
)

# Read off a real etcd 3.4.23: `--initial-advertise-peer-urls http://127.0.0.1:23801
# --initial-cluster-token tok-1`, then `etcdctl member list -w json`.
REAL_ID = 17836315519559875096


def test_member_id_is_etcds() -> None:
    assert member_id(["http://127.0.0.1:23801"], "tok-1") == REAL_ID
    # the URLs are sorted before hashing, and the token is part of it
    assert member_id(["http://b:1", "http://a:1"], "t") == member_id(["http://a:1", "http://b:1"], "t")
    assert member_id(["http://127.0.0.1:23801"], "tok-2") != REAL_ID


MEMBERS = {REAL_ID: "n1", 0xABC: "n2"}


def test_identify_names_the_sender_of_a_raft_request() -> None:
    head = (b"POST /raft HTTP/1.1\r\nHost: 127.0.0.1:1\r\nContent-Type: application/protobuf\r\n"
            b"X-Server-From: " + format(REAL_ID, "x").encode() + b"\r\nX-Server-Version: 3.4.23"
            b"\r\n\r\n")
    assert identify(head, MEMBERS) == "n1"
    assert identify(head.replace(b"X-Server-From", b"x-server-from"), MEMBERS) == "n1"
    # a stream request names its sender in the path too
    assert identify(b"GET /raft/stream/msgappv2/abc HTTP/1.1\r\nHost: x\r\n", MEMBERS) == "n2"


def test_identify_waits_for_the_whole_header_line() -> None:
    line = b"GET /raft/stream/message HTTP/1.1\r\nHost: x\r\nX-Server-From: " + \
        format(REAL_ID, "x").encode()
    assert identify(line[:-3], MEMBERS) is None  # the id may go on in the next read
    assert identify(line, MEMBERS) is None
    assert identify(line + b"\r\n", MEMBERS) == "n1"


def test_a_request_that_names_no_member_is_nobodys_at_once() -> None:
    # etcd's probes and version checks name no sender: "" passes them without the wait
    probe = b"GET /raft/probing HTTP/1.1\r\nHost: 127.0.0.1:1\r\nUser-Agent: Go-http-client/1.1"
    assert identify(probe, MEMBERS) is None
    assert identify(probe + b"\r\n\r\n", MEMBERS) == ""
    assert identify(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", MEMBERS) == ""
    assert identify(b"POST /raft HTTP/1.1\r\nX-Server-From: 1234\r\n\r\n", MEMBERS) == ""
    # ... and a raft request later on the same connection (the backend's watch) names it
    reuse = probe + b"\r\n\r\nPOST /raft HTTP/1.1\r\nX-Server-From: abc\r\n"
    assert identify(reuse, MEMBERS) == "n2"


def test_node_config_refuses_what_the_harness_owns() -> None:
    problem = check_node_config({"snapshot-count": "10", "data-dir": "/x"})
    assert problem is not None and problem.startswith("data-dir: set by the harness")
    for key in ("name", "initial-cluster", "--listen-peer-urls", "advertise-client-urls",
                "log-outputs"):
        assert check_node_config({key: "x"}) is not None, key


def test_node_config_without_the_binary_checks_etcds_flag_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(etcd.shutil, "which", lambda _name: None)
    assert check_node_config({"unsafe-no-fsync": "true", "snapshot-count": "100"}) is None
    problem = check_node_config({"no-such-flag": "1"})
    assert problem == "no-such-flag: not an etcd 3.4 flag (see `etcd --help`)"


@pytest.mark.skipif(shutil.which("etcd") is None, reason="etcd not installed")
def test_node_config_is_judged_by_etcd_itself() -> None:
    assert check_node_config({"unsafe-no-fsync": "true", "--snapshot-count": "100"}) is None
    problem = check_node_config({"snapshot-count": "many"})
    assert problem is not None and "invalid value \"many\"" in problem and "\n" not in problem
    problem = check_node_config({"no-such-flag": "1"})
    assert problem is not None and "flag provided but not defined" in problem


class FakeBackend(Backend):
    """Addresses only, and a shared peer address per node that keeps the identify given."""

    name = "fake"

    def __init__(self) -> None:
        self.identifies: dict[str, Identify] = {}
        self.files: dict[str, bytes] = {}

    def setup(self, spec: Any) -> None: ...
    def teardown(self) -> None: ...

    def node_dir(self, node: str) -> str:
        return f"/nodes/{node}"

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return ("127.0.0.1", 1000 + 10 * int(node[1:]) + (port == "peer"))

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return ("10.0.0." + dst[1:], 2380)

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return ("127.0.0.1", 1000 + 10 * int(node[1:]))

    def exec(self, node: str, argv: Sequence[str], check: bool = True,
             timeout: float = 60.0) -> CommandResult:
        return CommandResult(tuple(argv), 0, "", "")

    def write_file(self, node: str, path: str, content: bytes) -> None:
        self.files[path] = content

    def spawn(self, node: str, argv: Sequence[str], log_path: str, env: Any = None) -> None: ...
    def signal(self, node: str, sig: Any) -> None: ...

    def wait_exit(self, node: str, timeout: float) -> int | None:
        return 0

    def is_running(self, node: str) -> bool:
        return False

    def fetch(self, node: str, remote_path: str, local_dir: Path) -> None: ...


class SharedFake(FakeBackend):
    def shared_peer_address(self, dst: str, port: str, identify: Identify) -> tuple[str, int]:
        self.identifies[dst] = identify
        return ("127.0.0.1", 5000 + int(dst[1:]))


NODES = ["n1", "n2", "n3"]


def _flags(argv: Iterable[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in argv if a.startswith("--"))


def test_every_member_gets_the_same_cluster_at_the_shared_addresses() -> None:
    backend = SharedFake()
    assert isinstance(backend, HasSharedPeerAddress)
    db = EtcdDB()
    db.nodes = NODES
    db.peer_urls = {n: etcd.url(db._peer_address(backend, n)) for n in NODES}
    db.members = {member_id([db.peer_urls[n]], db.token): n for n in NODES}
    commands = {n: _flags(db.command(backend, n, {"unsafe-no-fsync": "true"})) for n in NODES}
    cluster = "n1=http://127.0.0.1:5001,n2=http://127.0.0.1:5002,n3=http://127.0.0.1:5003"
    for node, flags in commands.items():
        assert flags["name"] == node
        assert flags["initial-cluster"] == cluster
        assert flags["initial-cluster-token"] == db.token
        assert flags["initial-advertise-peer-urls"] == db.peer_urls[node]
        assert flags["listen-peer-urls"] == etcd.url(backend.bind_address(node, "peer"))
        assert flags["advertise-client-urls"] == etcd.url(backend.client_address(node, "client"))
        assert flags["data-dir"] == f"/nodes/{node}/data"
        assert flags["unsafe-no-fsync"] == "true"
    # the identify the backend got names a peer connection by the member id etcd will use
    n2 = format(member_id(["http://127.0.0.1:5002"], db.token), "x").encode()
    assert backend.identifies["n1"](b"POST /raft HTTP/1.1\r\nX-Server-From: " + n2 + b"\r\n") == "n2"


def test_without_a_shared_address_every_member_is_dialled_at_one_peer_address() -> None:
    backend = FakeBackend()
    assert not isinstance(backend, HasSharedPeerAddress)
    db = EtcdDB()
    db.nodes = NODES
    assert etcd.url(db._peer_address(backend, "n2")) == "http://10.0.0.2:2380"


def test_the_target_says_what_it_is() -> None:
    target = EtcdTarget()
    assert target.name == "etcd" and target.ports == {"client": 2379, "peer": 2380}
    assert target.workloads() == ["kv"]
    assert target.promises == frozenset(PROMISES) and target.node_data is False
    assert target.image_packages() == ("etcd-server",)
    assert EtcdDB().data_files()["segment"] == ["member/wal/*.wal"]


def test_missing_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    target = EtcdTarget()
    monkeypatch.setattr(etcd.shutil, "which", lambda _name: None)
    assert target.missing("local") == ("etcd not found on PATH: apt-get install etcd-server "
                                       "(or bash scripts/setup.sh)")
    assert target.missing("docker") is None
    monkeypatch.setattr(etcd.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert target.missing("local") is None


def _refused(message: str, code: int | None, status: int = 503) -> CallError:
    return CallError(f"http-{status}", message, sent=True, code=code)


@pytest.mark.parametrize(("f", "error", "expected"), [
    # nothing sent: certainly no effect
    ("write", CallError("connect-failed", "refused", sent=False), ("fail", "connect-failed")),
    # sent and unanswered: a write may have happened, a read changed nothing
    ("write", CallError("timeout", "read timed out", sent=True), ("info", "timeout")),
    ("cas", CallError("connection-lost", "aborted", sent=True), ("info", "connection-lost")),
    ("read", CallError("timeout", "read timed out", sent=True), ("fail", "timeout")),
    # etcd's errors that leave the outcome open
    ("write", _refused("etcdserver: request timed out", 14), ("info", "timeout")),
    ("cas", _refused("etcdserver: leader changed", 14), ("info", "leader-changed")),
    ("write", _refused("etcdserver: something new", 2, 500), ("info", "etcd-error")),
    ("write", _refused("bad gateway", None, 502), ("info", "etcd-error")),
    # ... and those it gives only before proposing, or for requests it never applies
    ("write", _refused("etcdserver: too many requests", 8), ("fail", "too-many-requests")),
    ("cas", _refused("raft proposal dropped", 2, 500), ("fail", "proposal-dropped")),
    ("write", _refused("etcdserver: key is not provided", 3, 400), ("fail", "invalid-argument")),
    ("read", _refused("etcdserver: request timed out", 14), ("fail", "timeout")),
])
def test_outcomes(f: str, error: CallError, expected: tuple[str, str]) -> None:
    assert classify(f, error) == expected


def test_not_sent_tells_a_refused_connection_from_a_lost_one() -> None:
    refused = requests.exceptions.ConnectionError(
        type("MaxRetry", (), {"reason": NewConnectionError(cast(Any, None), "refused")})())
    assert not_sent(refused)
    assert not_sent(requests.exceptions.ConnectTimeout("no SYN-ACK"))
    lost = requests.exceptions.ConnectionError(ProtocolError("Connection aborted."))
    assert not not_sent(lost)
    assert not not_sent(requests.exceptions.ReadTimeout("read timed out"))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_cas_compares_the_stored_json_or_the_keys_absence() -> None:
    body = cas_body(2, 5, 6)
    assert body["compare"] == [{"key": _b64("/jepsen/2"), "result": "EQUAL", "target": "VALUE",
                                "value": _b64("5")}]
    assert body["success"] == [{"request_put": {"key": _b64("/jepsen/2"), "value": _b64("6")}}]
    absent = cas_body(2, None, 1)["compare"][0]
    assert absent["target"] == "VERSION" and absent["version"] == "0"
    assert value_of({"b": 1, "a": 2}) == _b64('{"a":2,"b":1}')


def test_read_value() -> None:
    assert read_value({"header": {}}) is None
    assert read_value({"kvs": [{"key": _b64("/jepsen/1"), "value": _b64(json.dumps(7))}]}) == 7
    with pytest.raises(ValueError):
        read_value({"kvs": [{"key": _b64("/jepsen/1"), "value": _b64("not json")}]})


def test_sparsify_keeps_the_bytes_and_drops_the_preallocated_zeros(tmp_path: Path) -> None:
    wal = tmp_path / "0-0.wal"
    content = b"record" * 1000 + bytes(5 << 20) + b"tail" + bytes(100)
    wal.write_bytes(content)
    etcd.sparsify(wal)
    assert wal.read_bytes() == content
    assert wal.stat().st_blocks * 512 < 2 << 20


def test_last_words_say_why_a_member_stopped() -> None:
    tail = "\n".join([
        '{"level":"info","msg":"starting an etcd server"}',
        '{"level":"fatal","msg":"discovery failed","error":"walpb: crc mismatch","stacktrace":"x"}',
        '{"level":"info","msg":"closing etcd server","name":"n1"}',
    ])
    assert etcd.last_words(tail) == "discovery failed: walpb: crc mismatch"
    assert etcd.last_words("panic: runtime error\n") == "panic: runtime error"
    assert etcd.last_words("") == "(empty log)"
