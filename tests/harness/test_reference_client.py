"""The reference client's outcomes, against scripted Kafka answers (no node): kv writes, cas and
reads, the append read of a log whose prefix a snapshot replaced, and leader discovery within an
operation (issue 18) on scripted nodes and a scripted clock; and, on a real local cluster (slow),
appends across the kill of the leader."""

from __future__ import annotations

import json
import socket
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.backends.local import LocalBackend
from harness.targets import reference_client
from harness.targets.reference import ReferenceDB, ReferenceTarget
from harness.targets.reference_client import (
    KV_IMAGE,
    MIN_ATTEMPT_S,
    AppendClient,
    KvClient,
    ReferenceClient,
    _peer_closed,
    image_of,
)
from nemesis.base import Env
from reference_node.raft.image import decode_command
from reference_node.wire import (
    FETCH,
    LIST_OFFSETS,
    METADATA,
    METADATA_TOPIC,
    PRODUCE,
    ConnectFailed,
    ConnectionClosed,
    KafkaClient,
    RequestTimeout,
)
from reference_node.wire.apis import CLIENT_APIS
from reference_node.wire.records import build_batch, encode_value, parse_batches
from testkit.targets import deployed, wait_for_leader

Op = dict[str, Any]
START = 1000.0


class Clock:
    """The client's time in the scripted tests: only sleeping and timing out move it."""

    def __init__(self) -> None:
        self.now = START

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


CLOCK = Clock()


