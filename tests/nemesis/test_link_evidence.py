"""The network faults prove their cuts by probes (nemesis/probes.py), over the local backend's
real proxies: a partition's start records a cut link `blocked` and an open one `passes`, its stop
the cut link passing again; a cut that does not take effect, or probes that cannot tell, fail
the step (`info`, `fault-failed`); a backend that cannot probe leaves the cuts unproven."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts.backend import ClusterSpec
from contracts.history import FAULT_FAILED, History
from harness.backends.local import LocalBackend
from nemesis import probes
from nemesis.base import Env
from nemesis.lagging import LaggingFollower
from nemesis.links import Links
from nemesis.partition import Partition
from nemesis.probes import UNPROVEN, prove_cut, prove_restored
from nemesis.schedule import Schedule

NODES = ["n1", "n2", "n3"]


class Deaf(LocalBackend):
    """Cuts nothing, whatever it is asked: its probes, real, find every link open."""

    def partition(self, blocked: Iterable[tuple[str, str]]) -> None:
        self._log(f"partition: asked to cut {sorted(blocked)}, cut nothing")


class Severing(LocalBackend):
    """Cuts every link whatever it is asked: no probe can pass."""

    def partition(self, blocked: Iterable[tuple[str, str]]) -> None:
        super().partition((a, b) for a in NODES for b in NODES if a != b)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(probes, "TIMEOUT_S", 0.3)  # loopback answers in far less
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))


def _local(tmp_path: Path, kind: type[LocalBackend] = LocalBackend) -> LocalBackend:
    backend = kind()
    backend.setup(ClusterSpec(run_id=f"ev-{kind.__name__}", nodes=NODES, ports={"peer": 1},
                              run_dir=tmp_path))
    return backend


@pytest.fixture
def local(tmp_path: Path) -> Iterator[LocalBackend]:
    backend = _local(tmp_path)
    yield backend
    backend.teardown()


def _aimed(fault: Partition, cut: list[list[str]]) -> None:
    fault.choose = lambda _rng: {"shape": "one", "isolated": "n1", "cut": cut}  # type: ignore


def _steps(history: History) -> list[dict[str, Any]]:
    return [op for op in history.ops() if op["type"] != "invoke"]


def test_a_partition_start_proves_its_cut_and_its_stop_the_heal(local: LocalBackend) -> None:
    fault = Partition(Env(local, object(), list(NODES)), ["one"])  # type: ignore[arg-type]
    history = History()
    schedule = Schedule([fault], 1.0, seed=1, history=history)
    _aimed(fault, [["n1", "n2"], ["n1", "n3"], ["n2", "n1"], ["n3", "n1"]])
    schedule._do(fault, "start")
    schedule._do(fault, "stop")
    start, stop = _steps(history)
    assert start["type"] == "ok" and start["f"] == "start-partition"
    # both ways of the first cut link, and a link from n2 (n1 has none open): n2->n3
    assert start["value"]["evidence"] == {"cut": {"n1->n2": "blocked", "n2->n1": "blocked"},
                                          "open": {"n2->n3": "passes"}}
    assert stop["type"] == "ok"
    assert stop["value"]["evidence"] == {"restored": {"n1->n2": "passes", "n2->n1": "passes"}}


def test_an_open_link_from_the_cut_links_source_is_the_control(local: LocalBackend) -> None:
    local.partition([("n1", "n2")])
    evidence = prove_cut(local, NODES, {("n1", "n2")}, {("n1", "n2")})
    assert evidence == {"cut": {"n1->n2": "blocked"}, "open": {"n1->n3": "passes"}}


def test_a_cut_that_does_not_take_effect_fails_the_start_and_is_undone_by_its_stop(
        tmp_path: Path) -> None:
    backend = _local(tmp_path, Deaf)
    try:
        fault = Partition(Env(backend, object(), list(NODES)), ["one"])  # type: ignore[arg-type]
        history = History()
        schedule = Schedule([fault], 1.0, seed=1, history=history)
        _aimed(fault, [["n1", "n2"], ["n2", "n1"]])
        schedule._do(fault, "start")
        [failed] = _steps(history)
        assert failed["type"] == "info" and failed["error"] == FAULT_FAILED
        assert "the cut did not take effect: n1->n2, n2->n1 passes" in failed["detail"]
        assert schedule.started == 0 and "partition" in schedule.active  # its stop undoes it
    finally:
        backend.teardown()


def test_probes_that_cannot_pass_an_open_link_fail_the_start(tmp_path: Path) -> None:
    backend = _local(tmp_path, Severing)
    try:
        links = Links(backend)
        links.cut("partition", {("n1", "n2")})
        with pytest.raises(RuntimeError, match="n1->n3, not cut, is blocked too"):
            prove_cut(backend, NODES, {("n1", "n2")}, links.now())
    finally:
        backend.teardown()


def test_a_heal_proves_only_the_links_no_other_fault_still_cuts(local: LocalBackend) -> None:
    links = Links(local)
    links.cut("lagging-follower", {("n3", "n1"), ("n1", "n3")})
    links.cut("partition", {("n1", "n2"), ("n1", "n3")})
    links.restore("partition")
    evidence = prove_restored(local, {("n1", "n2"), ("n1", "n3")}, links.now())
    assert evidence == {"restored": {"n1->n2": "passes"}, "still cut": ["n1->n3"]}


def test_a_heal_that_leaves_a_link_blocked_fails_the_stop(local: LocalBackend) -> None:
    local.partition([("n2", "n1")])  # behind the faults' back: their bookkeeping is healed
    with pytest.raises(RuntimeError, match="n1->n2 still blocked after the heal"):
        prove_restored(local, {("n1", "n2")}, frozenset())


def test_a_lagging_follower_proves_its_follower_cut_off(local: LocalBackend) -> None:
    class Leading:
        def leaders(self, backend: object, nodes: list[str]) -> dict[str, str]:
            return dict.fromkeys(nodes, "n1")

    fault = LaggingFollower(Env(local, Leading(), list(NODES)), 5.0)  # type: ignore[arg-type]
    choice = fault.choose(random.Random(1))
    done = fault.start(choice)
    lagging = choice["node"]
    assert set(done["evidence"]["cut"].values()) == {"blocked"}
    assert all(lagging in name.split("->") for name in done["evidence"]["cut"])
    assert list(done["evidence"]["open"].values()) == ["passes"]
    assert set(fault.stop()["evidence"]["restored"].values()) == {"passes"}


def test_a_backend_that_cannot_probe_leaves_the_cut_unproven() -> None:
    class Net:
        name = "fake"

        def partition(self, blocked: Iterable[tuple[str, str]]) -> None: ...

        def heal(self) -> None: ...

    fault = Partition(Env(Net(), object(), list(NODES)), ["one"])  # type: ignore[arg-type]
    done = fault.start(fault.choose(random.Random(1)))
    assert done["evidence"] == UNPROVEN
    assert fault.stop()["evidence"] == UNPROVEN
