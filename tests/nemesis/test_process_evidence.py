"""Kill and pause prove what they did (nemesis/process.py): a kill that the process is gone, a
pause that it is stopped, their stops that it runs again; a node that was down already is not
affected, and a start that could affect no node is `NoEffect`, recorded info/no-effect."""

from __future__ import annotations

import random
import signal
from typing import Any

import pytest

from contracts.history import History
from nemesis import process
from nemesis.base import Env, NoEffect
from nemesis.process import Kill, Pause
from nemesis.schedule import Schedule

NODES = ["n1", "n2", "n3"]


class Processes:
    """A backend whose nodes' daemons are a state each, moved by signals as the kernel would;
    a `deaf` node ignores every signal (a process the harness does not reach)."""

    name = "fake"

    def __init__(self) -> None:
        self.state = dict.fromkeys(NODES, "running")
        self.deaf: set[str] = set()
        self.signals: list[tuple[str, str]] = []

    def signal(self, node: str, sig: signal.Signals) -> None:
        self.signals.append((node, sig.name))
        if node in self.deaf or self.state[node] == "gone":
            return  # as the backends do: a signal to a process that is gone is sent quietly
        if sig == signal.SIGKILL:
            self.state[node] = "gone"
        elif sig == signal.SIGSTOP:
            self.state[node] = "stopped"
        elif sig == signal.SIGCONT:
            self.state[node] = "running"

    def is_running(self, node: str) -> bool:
        return self.state[node] != "gone"

    def process_state(self, node: str) -> str:
        return self.state[node]


class Nodes:
    """A target's DB over `Processes`: kill, pause, resume are signals; start runs the node."""

    def __init__(self, backend: Processes) -> None:
        self.backend = backend
        self.started: list[str] = []

    def start(self, backend: Any, node: str) -> None:
        self.started.append(node)
        self.backend.state[node] = "running"

    def kill(self, backend: Any, node: str) -> None:
        backend.signal(node, signal.SIGKILL)

    def pause(self, backend: Any, node: str) -> None:
        backend.signal(node, signal.SIGSTOP)

    def resume(self, backend: Any, node: str) -> None:
        backend.signal(node, signal.SIGCONT)


def world() -> tuple[Processes, Nodes, Env]:
    backend = Processes()
    db = Nodes(backend)
    return backend, db, Env(backend, db, list(NODES))  # type: ignore[arg-type]


def chose(*nodes: str) -> dict[str, Any]:
    return {"target": "minority", "nodes": list(nodes)}


@pytest.fixture(autouse=True)
def quick_proof(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "PROOF_WAIT_S", 0.05)


# -- kill ------------------------------------------------------------------------------------------

def test_a_kill_proves_each_process_gone_and_its_stop_that_it_runs_again() -> None:
    backend, db, env = world()
    kill = Kill(env, ["minority"])
    done = kill.start(chose("n1", "n2"))
    assert done == {"target": "minority", "nodes": ["n1", "n2"],
                    "evidence": {"n1": "gone", "n2": "gone"}}
    assert backend.state == {"n1": "gone", "n2": "gone", "n3": "running"}
    assert kill.stop() == {"nodes": ["n1", "n2"], "evidence": {"n1": "running", "n2": "running"}}
    assert db.started == ["n1", "n2"]


def test_a_node_already_down_is_not_killed_and_its_stop_does_not_start_it() -> None:
    backend, db, env = world()
    backend.state["n3"] = "gone"  # killed by another fault, say
    kill = Kill(env, ["minority"])
    done = kill.start(chose("n1", "n3"))
    assert done["nodes"] == ["n1"]
    assert done["evidence"] == {"n1": "gone", "n3": "already gone"}
    assert ("n3", "SIGKILL") not in backend.signals
    assert kill.stop()["nodes"] == ["n1"]
    assert db.started == ["n1"] and backend.state["n3"] == "gone"


def test_a_kill_of_nodes_all_down_already_has_no_effect() -> None:
    backend, _db, env = world()
    backend.state["n2"] = "gone"
    with pytest.raises(NoEffect) as raised:
        Kill(env, ["one"]).start(chose("n2"))
    assert raised.value.evidence == {"n2": "already gone"}
    assert "n2 already gone" in raised.value.reason


def test_a_process_that_outlives_its_kill_fails_the_start_and_is_not_restarted() -> None:
    backend, db, env = world()
    backend.deaf.add("n1")
    kill = Kill(env, ["one"])
    with pytest.raises(RuntimeError, match="n1 still running after the kill"):
        kill.start(chose("n1"))
    assert kill.stop() == {"nodes": ["n1"], "evidence": {"n1": "running"}}
    assert db.started == []  # it never went down: starting it again would fail


def test_a_node_left_down_after_its_restart_fails_the_stop() -> None:
    _backend, db, env = world()
    kill = Kill(env, ["one"])
    kill.start(chose("n2"))
    db.start = lambda _backend, node: None  # type: ignore[method-assign]  # it never comes up
    with pytest.raises(RuntimeError, match="n2 not running after the restart"):
        kill.stop()


