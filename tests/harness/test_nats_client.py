"""The nats client: how answers are classified, and which reads are reads of nothing (quick, on a
scripted connection), and completions against real nats-server clusters on the local backend
(slow): one node for the faults, three for agreement."""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from harness.backends.local import LocalBackend
from harness.targets import nats_client
from harness.targets.nats import NatsDB, NatsTarget
from harness.targets.nats_client import NatsClient, NotSent, publish_outcome, record_value
from testkit.targets import deployed


def _op(f: str, value: dict[str, int]) -> dict[str, Any]:
    return {"process": 0, "type": "invoke", "f": f, "value": value}


# -- quick -------------------------------------------------------------------------------------

def test_a_puback_is_ok_at_its_sequence_duplicate_or_not() -> None:
    assert publish_outcome({"stream": "jepsen", "seq": 7}) == ("ok", None, 7)
    assert publish_outcome({"stream": "jepsen", "seq": 7, "duplicate": True}) == ("ok", None, 7)


def test_errors_that_prove_nothing_was_stored_are_fail_the_rest_info() -> None:
    # checked before the proposal (nats-server processClusteredInboundMsg)
    assert publish_outcome({"error": {"code": 400, "err_code": 10054}})[0] == "fail"
    assert publish_outcome({"error": {"code": 404, "err_code": 10059}})[0] == "fail"
    assert publish_outcome({"error": {"code": 503, "err_code": 10023}})[0] == "fail"
    # the proposal itself refused: `ApiError{Code: 503, Description: err.Error()}`
    assert publish_outcome({"error": {"code": 503, "description": "raft: not leader"}}) == (
        "fail", "proposal-refused", None)
    # a store failure on apply, a JetStream outage, anything unknown: the outcome is unknown
    assert publish_outcome({"error": {"code": 503, "err_code": 10077}})[0] == "info"
    assert publish_outcome({"error": {"code": 503, "err_code": 10008}})[0] == "info"
    assert publish_outcome({"error": {"code": 500, "err_code": 10047}})[0] == "info"
    assert publish_outcome({"stream": "jepsen"})[0] == "info"  # no sequence
    assert publish_outcome({"seq": 0})[0] == "info"


def test_a_record_is_its_decimal_value_or_null() -> None:
    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()
    assert record_value(b64(b"42")) == 42
    assert record_value(b64(b"-3")) == -3
    assert record_value(b64(b"x1")) is None
    assert record_value(b64(b" 4")) is None
    assert record_value(b64(b"")) is None
    assert record_value(None) is None
    assert record_value("***") is None


class Server:
    """A scripted connection to one server: each JetStream API request by its subject's verb
    (`INFO`, `MSG` for MSG.GET) is answered with the next of its answers."""

    def __init__(self, **answers: list[dict[str, Any]]) -> None:
        self.answers = answers
        self.is_connected = True

    async def request(self, subject: str, data: bytes, timeout: float = 0.0,
                      headers: Any = None) -> Any:
        verb = subject.split(".")[3]  # $JS.API.STREAM.<verb>...
        return SimpleNamespace(data=json.dumps(self.answers[verb].pop(0)).encode())

    async def close(self) -> None:
        self.is_connected = False


def _scripted(monkeypatch: pytest.MonkeyPatch, server: Server | None,
              node: str = "n2") -> tuple[NatsClient, list[tuple[str, int]]]:
    """A client of `node` whose connections go to `server` (None: refused); the addresses
    dialled."""
    dialled: list[tuple[str, int]] = []

    async def connect(address: tuple[str, int], timeout: float) -> Any:
        dialled.append(address)
        if server is None:
            raise NotSent("ConnectionRefusedError: connection refused")
        return server

    monkeypatch.setattr(nats_client, "connect", connect)
    client = NatsClient()
    client.open(SimpleNamespace(client_address=lambda n, port: (n, 4222)),  # type: ignore[arg-type]
                ["n1", "n2", "n3"], node)
    return client, dialled


def _error(err_code: int, code: int, description: str) -> dict[str, Any]:
    return {"error": {"code": code, "err_code": err_code, "description": description}}


