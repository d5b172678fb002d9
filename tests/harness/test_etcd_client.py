"""The etcd target's client: which member a final read asks (quick, on a scripted gateway), and
against real etcd 3.4 members on the local backend (slow): the client's completions (ok, fail
when nothing can have happened, info when something may have), member ids and leaders as etcd
has them, what `collect` brings back, and a partition through the shared peer proxies."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from contracts.backend import ClusterSpec
from harness.backends.local import LocalBackend
from harness.targets import etcd_client
from harness.targets.etcd import EtcdDB, EtcdTarget
from harness.targets.etcd_client import CallError, EtcdClient, key_of, value_of

NODES = ["n1", "n2", "n3"]
Cluster = tuple[LocalBackend, EtcdDB]


def _deploy(nodes: list[str], run_dir: Path, run_id: str) -> tuple[LocalBackend, EtcdDB]:
    if shutil.which("etcd") is None:
        pytest.skip("etcd not installed (apt-get install etcd-server)")
    backend = LocalBackend()
    target = EtcdTarget()
    db = target.db()
    assert isinstance(db, EtcdDB)
    backend.setup(ClusterSpec(run_id, nodes, target.ports, run_dir))
    try:
        db.setup(backend, nodes, {})
    except BaseException:
        db.teardown(backend, nodes)
        backend.teardown()
        raise
    return backend, db


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    backend, db = _deploy(NODES, tmp_path_factory.mktemp("run"), "etcd-test")
    try:
        yield backend, db
    finally:
        backend.heal()
        db.teardown(backend, NODES)
        backend.teardown()


def _op(f: str, value: dict[str, Any], process: int = 0) -> dict[str, Any]:
    return {"process": process, "type": "invoke", "f": f, "value": value}


def _client(backend: LocalBackend, node: str) -> EtcdClient:
    client = EtcdClient()
    client.open(backend, NODES, node)
    return client


def _leader(backend: LocalBackend, db: EtcdDB, among: list[str] = NODES,
            timeout: float = 20.0) -> str:
    """The leader every node of `among` names, once they agree."""
    deadline = time.monotonic() + timeout
    views: dict[str, str | None] = {}
    while time.monotonic() < deadline:
        views = db.leaders(backend, NODES)
        named = {views[n] for n in among}
        if len(named) == 1 and None not in named:
            return str(named.pop())
        time.sleep(0.2)
    raise AssertionError(f"no agreed leader among {among}: {views}")


# -- quick: a scripted gateway -----------------------------------------------------------------


def _scripted(monkeypatch: pytest.MonkeyPatch, down: set[str], at: str) -> tuple[EtcdClient,
                                                                                   list[str]]:
    """A client opened at `at` of members n1..n3 whose gateway answers every Range with key 0
    holding 5, except that the members in `down` refuse connections; and the members asked, in
    order."""
    asked: list[str] = []

    def call(client: Any, path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        asked.append(client.node)
        if client.node in down:
            raise CallError("connect-failed", "connection refused", sent=False)
        assert path == "/kv/range" and body == {"key": key_of(0)}
        return {"kvs": [{"key": key_of(0), "value": value_of(5)}]}

    monkeypatch.setattr(etcd_client, "call", call)
    monkeypatch.setattr(etcd_client, "gateway", lambda address, timeout=None: SimpleNamespace(
        node=address[0], session=SimpleNamespace(close=lambda: None)))
    client = EtcdClient()
    client.open(SimpleNamespace(client_address=lambda node, port: (node, 2379)),  # type: ignore[arg-type]
                NODES, at)
    return client, asked


def test_a_final_read_of_a_member_that_is_down_fails_there_every_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client, asked = _scripted(monkeypatch, down={"n3"}, at="n3")
    final = {**_op("read", {"key": 0}), "final": True}
    # the runner asks again with the same client: each try is n3's, never another member's
    for _ in range(3):
        done = client.invoke(final, 1.0)
        assert (done["type"], done["error"], done["node"]) == ("fail", "connect-failed", "n3")
    assert asked == ["n3"] * 3


def test_a_final_read_goes_back_to_the_client_s_own_member(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client, asked = _scripted(monkeypatch, down={"n3"}, at="n3")
    # an ordinary read refused by n3 moves the client on, and the next one is n1's
    assert client.invoke(_op("read", {"key": 0}), 1.0)["type"] == "fail"
    done = client.invoke(_op("read", {"key": 0}), 1.0)
    assert (done["type"], done["node"], done["value"]) == ("ok", "n1", {"key": 0, "value": 5})
    final = client.invoke({**_op("read", {"key": 0}), "final": True}, 1.0)
    assert (final["type"], final["node"]) == ("fail", "n3")
    assert asked == ["n3", "n1", "n3"]


def test_a_final_read_its_member_answers_names_it_and_a_missing_key_is_null(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client, _ = _scripted(monkeypatch, down=set(), at="n2")
    done = client.invoke({**_op("read", {"key": 0}), "final": True}, 1.0)
    assert (done["type"], done["node"], done["value"]) == ("ok", "n2", {"key": 0, "value": 5})
    # a key the member holds no revision of is a read of null (Range answers no kvs): a definite
    # answer, which the linearizability search judges
    assert etcd_client.read_value({"header": {"revision": "7"}}) is None


# -- slow: real members ------------------------------------------------------------------------


@pytest.mark.slow
def test_one_member_cluster_and_what_collect_brings(tmp_path: Path) -> None:
    backend, db = _deploy(["n1"], tmp_path / "run", "etcd-test-one")
    try:
        client = EtcdClient()
        client.open(backend, ["n1"], "n1")
        done = client.invoke(_op("write", {"key": 0, "value": 1}), 2.0)
        assert done["type"] == "ok" and done["node"] == "n1"
        assert client.invoke(_op("read", {"key": 0}), 2.0)["value"] == {"key": 0, "value": 1}
        client.close()
        assert db.leaders(backend, ["n1"]) == {"n1": "n1"}
    finally:
        db.teardown(backend, ["n1"])
        db.collect(backend, "n1", tmp_path / "n1")
        backend.teardown()
    into = tmp_path / "n1"
    assert "--name=n1" in (into / "etcd.args").read_text().splitlines()
    assert "raft.node" in (into / "etcd.log").read_text()  # zap's JSON lines
    wals = list((into / "data" / "member" / "wal").glob("*.wal"))
    assert wals and b"/jepsen/0" in wals[0].read_bytes()
    # etcd preallocates 64 MiB a segment; the copy keeps its bytes but not the zeros on disk
    assert wals[0].stat().st_size == 64_000_000 and wals[0].stat().st_blocks * 512 < 8 << 20
    assert (into / "data" / "member" / "snap" / "db").exists()


@pytest.mark.slow
def test_member_ids_are_etcds_and_every_member_names_one_leader(cluster: Cluster) -> None:
    backend, db = cluster
    computed = dict(db.members)
    for node in NODES:
        assert db.member_list(backend, node) == computed
    leader = _leader(backend, db)
    assert leader in NODES


@pytest.mark.slow
def test_kv_ops_complete_as_the_workload_expects(cluster: Cluster) -> None:
    backend, _ = cluster
    client = _client(backend, "n2")
    steps = [
        (_op("read", {"key": 10}), "ok", {"key": 10, "value": None}),
        (_op("cas", {"key": 10, "from": 3, "to": 4}), "ok",
         {"key": 10, "from": 3, "to": 4, "swapped": False}),
        (_op("cas", {"key": 10, "from": None, "to": 1}), "ok",
         {"key": 10, "from": None, "to": 1, "swapped": True}),
        (_op("cas", {"key": 10, "from": None, "to": 2}), "ok",
         {"key": 10, "from": None, "to": 2, "swapped": False}),
        (_op("write", {"key": 10, "value": 5}), "ok", {"key": 10, "value": 5}),
        (_op("cas", {"key": 10, "from": 5, "to": 6}), "ok",
         {"key": 10, "from": 5, "to": 6, "swapped": True}),
        (_op("cas", {"key": 10, "from": 5, "to": 7}), "ok",
         {"key": 10, "from": 5, "to": 7, "swapped": False}),
        (_op("read", {"key": 10}), "ok", {"key": 10, "value": 6}),
    ]
    for invoke, outcome, value in steps:
        done = client.invoke(invoke, 2.0)
        assert (done["type"], done["value"], done["node"]) == (outcome, value, "n2"), done
    # another member reads what this one wrote (a linearizable read)
    assert _client(backend, "n3").invoke(_op("read", {"key": 10}), 2.0)["value"]["value"] == 6
    client.close()


@pytest.mark.slow
def test_appends_are_a_cas_loop_that_loses_and_repeats_no_piece(cluster: Cluster) -> None:
    backend, _ = cluster
    first = _client(backend, "n1")
    assert first.invoke(_op("append", {"key": 20, "value": ",1"}), 2.0)["type"] == "ok"
    assert first.invoke(_op("read", {"key": 20}), 2.0)["value"]["value"] == ",1"
    assert first.invoke(_op("write", {"key": 21, "value": 5}), 2.0)["type"] == "ok"
    assert first.invoke(_op("append", {"key": 21, "value": ",6"}), 2.0)["type"] == "ok"
    assert first.invoke(_op("read", {"key": 21}), 2.0)["value"]["value"] == "5,6"
    # clients on three members append to one key at once: each piece lands exactly once
    clients = [_client(backend, node) for node in NODES]

    def append(i: int) -> list[str]:
        return [clients[i].invoke(_op("append", {"key": 22, "value": f",{i}-{n}"}), 5.0)["type"]
                for n in range(10)]

    with ThreadPoolExecutor(len(clients)) as pool:
        outcomes = [t for done in pool.map(append, range(len(clients))) for t in done]
    assert outcomes == ["ok"] * 30, outcomes
    final = first.invoke(_op("read", {"key": 22}), 2.0)["value"]["value"]
    pieces = final.split(",")[1:]
    assert sorted(pieces) == sorted(f"{i}-{n}" for i in range(3) for n in range(10))
    for i in range(3):  # each client's own appends, in the order it made them
        assert [p for p in pieces if p.startswith(f"{i}-")] == [f"{i}-{n}" for n in range(10)]
    for client in [first, *clients]:
        client.close()


@pytest.mark.slow
def test_a_killed_member_fails_then_the_client_moves_on(cluster: Cluster) -> None:
    backend, db = cluster
    victim = next(n for n in NODES if n != _leader(backend, db))
    client = _client(backend, victim)
    db.kill(backend, victim)
    try:
        done = client.invoke(_op("write", {"key": 11, "value": 1}), 2.0)
        assert (done["type"], done["error"], done["node"]) == ("fail", "connect-failed", victim)
        done = client.invoke(_op("write", {"key": 11, "value": 2}), 2.0)
        assert done["type"] == "ok" and done["node"] != victim
    finally:
        db.start(backend, victim)
    assert _client(backend, victim).invoke(_op("read", {"key": 11}), 5.0)["value"]["value"] == 2


@pytest.mark.slow
def test_a_paused_member_leaves_a_write_unknown_and_a_read_failed(cluster: Cluster) -> None:
    backend, db = cluster
    victim = next(n for n in NODES if n != _leader(backend, db))
    client = _client(backend, victim)
    assert client.invoke(_op("read", {"key": 12}), 2.0)["type"] == "ok"  # connected
    db.pause(backend, victim)
    try:
        write = client.invoke(_op("write", {"key": 12, "value": 1}), 1.0)
        assert (write["type"], write["error"], write["node"]) == ("info", "timeout", victim)
        read = _client(backend, victim).invoke(_op("read", {"key": 12}), 1.0)
        assert (read["type"], read["error"]) == ("fail", "timeout")
    finally:
        db.resume(backend, victim)
    # awake again, it answers; the write may or may not have happened (the gateway drops a
    # request whose client left), which is why it was info and not fail
    deadline = time.monotonic() + 10
    read = {}
    while time.monotonic() < deadline:
        read = _client(backend, victim).invoke(_op("read", {"key": 12}), 2.0)
        if read["type"] == "ok":
            break
    assert read["type"] == "ok" and read["value"]["value"] in (None, 1), read


@pytest.mark.slow
def test_a_partitioned_leader_serves_no_reads_while_the_majority_goes_on(
        cluster: Cluster) -> None:
    backend, db = cluster
    old = _leader(backend, db)
    rest = [n for n in NODES if n != old]
    # etcd's peers probe each other every 4 s and check versions, on connections that name no
    # member: let those open first, as they would in any run (they must not carry raft traffic)
    time.sleep(max(0.0, 10.0 - (time.monotonic() - db.started)))
    backend.partition([(old, n) for n in rest] + [(n, old) for n in rest])
    try:
        isolated = _client(backend, old)
        read = isolated.invoke(_op("read", {"key": 13}), 2.0)
        assert read["type"] == "fail" and read["node"] == old, read
        new = _leader(backend, db, among=rest)
        assert new != old
        majority = _client(backend, rest[0])
        assert majority.invoke(_op("write", {"key": 13, "value": 1}), 5.0)["type"] == "ok"
        # well past an election timeout and etcd's probe interval: nothing reaches the old leader
        time.sleep(8)
        assert db.leaders(backend, [old])[old] != new
        read = _client(backend, old).invoke(_op("read", {"key": 13}), 2.0)
        assert read["type"] == "fail", f"the cut-off leader read across the partition: {read}"
    finally:
        backend.heal()
    assert _leader(backend, db) in NODES
    healed = _client(backend, old).invoke(_op("read", {"key": 13}), 5.0)
    assert healed["type"] == "ok" and healed["value"]["value"] == 1