# -- pause -----------------------------------------------------------------------------------------

def test_a_pause_proves_each_process_stopped_and_its_stop_that_it_runs_again() -> None:
    backend, _db, env = world()
    pause = Pause(env, ["minority"])
    done = pause.start(chose("n2"))
    assert done == {"target": "minority", "nodes": ["n2"], "evidence": {"n2": "stopped"}}
    assert backend.state["n2"] == "stopped"
    assert pause.stop() == {"nodes": ["n2"], "evidence": {"n2": "running"}}
    assert backend.state["n2"] == "running"


def test_a_pause_of_a_dead_node_has_no_effect_and_sends_it_nothing() -> None:
    # issue 40: `start-pause` on n3 was `ok` while n3 was dead; no SIGSTOP reached anything
    backend, _db, env = world()
    kill, pause = Kill(env, ["one"]), Pause(env, ["one"])
    kill.start(chose("n3"))
    with pytest.raises(NoEffect) as raised:
        pause.start(chose("n3"))
    assert raised.value.evidence == {"n3": "already gone"}
    assert "no node could be stopped" in raised.value.reason
    assert ("n3", "SIGSTOP") not in backend.signals
    assert pause.stop() == {"nodes": [], "evidence": {}}  # nothing to resume


def test_a_pause_takes_effect_on_the_nodes_that_run_and_says_so_of_the_others() -> None:
    backend, _db, env = world()
    backend.state["n1"] = "gone"
    done = Pause(env, ["minority"]).start(chose("n1", "n2"))
    assert done["nodes"] == ["n2"]
    assert done["evidence"] == {"n1": "already gone", "n2": "stopped"}


def test_a_process_still_running_after_sigstop_fails_the_start_and_is_resumed_at_stop() -> None:
    backend, _db, env = world()
    backend.deaf.add("n1")
    pause = Pause(env, ["one"])
    with pytest.raises(RuntimeError, match="n1 still running after the pause"):
        pause.start(chose("n1"))
    assert pause.stop()["nodes"] == ["n1"]  # the half-done start is undone all the same
    assert backend.signals[-1] == ("n1", "SIGCONT")


def test_a_paused_node_killed_meanwhile_is_gone_at_stop_and_the_stop_is_done() -> None:
    backend, _db, env = world()
    pause = Pause(env, ["one"])
    pause.start(chose("n1"))
    backend.state["n1"] = "gone"  # SIGKILL ends a stopped process too
    assert pause.stop() == {"nodes": ["n1"], "evidence": {"n1": "gone"}}


def test_a_process_still_stopped_after_sigcont_fails_the_stop() -> None:
    backend, _db, env = world()
    pause = Pause(env, ["one"])
    pause.start(chose("n1"))
    backend.deaf.add("n1")
    with pytest.raises(RuntimeError, match="n1 still stopped after SIGCONT"):
        pause.stop()


# -- as the schedule records them ------------------------------------------------------------------

class Dead:
    """A fault whose every start finds its node down."""

    kind = "pause"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def choose(self, rng: random.Random) -> dict[str, Any]:
        return chose("n3")

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("start")
        raise NoEffect("no node could be stopped: n3 already gone", {"n3": "already gone"})

    def stop(self) -> dict[str, Any]:
        self.calls.append("stop")
        return {}

    def heal(self) -> None:
        self.calls.append("heal")


def test_the_schedule_records_a_start_of_no_effect_as_info_and_starts_it_again_next() -> None:
    history = History()
    fault = Dead()
    schedule = Schedule([fault], 0.0, seed=1, history=history)  # type: ignore[list-item]
    schedule._do(fault, "start")  # type: ignore[arg-type]
    assert "pause" not in schedule.active and schedule.started == 0
    invoke, info = history.ops()
    assert invoke["type"] == "invoke" and invoke["value"] == chose("n3")
    assert info["type"] == "info" and info["f"] == "start-pause"
    assert info["error"] == "no-effect"
    assert info["detail"] == "no node could be stopped: n3 already gone"
    assert info["value"] == {**chose("n3"), "evidence": {"n3": "already gone"}}
    # nothing was done, so nothing is stopped: its next turn is a start again
    assert schedule._next([]) is fault and fault.kind not in schedule.active


def test_a_start_that_took_effect_is_counted_and_recorded_ok_with_its_evidence() -> None:
    history = History()
    _backend, _db, env = world()
    pause = Pause(env, ["one"])
    schedule = Schedule([pause], 0.0, seed=1, history=history)
    schedule._do(pause, "start")
    assert schedule.started == 1 and "pause" in schedule.active
    done = history.ops()[-1]
    assert done["type"] == "ok" and set(done["value"]["evidence"].values()) == {"stopped"}