class Conn:
    """A KafkaClient that answers from a script and keeps what it was asked (and when); a node
    that is `down` refuses connections. A scripted RequestTimeout takes the call's whole time."""

    def __init__(self, *answers: Any, down: bool = False) -> None:
        self.answers = list(answers)
        self.down = down
        self.sent: list[tuple[int, Any]] = []
        self.sent_at: list[float] = []

    def call(self, api_key: int, build: Callable[[int], Any], timeout: float) -> Any:
        self.sent.append((api_key, build(CLIENT_APIS[api_key].max)))
        self.sent_at.append(CLOCK.now)
        CLOCK.now += 0.001
        answer = self.answers.pop(0)
        if isinstance(answer, RequestTimeout):
            CLOCK.now += timeout
        if isinstance(answer, Exception):
            raise answer
        return answer

    def api_versions(self, timeout: float | None = None) -> dict[int, Any]:
        CLOCK.now += 0.001
        if self.down:
            raise ConnectFailed("connection refused")
        return {}

    def apis(self) -> list[int]:
        return [api for api, _ in self.sent]

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def scripted_world(request: pytest.FixtureRequest,
                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The scripted clock, and no real connection: one the test did not script is refused.
    Not for the slow tests, which speak to real nodes."""
    if request.node.get_closest_marker("slow"):
        return
    CLOCK.now = START
    monkeypatch.setattr(reference_client, "time", CLOCK)
    monkeypatch.setattr(reference_client, "KafkaClient",
                        lambda *args, **kwargs: Conn(down=True))


def _cluster(monkeypatch: pytest.MonkeyPatch, nodes: dict[int, Conn], at: int) -> ReferenceClient:
    """An append client at node `at` of scripted nodes (each connection to node i speaks to
    nodes[i])."""
    client = AppendClient()
    client.names = {i: f"n{i}" for i in nodes}
    client.addresses = {i: ("127.0.0.1", 9000 + i) for i in nodes}
    client.current = client.home = at
    monkeypatch.setattr(reference_client, "KafkaClient",
                        lambda host, port, **kwargs: nodes[port - 9000])
    return client


def _client(conn: Conn, kind: type[ReferenceClient] = KvClient) -> ReferenceClient:
    """A client of the `kind` workload (kv's unless said) at one scripted node."""
    client = kind()
    client.names = {1: "n1"}
    client.addresses = {1: ("127.0.0.1", 1)}
    client.current = client.home = 1
    client.conns = {1: conn}  # type: ignore[dict-item]
    return client


def _produced(code: ErrorCode = ErrorCode.none, message: str | None = None) -> Any:
    part = SimpleNamespace(error_code=code, error_message=message, base_offset=7)
    return SimpleNamespace(responses=[SimpleNamespace(partition_responses=[part])])


def _fetched(topic: str = METADATA_TOPIC, code: ErrorCode = ErrorCode.none, hw: int = -1,
             records: bytes = b"", log_start: int = -1) -> Any:
    part = SimpleNamespace(error_code=code, high_watermark=hw, records=records,
                           log_start_offset=log_start,
                           current_leader=SimpleNamespace(leader_id=-1, leader_epoch=-1))
    return SimpleNamespace(responses=[SimpleNamespace(topic=topic, partitions=[part])])


def _leads(leader: int | None) -> Any:
    """A Metadata answer naming `leader` (None: the node knows no leader)."""
    part = SimpleNamespace(leader_id=-1 if leader is None else leader)
    return SimpleNamespace(topics=[SimpleNamespace(partitions=[part])])


def _not_leader(hint: int | None = None) -> Any:
    """A Fetch refused with NOT_LEADER_OR_FOLLOWER, naming `hint` as the leader."""
    answer = _fetched(code=ErrorCode.not_leader_or_follower)
    answer.responses[0].partitions[0].current_leader.leader_id = -1 if hint is None else hint
    return answer


def _listed(offset: int, code: ErrorCode = ErrorCode.none) -> Any:
    part = SimpleNamespace(error_code=code, offset=offset)
    return SimpleNamespace(topics=[SimpleNamespace(partitions=[part])])


def _log(base: int, values: list[int]) -> bytes:
    return build_batch(base, 1, [encode_value(v) for v in values])


def _image(kv: dict[Any, Any]) -> bytes:
    if not kv:
        return b""
    return build_batch(0, 1, [json.dumps(v).encode() for v in kv.values()],
                       keys=[json.dumps(k).encode() for k in kv])


def _op(f: str, **value: Any) -> Op:
    return {"process": 0, "type": "invoke", "f": f, "value": value}


def _sent_command(conn: Conn) -> Any:
    api, request = conn.sent[-1]
    assert api == PRODUCE and request.acks == -1
    records = request.topic_data[0].partition_data[0].records
    [batch] = parse_batches(records)
    [(_, _, value)] = batch.records
    assert value is not None
    return decode_command(value)


def test_a_write_is_one_produced_command_and_ok() -> None:
    conn = Conn(_produced())
    done = _client(conn).invoke(_op("write", key=2, value=9), 1.0)
    assert done["type"] == "ok" and done["value"] == {"key": 2, "value": 9}
    assert done["node"] == "n1"
    command = _sent_command(conn)
    assert (command.op, command.key, command.value) == ("write", 2, 9)


@pytest.mark.parametrize(("message", "swapped"), [("swapped", True), ("not-swapped", False)])
def test_a_cas_is_ok_with_the_outcome_the_node_applied(message: str, swapped: bool) -> None:
    conn = Conn(_produced(message=message))
    done = _client(conn).invoke(_op("cas", key=1, **{"from": None, "to": 5}), 1.0)
    assert done["type"] == "ok"
    assert done["value"] == {"key": 1, "from": None, "to": 5, "swapped": swapped}
    command = _sent_command(conn)
    assert (command.op, command.key, command.expected, command.value) == ("cas", 1, None, 5)


def test_a_committed_cas_whose_outcome_is_not_said_is_info_never_a_guess() -> None:
    done = _client(Conn(_produced(message=None))).invoke(
        _op("cas", key=1, **{"from": 1, "to": 2}), 1.0)
    assert done["type"] == "info" and done["error"] == "cas-outcome-unknown"


@pytest.mark.parametrize(("code", "outcome"), [
    (ErrorCode.request_timed_out, "info"),  # appended, maybe committed
    (ErrorCode.invalid_record, "fail"),  # refused before appending
])
def test_produce_errors_keep_their_certainty(code: ErrorCode, outcome: str) -> None:
    for op in (_op("write", key=0, value=1), _op("cas", key=0, **{"from": 1, "to": 2})):
        assert _client(Conn(_produced(code))).invoke(op, 1.0)["type"] == outcome


def test_each_workload_s_client_speaks_its_own_ops_only() -> None:
    # a kv client given a brokers op (and an append client a kv op) refuses it, sending nothing
    conn = Conn(_produced())
    done = _client(conn).invoke({"process": 0, "type": "invoke", "f": "describe", "value": None},
                                1.0)
    assert (done["type"], done["error"]) == ("fail", "unknown-f describe") and conn.sent == []
    done = _client(conn, AppendClient).invoke(_op("write", key=0, value=1), 1.0)
    assert (done["type"], done["error"]) == ("fail", "unknown-f write") and conn.sent == []
    assert set(ReferenceTarget().workloads()) == {"append", "kv", "brokers"}
    assert isinstance(ReferenceTarget().client("kv"), KvClient)


def test_an_append_reads_the_key_then_swaps_in_its_value_with_the_piece_at_the_end() -> None:
    conn = Conn(_fetched(KV_IMAGE, hw=3, records=_image({0: 4})), _produced(message="swapped"))
    done = _client(conn).invoke(_op("append", key=0, value=",9"), 1.0)
    assert done["type"] == "ok" and done["value"] == {"key": 0, "value": ",9"}
    assert conn.apis() == [FETCH, PRODUCE]
    command = _sent_command(conn)
    assert (command.op, command.key, command.expected, command.value) == ("cas", 0, 4, "4,9")


def test_an_append_whose_cas_lost_a_race_reads_again_and_one_out_of_time_fails() -> None:
    conn = Conn(_fetched(KV_IMAGE, hw=3, records=_image({0: 4})),
                _produced(message="not-swapped"),
                _fetched(KV_IMAGE, hw=5, records=_image({0: "4,8"})),
                _produced(message="swapped"))
    done = _client(conn).invoke(_op("append", key=0, value=",9"), 1.0)
    assert done["type"] == "ok"
    command = _sent_command(conn)
    assert (command.expected, command.value) == ("4,8", "4,8,9")
    racing = [_fetched(KV_IMAGE, hw=3, records=_image({0: 4})),
              _produced(message="not-swapped")] * 1000
    lost = _client(Conn(*racing)).invoke(_op("append", key=0, value=",9"), 1.0)
    # no cas swapped: nothing appended, certainly
    assert (lost["type"], lost["error"]) == ("fail", "append-contended")


def test_an_append_lost_on_the_wire_is_a_failure_while_reading_unknown_once_it_sent_a_cas(
        ) -> None:
    reading = _client(Conn(ConnectionClosed("closed"))).invoke(
        _op("append", key=0, value=",9"), 1.0)
    assert reading["type"] == "fail"
    casing = _client(Conn(_fetched(KV_IMAGE, hw=3, records=_image({0: 4})),
                          ConnectionClosed("closed"))).invoke(_op("append", key=0, value=",9"), 1.0)
    assert casing["type"] == "info"
    # after a cas that did not swap, the next read's loss is again a certain failure
    again = _client(Conn(_fetched(KV_IMAGE, hw=3, records=_image({0: 4})),
                         _produced(message="not-swapped"),
                         ConnectionClosed("closed"))).invoke(_op("append", key=0, value=",9"), 1.0)
    assert again["type"] == "fail"


def test_a_write_that_times_out_after_sending_is_info_a_read_fail() -> None:
    timeout = RequestTimeout("no answer")
    assert _client(Conn(timeout)).invoke(_op("write", key=0, value=1), 1.0)["type"] == "info"
    assert _client(Conn(timeout)).invoke(_op("read", key=0), 1.0)["type"] == "fail"


def test_a_kv_read_fetches_the_image_and_keeps_its_key() -> None:
    conn = Conn(_fetched(KV_IMAGE, hw=12, records=_image({0: 4, 3: None, 2: [1, 2]})))
    done = _client(conn).invoke(_op("read", key=2), 1.0)
    assert done["type"] == "ok" and done["value"] == {"key": 2, "value": [1, 2]}
    api, request = conn.sent[0]
    assert api == FETCH and request.topics[0].topic == KV_IMAGE
    assert int(request.topics[0].partitions[0].fetch_offset) == 0
    missing = _client(Conn(_fetched(KV_IMAGE, hw=12, records=_image({0: 4})))).invoke(
        _op("read", key=1), 1.0)
    assert missing["type"] == "ok" and missing["value"] == {"key": 1, "value": None}


def test_a_kv_read_that_is_refused_or_garbled_fails() -> None:
    refused = _client(Conn(_fetched(KV_IMAGE, code=ErrorCode.unknown_topic_or_partition)))
    assert refused.invoke(_op("read", key=0), 1.0)["type"] == "fail"
    garbled = build_batch(0, 1, [b"{not json"], keys=[b"0"])
    done = _client(Conn(_fetched(KV_IMAGE, hw=3, records=garbled))).invoke(_op("read", key=0), 1.0)
    assert done["type"] == "fail" and done["error"] == "bad-image"
    with pytest.raises(ValueError, match="image record 0 has no key"):
        image_of(build_batch(0, 1, [b"1"]))


def test_a_read_below_the_log_start_goes_on_from_it() -> None:
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range, log_start=40),
                _fetched(hw=42, records=_log(40, [100, 101])))
    done = _client(conn, AppendClient).invoke(_op("read", **{"from": 0}), 1.0)
    assert done["type"] == "ok"
    assert done["value"] == {"from": 40, "hw": 42, "records": [[40, 100], [41, 101]]}
    assert [int(r.topics[0].partitions[0].fetch_offset) for _, r in conn.sent] == [0, 40]


