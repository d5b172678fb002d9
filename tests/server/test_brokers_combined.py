"""Kafka's combined mode as processes: three nodes with `process.roles=broker,controller`.

Each voter registers as a broker of its own id: the leader with itself (inside its core), the
others with it over the wire. Every node serves the `__brokers` view as a broker (its own image,
with its own "self" record). A killed node is fenced by the controller that leads after it (a new
leader first gives it a full session), and comes back with a greater incarnation and is unfenced
again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from reference_node.wire.brokers_view import BrokersView
from testkit.cluster import Cluster
from testkit.cluster import brokers_view as view

pytestmark = pytest.mark.slow

COMBINED = {"process.roles": "broker,controller", "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500", "broker.heartbeat.timeout.ms": "4500"}
NODES = (1, 2, 3)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("combined"), 3, extra=COMBINED)
    c.start()
    try:
        c.wait_leader(timeout=30)
        yield c
    finally:
        c.stop_all()



def until(what: str, check: Callable[[], Any], timeout: float = 40.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def states(got: BrokersView | None) -> dict[int, str]:
    return {} if got is None else {b: info["state"] for b, info in got.brokers.items()}


def test_every_voter_is_a_broker_and_a_killed_one_is_fenced_then_back(cluster: Cluster) -> None:
    def all_active(i: int) -> BrokersView | None:
        got = view(cluster, i)
        return got if states(got) == {n: "active" for n in NODES} else None

    for i in NODES:
        got = until(f"node {i} serves a view of three active brokers", lambda i=i: all_active(i))
        own = got.self_report
        assert own is not None and own["node"] == i and own["state"] == "active"
        assert own["incarnation"] == got.brokers[i]["incarnation"]
    leader = cluster.wait_leader(timeout=10)
    # the leader registered with itself: its registration is in the log like the others'
    registered = {e["broker"] for e in cluster.events(leader) if e["type"] == "broker-register"}
    assert leader in registered
    before = view(cluster, leader)
    assert before is not None
    old = uuid.UUID(before.brokers[leader]["incarnation"])

    cluster.kill(leader)
    survivor = next(i for i in NODES if i != leader)

    def fenced() -> bool:
        return states(view(cluster, survivor)).get(leader) == "inactive"

    until(f"the killed leader {leader} fenced in node {survivor}'s view", fenced)
    cluster.start(leader)

    def back() -> BrokersView | None:
        got = view(cluster, survivor)
        if got is None or states(got).get(leader) != "active":
            return None
        return got if uuid.UUID(got.brokers[leader]["incarnation"]).int > old.int else None

    after = until(f"node {leader} active again, a new incarnation", back)
    assert after.brokers[leader]["epoch"] > before.brokers[leader]["epoch"]
