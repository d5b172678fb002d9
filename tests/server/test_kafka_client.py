"""A real third-party Kafka client (librdkafka through confluent-kafka) against the cluster."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from testkit.cluster import Cluster

ck = pytest.importorskip("confluent_kafka")
TOPIC = "__cluster_metadata"


def produce(bootstrap: str, values: range, timeout: float = 60.0) -> dict[int, int]:
    """Produce with acks=all; value -> offset of every acknowledged record."""
    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                            "enable.idempotence": False, "linger.ms": 5,
                            "message.timeout.ms": int(timeout * 1000)})
    acked: dict[int, int] = {}
    errors: list[Any] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[int(msg.value())] = msg.offset()
        else:
            errors.append(err)

    for v in values:
        while True:
            try:
                producer.produce(TOPIC, str(v).encode(), partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(timeout) == 0
    assert not errors, errors[:5]
    return acked


def consume(bootstrap: str, count: int, timeout: float = 60.0) -> list[tuple[int, int]]:
    """(offset, value) of the first `count` data records from offset 0, in delivery order."""
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "kraft-test",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), int(msg.value())))
    finally:
        consumer.close()
    return got


@pytest.mark.slow
@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_confluent_kafka_produces_and_consumes_10000_in_order(tmp_path: Path,
                                                              event_loop: str) -> None:
    with Cluster(tmp_path, event_loop=event_loop) as cluster:
        cluster.start()
        cluster.wait_leader()
        for i in cluster.ids:  # each node says which loop it runs on
            assert f"event loop: {event_loop}" in (tmp_path / f"node{i}.log").read_text()
        acked = produce(cluster.bootstrap, range(10_000))
        assert len(acked) == 10_000
        got = consume(cluster.bootstrap, 10_000)
        assert [v for _, v in got] == list(range(10_000))
        assert all(acked[v] == o for o, v in got)
        offsets = [o for o, _ in got]
        assert offsets == sorted(offsets)


@pytest.mark.slow
def test_kill_leader_then_kill_all_and_restart_keeps_acknowledged(tmp_path: Path) -> None:
    with Cluster(tmp_path) as cluster:
        cluster.start()
        leader = cluster.wait_leader()
        acked = produce(cluster.bootstrap, range(0, 2000))
        cluster.kill(leader)
        new = cluster.wait_leader(timeout=10.0, exclude=leader)
        assert new != leader
        acked.update(produce(cluster.bootstrap, range(2000, 4000)))
        assert len(acked) == 4000
        for i in list(cluster.procs):
            cluster.kill(i)
        cluster.start()
        cluster.wait_leader(timeout=10.0)
        got = dict((v, o) for o, v in consume(cluster.bootstrap, 4000))
        for value, offset in acked.items():
            assert got.get(value) == offset, (value, offset, got.get(value))