def test_without_the_log_start_in_the_answer_list_offsets_earliest_says_it() -> None:
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range), _listed(40),
                _fetched(hw=41, records=_log(40, [100])))
    done = _client(conn, AppendClient).invoke(_op("read", **{"from": 3}), 1.0)
    assert done["type"] == "ok" and done["value"]["from"] == 40
    api, request = conn.sent[1]
    assert api == LIST_OFFSETS and int(request.topics[0].partitions[0].timestamp) == -2


def test_out_of_range_above_the_log_start_fails() -> None:
    # past the end of the log: the log start is below the asked offset, nothing to go on from
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range, log_start=0))
    done = _client(conn, AppendClient).invoke(_op("read", **{"from": 99}), 1.0)
    assert done["type"] == "fail" and done["error"] == "offset-out-of-range"
    assert len(conn.sent) == 1


def test_the_log_start_moving_again_is_retried_only_once() -> None:
    conn = Conn(_fetched(code=ErrorCode.offset_out_of_range, log_start=40),
                _fetched(code=ErrorCode.offset_out_of_range, log_start=80))
    done = _client(conn, AppendClient).invoke(_op("read", **{"from": 0}), 1.0)
    assert done["type"] == "fail" and done["error"] == "offset-out-of-range"
    assert len(conn.sent) == 2


