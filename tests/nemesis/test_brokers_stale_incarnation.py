"""The `stale-incarnation` nemesis against a fake cluster: it kills a broker, waits for the new
incarnation, replays the old one's registration and records the answer (nemesis/brokers.py)."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from nemesis import brokers
from nemesis.base import Env, NoEffect
from nemesis.brokers import NOT_SENT, StaleIncarnation, replaced_live
from nemesis.registry import available, build

NODES = ["n1", "n2", "n3", "n4", "n5"]
BROKERS = ["n4", "n5"]


def incarnation(ms: int) -> str:
    """A UUIDv7-like id whose order is its time."""
    return str(uuid.UUID(int=(ms << 80) | (7 << 76) | 1))


class Hosts:
    name = "fake"

    def __init__(self) -> None:
        self.running = set(NODES)

    def is_running(self, node: str) -> bool:
        return node in self.running


class Cluster:
    """Controllers that keep one registration per broker; a restart registers a newer
    incarnation (unless `register_on_start` is off); `accept_old` is the unsafe controller."""

    def __init__(self, hosts: Hosts, accept_old: bool = False,
                 register_on_start: bool = True) -> None:
        self.hosts = hosts
        self.clock = 1000
        self.registered = {b: self._info(b, incarnation(self._tick()), epoch=10 + i)
                           for i, b in enumerate(BROKERS)}
        self.accept_old = accept_old
        self.register_on_start = register_on_start
        self.calls: list[tuple[str, str]] = []
        self.sent: list[dict[str, Any]] = []

    def _tick(self) -> int:
        self.clock += 1000
        return self.clock

    def _info(self, broker: str, inc: str, epoch: int) -> dict[str, Any]:
        return {"broker": int(broker[1:]), "incarnation": inc, "epoch": epoch,
                "host": "10.0.0." + broker[1:], "port": 9093, "fenced": False,
                "shutdown": False, "since": epoch, "state": "active"}

    # DB
    def start(self, backend: Any, node: str) -> None:
        self.calls.append(("start", node))
        self.hosts.running.add(node)
        if self.register_on_start:
            epoch = self.registered[node]["epoch"] + 5
            self.registered[node] = self._info(node, incarnation(self._tick()), epoch)

    def kill(self, backend: Any, node: str) -> None:
        self.calls.append(("kill", node))
        self.hosts.running.discard(node)

    # CanReplayRegistration
    def registration(self, backend: Any, nodes: list[str], broker: str) -> dict[str, Any] | None:
        found = self.registered.get(broker)
        return dict(found) if found else None

    def register(self, backend: Any, nodes: list[str], broker: str,
                 registration: dict[str, Any]) -> dict[str, Any]:
        self.sent.append({"broker": broker, **registration})
        now = self.registered[broker]
        if replaced_live(now, registration["incarnation"]) and not self.accept_old:
            return {"error": "duplicate_broker_registration", "broker_epoch": -1}
        epoch = now["epoch"] + 1
        self.registered[broker] = self._info(broker, registration["incarnation"], epoch)
        return {"error": "none", "broker_epoch": epoch}


def fault(cluster: Cluster, hosts: Hosts) -> StaleIncarnation:
    return StaleIncarnation(Env(hosts, cluster, NODES, brokers=BROKERS))  # type: ignore[arg-type]


def test_the_old_incarnation_is_replayed_after_the_new_one_registered() -> None:
    hosts = Hosts()
    cluster = Cluster(hosts)
    nemesis = fault(cluster, hosts)
    choice = nemesis.choose(random.Random(1))
    node = choice["node"]
    old = cluster.registered[node]["incarnation"]
    assert node in BROKERS and choice == {"node": node, "old_incarnation": old}
    started = nemesis.start(choice)
    assert cluster.calls == [("kill", node), ("start", node)]
    assert started["new_incarnation"] != old
    new = cluster.registered[node]["incarnation"]
    assert started == {**choice, "new_incarnation": new, "evidence": {
        node: f"killed and restarted; the controller holds incarnation {new}"}}
    stopped = nemesis.stop()
    assert stopped == {"node": node, "old_incarnation": old,
                       "answer": {"error": "duplicate_broker_registration", "broker_epoch": -1},
                       "held_before": {"incarnation": new, "fenced": False},
                       "held_after": new, "evidence": {
                           node: "answered duplicate_broker_registration; the controller "
                                 "holds another one"}}
    # the replay is the old process's registration: its incarnation, host and port
    assert cluster.sent[0]["incarnation"] == old and cluster.sent[0]["host"] == "10.0.0." + node[1:]


def test_an_accepted_replay_is_recorded_with_its_epoch() -> None:
    hosts = Hosts()
    cluster = Cluster(hosts, accept_old=True)
    nemesis = fault(cluster, hosts)
    nemesis.start(nemesis.choose(random.Random(2)))
    stopped = nemesis.stop()
    answer = stopped["answer"]
    assert answer["error"] == "none" and answer["broker_epoch"] > 0
    # the controller handed the broker id back to the zombie, and the evidence says so
    assert stopped["held_after"] == stopped["old_incarnation"]
    assert stopped["evidence"][stopped["node"]].endswith("the controller holds the old one")


def test_nothing_is_replayed_when_the_new_incarnation_never_registers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brokers, "REGISTER_TIMEOUT", 0.3)
    hosts = Hosts()
    cluster = Cluster(hosts, register_on_start=False)
    nemesis = fault(cluster, hosts)
    choice = nemesis.choose(random.Random(3))
    with pytest.raises(NoEffect, match="was not registered and unfenced") as none:
        nemesis.start(choice)
    assert none.value.evidence == {
        choice["node"]: f"killed and restarted; still registered as {choice['old_incarnation']}"}
    stopped = nemesis.stop()
    assert stopped["answer"] == {"error": NOT_SENT, "broker_epoch": -1} and not cluster.sent


def test_an_unregistered_broker_is_left_alone() -> None:
    hosts = Hosts()
    cluster = Cluster(hosts)
    cluster.registered.clear()
    nemesis = fault(cluster, hosts)
    choice = nemesis.choose(random.Random(4))
    assert choice["old_incarnation"] is None and "reason" in choice
    with pytest.raises(NoEffect, match="no controller knows a registration"):
        nemesis.start(choice)
    assert cluster.calls == []  # nothing killed
    assert nemesis.stop()["answer"]["error"] == NOT_SENT


def test_heal_starts_the_brokers_that_are_down() -> None:
    hosts = Hosts()
    cluster = Cluster(hosts)
    hosts.running.discard("n5")
    fault(cluster, hosts).heal()
    assert cluster.calls == [("start", "n5")]


def test_only_another_unfenced_incarnation_holds_a_live_session() -> None:
    # no order among incarnation ids: an older id replaces a newer one all the same
    assert replaced_live({"incarnation": incarnation(1000), "fenced": False}, incarnation(2000))
    assert not replaced_live({"incarnation": incarnation(1000), "fenced": False},
                             incarnation(1000))
    assert not replaced_live({"incarnation": incarnation(1000), "fenced": True}, incarnation(2000))
    assert not replaced_live(None, incarnation(1)) and \
        not replaced_live({"incarnation": "junk", "fenced": False}, incarnation(1))


def test_the_registry_builds_it_only_for_a_target_that_can_replay() -> None:
    hosts = Hosts()
    cluster = Cluster(hosts)
    assert available(hosts, cluster)["stale-incarnation"] is None  # type: ignore[arg-type]
    built = build(["stale-incarnation"],
                  Env(hosts, cluster, NODES, brokers=BROKERS))  # type: ignore[arg-type]
    assert isinstance(built[0], StaleIncarnation) and built[0].instant

    class Plain:
        def kill(self, backend: Any, node: str) -> None: ...

    assert available(hosts, Plain())["stale-incarnation"]  # type: ignore[arg-type]
