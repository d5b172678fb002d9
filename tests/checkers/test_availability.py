"""The availability floor (`--min-availability`): a verdict on the share of ok operations per fault
kind, judged from the stored history and test.json alone."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from chk_histories import Builder
from chk_runs import write_run

import workloads
from checkers import availability
from checkers.faults import windows
from harness.cli import main as kraft


def kill_run() -> tuple[Builder, int]:
    """Two ok appends, a kill window in which 1 of 4 appends is ok, two ok appends after it, a
    final read: 25% ok during kill, 100% outside. Returns the history and the kill's start op."""
    b = Builder()
    b.append(1, 10, 0)
    b.append(2, 11, 1)
    kill = b.nemesis("start-kill", "n1")
    b.append(1, 12, 2)
    for value in (13, 14, 15):
        b.append(2, value, None, type_="fail")
    b.nemesis("stop-kill")
    b.append(1, 16, 3)
    b.append(2, 17, 4)
    b.read(3, 0, 5, [[0, 10], [1, 11], [2, 12], [3, 16], [4, 17]], final=True)
    return b, kill


def test_a_kill_window_below_its_floor_fails_naming_kind_share_floor_and_window() -> None:
    b, kill = kill_run()
    result = availability.check(b.ops, {"min_availability": {"kill": 0.5}})
    assert result["valid"] is False
    [anomaly] = result["anomalies"]["low-availability"]
    assert anomaly["fault"] == "kill" and anomaly["share"] == 0.25 and anomaly["floor"] == 0.5
    assert anomaly["ops"] == [kill]  # the nemesis op that opened the window
    assert "during kill: 25.0% of 4 operations ok (1), below the floor 50.0%" in \
        anomaly["explanation"]
    assert f"(op {kill}) 1/4 ok" in anomaly["explanation"]
    assert result["measured"]["kill"] == {"floor": 0.5, "ops": 4, "ok": 1, "share": 0.25,
                                          "spans": 1}


def test_a_floor_met_passes_and_equal_to_the_share_is_met() -> None:
    b, _ = kill_run()
    for floors in ({"kill": 0.25}, {"*": 0.2}, {"kill": 0.0, "none": 1.0}):
        result = availability.check(b.ops, {"min_availability": floors})
        assert result["valid"] is True, floors
        assert not result["anomalies"]


def test_a_bare_fraction_judges_every_kind_and_outside_faults() -> None:
    b, _ = kill_run()
    result = availability.check(b.ops, {"min_availability": {"*": 0.9}})
    assert result["valid"] is False
    # the final read is set aside: outside the window, 4 appends, all ok
    assert result["measured"]["none"] == {"floor": 0.9, "ops": 4, "ok": 4, "share": 1.0,
                                          "spans": 2}
    assert [a["fault"] for a in result["anomalies"]["low-availability"]] == ["kill"]
    assert "during" not in result["measured"]  # judged only when named


def test_outside_faults_below_its_floor_points_at_the_stretch() -> None:
    b = Builder()
    b.append(1, 10, None, type_="info")
    b.nemesis("start-pause")
    b.append(2, 11, 0)
    b.nemesis("stop-pause")
    result = availability.check(b.ops, {"min_availability": {"none": 0.5, "during": 1.0}})
    [anomaly] = result["anomalies"]["low-availability"]
    assert anomaly["fault"] == "none" and anomaly["ops"] == []
    assert "outside the fault windows: 0.0% of 1 operations ok" in anomaly["explanation"]
    assert "stretches: 0.0-0.0s 0/1 ok" in anomaly["explanation"]
    assert result["measured"]["during"]["share"] == 1.0


def test_missing_windows_and_windows_without_operations_are_not_judged() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.nemesis("start-kill")
    b.nemesis("stop-kill")  # no operation invoked during the kill
    result = availability.check(b.ops, {"min_availability": {"kill": 1.0, "partition": 1.0,
                                                              "during": 1.0}})
    assert result["valid"] is True and result["measured"] == {}
    assert result["unjudged"] == {
        "partition": "no window of this fault kind in the run",
        "kill": "no operation was invoked during kill",
        "during": "no operation was invoked during the fault windows"}


def test_no_operations_at_all() -> None:
    assert availability.check([], {"min_availability": {"*": 1.0}})["valid"] is True
    b = Builder()
    b.nemesis("start-kill")
    result = availability.check(b.ops, {"min_availability": {"*": 1.0}})
    assert result["valid"] is True
    assert set(result["unjudged"]) == {"kill", "none"}