# --- leader discovery within an operation (issue 18) -------------------------------------------


def _appended_values(conn: Conn) -> list[int]:
    values = []
    for api, request in conn.sent:
        if api == PRODUCE:
            records = request.topic_data[0].partition_data[0].records
            values += [int(v) for batch in parse_batches(records) for _, _, v in batch.records
                       if v is not None]
    return values


def test_a_refused_append_is_answered_by_the_leader_metadata_names_in_the_same_op(
        monkeypatch: pytest.MonkeyPatch) -> None:
    follower = Conn(_produced(ErrorCode.not_leader_or_follower), _leads(2))
    leader = Conn(_produced())
    client = _cluster(monkeypatch, {1: follower, 2: leader, 3: Conn(down=True)}, at=1)
    done = client.invoke(_op("append", value=5), 1.5)
    assert done["type"] == "ok" and done["node"] == "n2"
    assert done["value"] == {"value": 5, "offset": 7}
    assert follower.apis() == [PRODUCE, METADATA] and leader.apis() == [PRODUCE]
    assert client.current == 2  # the next op starts at the leader


def test_after_the_leader_dies_an_append_waits_out_the_election_within_its_timeout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    refused = _produced(ErrorCode.not_leader_or_follower)
    dead = Conn(down=True)
    # round 1: both followers still name the dead leader; round 2: candidates, no leader known;
    # round 3: n2 leads
    n2 = Conn(refused, _leads(1), refused, _leads(None), _produced())
    n3 = Conn(refused, _leads(1), refused, _leads(None))
    client = _cluster(monkeypatch, {1: dead, 2: n2, 3: n3}, at=1)
    done = client.invoke(_op("append", value=5), 1.5)
    assert done["type"] == "ok" and done["node"] == "n2"
    assert CLOCK.now - START < 1.5
    # the same op every time, appended only where it was not refused
    assert _appended_values(n2) == [5, 5, 5] and _appended_values(n3) == [5, 5]


def test_a_refused_read_goes_where_the_refusal_points(monkeypatch: pytest.MonkeyPatch) -> None:
    follower = Conn(_not_leader(hint=3))
    leader = Conn(_fetched(hw=1, records=_log(0, [100])))
    client = _cluster(monkeypatch, {1: follower, 2: Conn(), 3: leader}, at=1)
    done = client.invoke(_op("read", **{"from": 0}), 1.5)
    assert done["type"] == "ok" and done["node"] == "n3"
    assert done["value"]["records"] == [[0, 100]]
    assert follower.apis() == [FETCH]  # no Metadata: the refusal named the leader