def test_stream_not_found_is_a_read_of_nothing_marked_absent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = _scripted(monkeypatch, Server(INFO=[_error(10059, 404, "stream not found")]))
    try:
        done = client.invoke({**_op("read", {"from": 0}), "final": True}, 1.0)
    finally:
        client.close()
    assert (done["type"], done["node"]) == ("ok", "n2")
    assert done["value"] == {"from": 0, "hw": 0, "records": [], "absent": True}
    assert done["detail"] == "jetstream-10059 stream not found"


@pytest.mark.parametrize("answer", [
    _error(10008, 503, "JetStream system temporarily unavailable"),  # no meta leader
    _error(10077, 500, "stream store failed"),
])
def test_an_answer_that_asserts_no_absence_is_a_read_that_could_not_be_made(
        monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any]) -> None:
    client, _ = _scripted(monkeypatch, Server(INFO=[answer]))
    try:
        done = client.invoke(_op("read", {"from": 0}), 1.0)
    finally:
        client.close()
    assert done["type"] == "fail" and done["error"] == f"jetstream-{answer['error']['err_code']}"


def test_a_stream_read_names_its_node_and_a_down_node_fails_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    info = {"state": {"first_seq": 1, "last_seq": 1}}
    message = {"message": {"seq": 1, "data": base64.b64encode(b"42").decode()}}
    client, _ = _scripted(monkeypatch, Server(INFO=[info], MSG=[message]))
    try:
        done = client.invoke({**_op("read", {"from": 0}), "final": True}, 1.0)
    finally:
        client.close()
    assert (done["type"], done["node"], done["value"]) == (
        "ok", "n2", {"from": 0, "hw": 1, "records": [[0, 42]]})
    # a final read of a node that is down: that node's failure, no other server dialled
    client, dialled = _scripted(monkeypatch, None)
    try:
        done = client.invoke({**_op("read", {"from": 0}), "final": True}, 1.0)
    finally:
        client.close()
    assert (done["type"], done["error"], done["node"]) == ("fail", "connect-failed", "n2")
    assert dialled == [("n2", 4222)]


# -- slow: real servers --------------------------------------------------------------------------

def _deploy(tmp_path_factory: pytest.TempPathFactory, nodes: list[str],
            run_id: str) -> Iterator[tuple[LocalBackend, NatsDB]]:
    if shutil.which("nats-server") is None:
        pytest.skip("nats-server not installed")
    with deployed(NatsTarget(), NatsDB, nodes, run_id, tmp_path_factory.mktemp("run")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalBackend, NatsDB]]:
    yield from _deploy(tmp_path_factory, ["n1"], "nats-client-single")


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalBackend, NatsDB]]:
    yield from _deploy(tmp_path_factory, ["n1", "n2", "n3"], "nats-client-three")


def _client(backend: LocalBackend, nodes: list[str], node: str) -> NatsClient:
    client = NatsClient()
    client.open(backend, nodes, node)
    return client


@pytest.mark.slow
def test_appends_are_read_back_at_their_offsets(single: tuple[LocalBackend, NatsDB]) -> None:
    backend, _ = single
    client = _client(backend, ["n1"], "n1")
    try:
        done = [client.invoke(_op("append", {"value": v}), 2.0) for v in (11, 12, 13)]
        assert [d["type"] for d in done] == ["ok"] * 3 and {d["node"] for d in done} == {"n1"}
        offsets = [d["value"]["offset"] for d in done]
        assert offsets == list(range(offsets[0], offsets[0] + 3))
        whole = client.invoke(_op("read", {"from": 0}), 2.0)
        assert whole["type"] == "ok" and whole["node"] == "n1"
        value = whole["value"]
        assert value["from"] == 0 and value["hw"] == offsets[-1] + 1
        assert [[o, v] for o, v in value["records"] if v in (11, 12, 13)] == [
            [offsets[0], 11], [offsets[1], 12], [offsets[2], 13]]
        assert [o for o, _ in value["records"]] == list(range(value["hw"]))  # complete
        tail = client.invoke(_op("read", {"from": offsets[1]}), 2.0)
        assert tail["value"] == {"from": offsets[1], "hw": offsets[2] + 1,
                                 "records": [[offsets[1], 12], [offsets[2], 13]]}
        beyond = client.invoke(_op("read", {"from": offsets[2] + 5}), 2.0)
        assert beyond["type"] == "ok" and beyond["value"]["records"] == []
    finally:
        client.close()