def test_the_verdict_of_a_run_with_a_floor_and_without() -> None:
    b, _ = kill_run()
    assert workloads.check(b.ops, {})["valid"] is True
    assert "availability" not in workloads.check(b.ops, {})["checkers"]
    judged = workloads.check(b.ops, {"min_availability": {"kill": 0.5}})
    assert judged["valid"] is False and judged["anomaly_types"] == ["low-availability"]
    assert judged["checkers"]["availability"]["valid"] is False


def test_a_damaged_floor_in_test_json_is_unknown_never_a_pass() -> None:
    b, _ = kill_run()
    for damaged in ([0.5], {"kill": 2}, {"kill": "high"}, {"kill": True}, "0.5"):
        judged = workloads.check(b.ops, {"min_availability": damaged})
        assert judged["valid"] == "unknown", damaged
        assert "min_availability" in judged["reason"]


def test_kraft_check_applies_the_stored_floor_and_overrides_it(tmp_path: Path) -> None:
    b, _ = kill_run()
    run = write_run(tmp_path, b.ops, {"nemesis": ["kill"], "min_availability": {"kill": 0.5}})
    assert kraft(["check", "--no-plots", str(run)]) == 1
    assert kraft(["check", "--no-plots", "--min-availability", "kill=20%", str(run)]) == 0
    judged = json.loads((run / "results.json").read_text())["checkers"]["availability"]
    assert judged["floors"] == {"kill": 0.2}
    assert kraft(["check", "--no-plots", "--min-availability", "off", str(run)]) == 0
    assert "availability" not in json.loads((run / "results.json").read_text())["checkers"]
    assert json.loads((run / "test.json").read_text())["min_availability"] == {"kill": 0.5}
    assert kraft(["check", "--no-plots", "--min-availability", "kill=1.1", str(run)]) == 64


@pytest.mark.parametrize(("text", "floors"), [
    ("0.5", {"*": 0.5}),
    ("0.5,kill=0.2", {"*": 0.5, "kill": 0.2}),
    (" kill = 90% , none=1", {"kill": 0.9, "none": 1.0}),
    ("during=0", {"during": 0.0}),
    ("off", {}),
])
def test_parse_floors(text: str, floors: dict[str, float]) -> None:
    assert availability.parse_floors(text, ("kill", "pause")) == floors


@pytest.mark.parametrize(("text", "problem"), [
    ("1.5", "from 0 to 1"),
    ("-0.1", "from 0 to 1"),
    ("nan", "from 0 to 1"),
    ("kill=", "from 0 to 1"),
    ("=0.5", "KIND=FRACTION"),
    ("kil=0.5", "unknown fault kind 'kil'"),
    ("0.5,0.6", "a bare FRACTION given twice"),
    ("kill=0.5,kill=0.6", "kill given twice"),
    ("", "from 0 to 1"),
])
def test_parse_floors_refuses(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        availability.parse_floors(text, ("kill", "pause"))


def test_tally_counts_as_the_windows_cover_each_invoke() -> None:
    # The definition `kraft analyze` tabulates: an op is during each kind whose window covers its
    # invoke time, and during faults when any does; checked against it on random histories.
    for seed in range(300):
        rng = random.Random(seed)
        b = Builder()
        for _ in range(rng.randint(0, 40)):
            if rng.random() < 0.3:
                b.nemesis(f"{rng.choice(['start', 'stop'])}-{rng.choice(['kill', 'pause'])}")
            else:
                b.invoke(1, "read", None)
                b.complete(1, rng.choice(["ok", "fail"]))
        found = windows(b.ops)
        operations = [(op["time"], b.ops[op["index"] + 1]["type"] == "ok")
                      for op in b.ops if op["type"] == "invoke"]
        tallies = availability.tally(operations, found)
        for kind in {w.kind for w in found}:
            inside = [ok for time, ok in operations
                      if any(w.kind == kind and w.covers(time) for w in found)]
            assert (tallies.by_kind[kind].ops, tallies.by_kind[kind].ok) == \
                (len(inside), sum(inside)), seed
        during = [ok for time, ok in operations if any(w.covers(time) for w in found)]
        assert (tallies.during.ops, tallies.during.ok) == (len(during), sum(during)), seed
        assert tallies.outside.ops == len(operations) - len(during), seed


def test_config_records_the_floor_only_when_set() -> None:
    from harness.commands.test import config_from, parser
    from harness.config import UsageError

    def config(*argv: str) -> Any:
        return config_from(parser().parse_args(["--nemesis", "kill", "--seed", "1", *argv]))

    assert "min_availability" not in config().to_json()
    assert config("--min-availability", "0.5,kill=0.1").to_json()["min_availability"] == \
        {"*": 0.5, "kill": 0.1}
    with pytest.raises(UsageError, match="--min-availability: unknown fault kind 'kil'"):
        config("--min-availability", "kil=0.5")
