"""The schedule records each start and stop, cycles through kinds, and heals at the end."""

from __future__ import annotations

import random
import time
from typing import Any

from contracts.history import History
from nemesis.base import Fault
from nemesis.schedule import Schedule


class Recorder(Fault):
    def __init__(self, kind: str, fail_start: bool = False) -> None:
        self.kind = kind
        self.fail_start = fail_start
        self.calls: list[str] = []

    def choose(self, rng: random.Random) -> dict[str, Any]:
        return {"target": "one", "nodes": [rng.choice(["n1", "n2", "n3"])]}

    def start(self, choice: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("start")
        if self.fail_start:
            raise RuntimeError("boom")
        return choice

    def stop(self) -> dict[str, Any]:
        self.calls.append("stop")
        return {}

    def heal(self) -> None:
        self.calls.append("heal")


def run_schedule(faults: list[Fault], seconds: float) -> list[dict[str, Any]]:
    history = History()
    schedule = Schedule(faults, 0.05, seed=11, history=history)
    schedule.start()
    time.sleep(seconds)
    schedule.stop()
    schedule.heal_all()
    return history.ops()


def test_every_kind_starts_and_each_start_is_stopped() -> None:
    faults: list[Fault] = [Recorder("partition"), Recorder("pause"), Recorder("kill")]
    ops = run_schedule(faults, 0.8)
    fs = [op["f"] for op in ops if op["type"] == "ok"]
    assert {"start-partition", "start-pause", "start-kill"} <= set(fs)
    assert all(op["process"] == "nemesis" for op in ops)
    assert sum(f.startswith("start-") for f in fs) == sum(f.startswith("stop-") for f in fs)
    assert all(f.calls[-1] == "heal" for f in faults if isinstance(f, Recorder))


def test_a_failed_start_is_info_and_still_stopped() -> None:
    fault = Recorder("kill", fail_start=True)
    ops = run_schedule([fault], 0.2)
    infos = [op for op in ops if op["type"] == "info"]
    assert infos and infos[0]["f"] == "start-kill" and "boom" in infos[0]["detail"]
    assert "stop" in fault.calls