@pytest.mark.slow
def test_a_repeated_message_id_is_stored_once(single: tuple[LocalBackend, NatsDB]) -> None:
    backend, _ = single
    client = _client(backend, ["n1"], "n1")
    try:
        first = client.invoke(_op("append", {"value": 21}), 2.0)
        other = client.invoke(_op("append", {"value": 22}), 2.0)
        again = client.invoke(_op("append", {"value": 21}), 2.0)  # same Nats-Msg-Id
        assert first["type"] == again["type"] == other["type"] == "ok"
        assert again["value"]["offset"] == first["value"]["offset"]
        read = client.invoke(_op("read", {"from": first["value"]["offset"]}), 2.0)
        assert [v for _, v in read["value"]["records"]].count(21) == 1
    finally:
        client.close()


@pytest.mark.slow
def test_a_paused_node_gives_info_for_an_append_and_fail_for_a_read(
        single: tuple[LocalBackend, NatsDB]) -> None:
    backend, db = single
    client = _client(backend, ["n1"], "n1")
    try:
        assert client.invoke(_op("append", {"value": 31}), 2.0)["type"] == "ok"  # connected
        db.pause(backend, "n1")
        try:
            append = client.invoke(_op("append", {"value": 32}), 0.5)
            assert append["type"] == "info" and append["node"] == "n1", append
            read = client.invoke(_op("read", {"from": 0}), 0.5)
            assert read["type"] == "fail" and read["node"] == "n1", read
        finally:
            db.resume(backend, "n1")
        # the unknown append may have been stored: whatever it was, the node answers again
        assert client.invoke(_op("read", {"from": 0}), 2.0)["type"] == "ok"
    finally:
        client.close()


@pytest.mark.slow
def test_a_killed_node_gives_fail(single: tuple[LocalBackend, NatsDB]) -> None:
    backend, db = single
    db.kill(backend, "n1")
    try:
        client = _client(backend, ["n1"], "n1")
        try:
            append = client.invoke(_op("append", {"value": 41}), 1.0)
            assert append["type"] == "fail" and append["error"] == "connect-failed", append
            read = client.invoke(_op("read", {"from": 0}), 1.0)
            assert read["type"] == "fail" and read["node"] == "n1"
        finally:
            client.close()
    finally:
        db.start(backend, "n1")
    client = _client(backend, ["n1"], "n1")
    try:  # the stream came back with the restarted server
        deadline = time.monotonic() + 20
        while (done := client.invoke(_op("append", {"value": 42}), 1.0))["type"] != "ok":
            assert time.monotonic() < deadline, done
        read = client.invoke(_op("read", {"from": 0}), 2.0)
        assert [done["value"]["offset"], 42] in read["value"]["records"]
        assert [v for _, v in read["value"]["records"] if v == 11] == [11]  # older ones kept
    finally:
        client.close()


@pytest.mark.slow
def test_three_nodes_append_through_any_node_and_read_the_same_log(
        three: tuple[LocalBackend, NatsDB]) -> None:
    backend, db = three
    nodes = ["n1", "n2", "n3"]
    clients = {n: _client(backend, nodes, n) for n in nodes}
    try:
        acked = {}
        for value, node in enumerate(nodes * 2, start=51):
            done = clients[node].invoke(_op("append", {"value": value}), 2.0)
            assert done["type"] == "ok" and done["node"] == node, done
            acked[value] = done["value"]["offset"]
        assert sorted(acked.values()) == list(range(len(acked)))  # one log, no gaps
        reads = {n: clients[n].invoke(_op("read", {"from": 0}), 2.0) for n in nodes}
        assert all(r["type"] == "ok" for r in reads.values())
        logs = {n: r["value"]["records"] for n, r in reads.items()}
        assert logs["n1"] == logs["n2"] == logs["n3"]  # the leader answers every read
        assert sorted([o, v] for v, o in acked.items()) == logs["n1"]
        views = db.leaders(backend, nodes)
        assert len(set(views.values())) == 1 and views["n1"] in nodes
    finally:
        for client in clients.values():
            client.close()