def test_a_read_is_asked_again_after_any_wire_error(monkeypatch: pytest.MonkeyPatch) -> None:
    lost = Conn(ConnectionClosed("closed the connection"))
    leader = Conn(_fetched(hw=1, records=_log(0, [100])))
    client = _cluster(monkeypatch, {1: lost, 2: leader}, at=1)
    done = client.invoke(_op("read", **{"from": 0}), 1.5)
    assert done["type"] == "ok" and done["node"] == "n2"


@pytest.mark.parametrize("answer", [
    ConnectionClosed("closed the connection"),  # sent, then the connection died
    _produced(ErrorCode.request_timed_out),  # appended, not known to commit
])
def test_an_append_whose_outcome_is_unknown_is_never_sent_again(
        monkeypatch: pytest.MonkeyPatch, answer: Any) -> None:
    first, other = Conn(answer), Conn(_produced())
    client = _cluster(monkeypatch, {1: first, 2: other}, at=1)
    done = client.invoke(_op("append", value=5), 1.5)
    assert done["type"] == "info" and done["node"] == "n1"
    assert first.apis() == [PRODUCE] and other.sent == []


def test_an_op_refused_everywhere_fails_and_starts_no_attempt_it_has_no_time_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refusing() -> Conn:
        return Conn(*[_produced(ErrorCode.not_leader_or_follower), _leads(None)] * 50)

    nodes = {1: Conn(down=True), 2: refusing(), 3: refusing()}
    client = _cluster(monkeypatch, nodes, at=1)
    done = client.invoke(_op("append", value=5), 1.0)
    assert done["type"] == "fail" and done["error"] in ("not-leader", "connect-failed")
    produced_at = [t for conn in nodes.values()
                   for (api, _), t in zip(conn.sent, conn.sent_at, strict=True) if api == PRODUCE]
    assert len(produced_at) > 2  # asked again after a pause, not given up after one round
    assert max(produced_at) <= START + 1.0 - MIN_ATTEMPT_S


def test_an_idle_connection_the_node_closed_is_seen_before_a_request_is_written() -> None:
    ours, theirs = socket.socketpair()
    conn = KafkaClient("127.0.0.1", 1)
    conn._sock = ours
    try:
        assert not _peer_closed(conn)
        theirs.close()  # the node's process died
        assert _peer_closed(conn)
    finally:
        conn.close()


# --- final reads (issue 40): a statement about one node -----------------------------------------


def _final(**value: Any) -> Op:
    return {**_op("read", **value), "final": True}


def test_a_final_read_is_asked_of_its_own_node_only_even_after_the_client_moved(
        monkeypatch: pytest.MonkeyPatch) -> None:
    follower = Conn(_not_leader(hint=2))
    leader = Conn(_fetched(hw=1, records=_log(0, [100])))
    client = _cluster(monkeypatch, {1: follower, 2: leader, 3: Conn()}, at=1)
    client.current = 2  # `open` moved it to the leader its node named
    done = client.invoke(_final(**{"from": 0}), 1.5)
    # the follower's refusal is the op's outcome: never the leader's answer under n1's name
    assert (done["type"], done["error"], done["node"]) == ("fail", "not-leader", "n1")
    assert follower.apis() == [FETCH] and leader.sent == []


def test_a_final_read_of_a_node_that_is_down_fails_there(monkeypatch: pytest.MonkeyPatch) -> None:
    others = {2: Conn(_fetched(hw=1, records=_log(0, [100]))), 3: Conn(_leads(2))}
    client = _cluster(monkeypatch, {1: Conn(down=True), **others}, at=1)
    done = client.invoke(_final(**{"from": 0}), 1.5)
    assert (done["type"], done["error"], done["node"]) == ("fail", "connect-failed", "n1")
    assert all(conn.sent == [] for conn in others.values())
    # an ordinary read moves on and is answered elsewhere, and says where
    assert client.invoke(_op("read", **{"from": 0}), 1.5)["node"] == "n2"


def test_a_final_read_its_node_answers_names_that_node(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _cluster(monkeypatch, {1: Conn(), 2: Conn(_fetched(hw=1, records=_log(0, [7])))},
                      at=2)
    done = client.invoke(_final(**{"from": 0}), 1.5)
    assert done["type"] == "ok" and done["node"] == "n2"
    assert done["value"] == {"from": 0, "hw": 1, "records": [[0, 7]]}


def test_a_partition_the_node_says_it_does_not_host_is_a_read_of_nothing_once_it_existed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = _fetched(code=ErrorCode.unknown_topic_or_partition)
    # never seen served in this run: it may not exist yet, so the read proves nothing
    done = _client(Conn(unknown), AppendClient).invoke(_final(**{"from": 0}), 1.0)
    assert (done["type"], done["error"]) == ("fail", "unknown-topic-or-partition")
    # once some client of the run was served the partition, the same answer is a definite
    # read of nothing, marked so; a new client (a final read's) shares what the run saw
    target = ReferenceTarget()
    target.db()
    first, final = target.client("append"), target.client("append")
    assert isinstance(first, AppendClient) and isinstance(final, AppendClient)
    for client, conn in ((first, Conn(_fetched(hw=1, records=_log(0, [7])))),
                         (final, Conn(unknown))):
        client.names, client.addresses = {1: "n1"}, {1: ("127.0.0.1", 1)}
        client.current = client.home = 1
        client.conns = {1: conn}  # type: ignore[dict-item]
    assert first.invoke(_op("read", **{"from": 0}), 1.0)["type"] == "ok"
    done = final.invoke(_final(**{"from": 0}), 1.0)
    assert (done["type"], done["node"], done["detail"]) == ("ok", "n1",
                                                            "unknown-topic-or-partition")
    assert done["value"] == {"from": 0, "hw": 0, "records": [], "absent": True}
    # a new deployment starts from nothing seen
    target.db()
    assert target.client("append").topics_seen == set()  # type: ignore[attr-defined]


# --- on a real cluster --------------------------------------------------------------------------

NODES = ["n1", "n2", "n3"]


def _wait_for_leader(backend: LocalBackend, db: ReferenceDB) -> str:
    return wait_for_leader(Env(backend, db, NODES))


@pytest.mark.slow
def test_after_the_leader_is_killed_its_clients_appends_are_answered_by_the_new_leader(
        tmp_path: Path) -> None:
    with deployed(ReferenceTarget(), ReferenceDB, NODES, "reference-client-kill",
                  tmp_path) as (backend, db):
        leader = _wait_for_leader(backend, db)
        clients = [ReferenceTarget().client("append") for _ in NODES]
        for i, (client, node) in enumerate(zip(clients, NODES, strict=True)):
            client.open(backend, NODES, node)
            # each now holds an idle connection to the leader
            assert client.invoke(_op("append", value=i + 1), 10.0)["type"] == "ok"
        db.kill(backend, leader)

        def append(i: int) -> Op:
            return clients[i].invoke(_op("append", value=100 + i), 10.0)

        with ThreadPoolExecutor(len(clients)) as pool:
            after = list(pool.map(append, range(len(clients))))
        assert [done["type"] for done in after] == ["ok"] * len(clients), after
        assert all(done["node"] != leader for done in after)
        read = clients[0].invoke(_op("read", **{"from": 0}), 10.0)
        for client in clients:
            client.close()
    assert read["type"] == "ok", read
    # (None: a record that is no append, the new leader's epoch start)
    logged = Counter(value for _, value in read["value"]["records"] if value is not None)
    assert all(count == 1 for count in logged.values()), logged  # nothing appended twice
    assert all([done["value"]["offset"], done["value"]["value"]] in read["value"]["records"]
               for done in after)


@pytest.mark.slow
def test_final_reads_on_real_nodes_are_each_node_s_own_answer(tmp_path: Path) -> None:
    with deployed(ReferenceTarget(), ReferenceDB, NODES, "reference-client-final",
                  tmp_path) as (backend, db):
        target = ReferenceTarget()
        leader = _wait_for_leader(backend, db)
        writer = target.client("append")
        writer.open(backend, NODES, leader)
        assert writer.invoke(_op("append", value=1), 10.0)["type"] == "ok"
        writer.close()
        down, up = (n for n in NODES if n != leader)
        db.kill(backend, down)
        done = {}
        for node in NODES:
            client = target.client("append")
            client.open(backend, NODES, node)
            done[node] = client.invoke(_final(**{"from": 0}), 5.0)
            client.close()
    assert {n: (d["type"], d["node"]) for n, d in done.items()} == {
        n: ("ok" if n == leader else "fail", n) for n in NODES}, done
    assert done[down]["error"] == "connect-failed" and done[up]["error"] == "not-leader"
    assert 1 in [value for _, value in done[leader]["value"]["records"]]
