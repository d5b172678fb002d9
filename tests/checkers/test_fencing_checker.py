"""The fencing checker (issue 17): each anomaly it claims to catch is caught, and its near miss (the
same story inside the bounds a correct cluster needs) is not; a fault-free run is valid."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

from chk_runs import write_run

import workloads
from checkers import fencing
from checkers.node_data import NodeData
from checkers.summary import render

CONTROLLERS = ["n1", "n2", "n3"]
BROKERS = ["n4", "n5"]
TIMINGS = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500, "broker_timeout_ms": 4500}
TEST: dict[str, Any] = {"workload": "brokers", "nodes": CONTROLLERS, "brokers": BROKERS,
                        "fencing": TIMINGS, "outcome": "complete", "nemesis": ["partition"]}
ZERO_MS = 1_780_000_000_000.0  # Unix ms of history time 0
S = 1_000_000_000  # ns


def incarnation(started_ms: int) -> str:
    """A UUIDv7 as the node makes them: 48-bit Unix ms on top, version 7."""
    return str(uuid.UUID(int=(started_ms << 80) | (7 << 76) | (2 << 62) | 12345))


OLD, NEW, NEWER = incarnation(1000), incarnation(2000), incarnation(3000)


def info(broker: int, epoch: int, inc: str = NEW, fenced: bool = False,
         since: int | None = None) -> dict[str, Any]:
    return {"broker": broker, "incarnation": inc, "epoch": epoch, "host": "127.0.0.1",
            "port": 9000 + broker, "fenced": fenced, "shutdown": False,
            "since": epoch + 1 if since is None else since,
            "state": "inactive" if fenced else "active"}


LISTED = [info(4, 10), info(5, 12)]


def self_record(node: int, epoch: int, state: str = "active", age: int | None = 100,
                self_fenced: bool = False, offset: int = 50, inc: str = NEW) -> dict[str, Any]:
    return {"node": node, "role": "broker", "state": state, "incarnation": inc, "epoch": epoch,
            "self_fenced": self_fenced, "contact_age_ms": age, "offset": offset}


class History:
    """Ops placed at times (seconds), numbered in time order when built."""

    def __init__(self) -> None:
        self.placed: list[tuple[float, int, dict[str, Any]]] = []
        self.process = 0

    def _put(self, at: float, op: dict[str, Any]) -> None:
        self.placed.append((at, len(self.placed), op))

    def describe(self, node: str, at: float, brokers: list[dict[str, Any]] | None = None,
                 own: dict[str, Any] | None = None, took: float = 0.05, type_: str = "ok",
                 error: str | None = None) -> History:
        role = "broker" if node in BROKERS else "controller"
        listed = LISTED if brokers is None else brokers
        value = {"node": node, "role": role, "offset": 50, "self": own,
                 "brokers": {str(i["broker"]): i for i in listed}}
        self.process += 1
        self._put(at, {"process": self.process, "type": "invoke", "f": "describe",
                       "value": None, "node": node})
        done: dict[str, Any] = {"process": self.process, "type": type_, "f": "describe",
                                "value": value if type_ == "ok" else None, "node": node}
        if error:
            done["error"] = error
        self._put(at + took, done)
        return self

    def nemesis(self, f: str, at: float, value: dict[str, Any] | None,
                done: dict[str, Any] | None = None, type_: str = "ok") -> History:
        self._put(at, {"process": "nemesis", "type": "invoke", "f": f, "value": value})
        self._put(at + 0.01, {"process": "nemesis", "type": type_, "f": f,
                              "value": value if done is None else done})
        return self

    def cut(self, at: float, until: float | None, links: list[list[str]],
            kind: str = "partition") -> History:
        self.nemesis(f"start-{kind}", at, {"shape": "test", "cut": links})
        if until is not None:
            self.nemesis(f"stop-{kind}", until, None, {"healed": "all"})
        return self

    def down(self, kind: str, nodes: list[str], at: float, until: float | None) -> History:
        self.nemesis(f"start-{kind}", at, {"target": "one", "nodes": nodes})
        if until is not None:
            self.nemesis(f"stop-{kind}", until, None, {"nodes": nodes})
        return self

    def ops(self) -> list[dict[str, Any]]:
        ops = []
        for index, (at, _, op) in enumerate(sorted(self.placed, key=lambda p: (p[0], p[1]))):
            ops.append({"index": index, "time": int(at * S), **op})
            if op["process"] == "nemesis":
                ops[-1]["wall"] = dt.datetime.fromtimestamp(
                    (ZERO_MS + at * 1000) / 1000, dt.UTC).isoformat(timespec="milliseconds")
        return ops


def isolate(node: str, others: list[str]) -> list[list[str]]:
    return [[a, b] for o in others for a, b in ((node, o), (o, node))]


def led(node: int, at: float) -> dict[str, Any]:
    return {"ts": ZERO_MS + at * 1000, "node": node, "type": "state", "state": "leader",
            "epoch": 1, "leader": node, "voted_for": node}


def node(name: str, events: list[dict[str, Any]] | None = None, hw: int = 60,
         log: list[dict[str, Any]] | None = None) -> NodeData:
    number = int(name[1:])
    return NodeData(name, events=[{"ts": ZERO_MS, "node": number, "type": "start", "pid": 1},
                                  *(events or [])],
                    log=log, final={"node_id": number, "high_watermark": hw, "epoch": 1,
                                    "leader": 1, "log_start_offset": 0})


def cluster(**events: list[dict[str, Any]]) -> list[NodeData]:
    """n1 leads from 0.5 s on; `events` adds node events by name."""
    found = {name: node(name, events.get(name)) for name in [*CONTROLLERS, *BROKERS]}
    found["n1"].events.append(led(1, 0.5))
    return list(found.values())


def judge(history: History, nodes: list[NodeData] | None = None,
          test: dict[str, Any] | None = None) -> dict[str, Any]:
    return fencing.check(history.ops(), test or TEST, cluster() if nodes is None else nodes)


def kinds(result: dict[str, Any]) -> list[str]:
    return list(result["anomaly_types"])


def fault_free() -> History:
    history = History()
    for second in range(1, 20):
        for name in CONTROLLERS[:1]:  # the leader answers; followers refuse
            history.describe(name, second)
        history.describe("n2", second + 0.1, type_="fail", error="not-leader-or-follower")
        history.describe("n4", second + 0.2, own=self_record(4, 10))
        history.describe("n5", second + 0.3, own=self_record(5, 12))
    return history


# --- a correct run --------------------------------------------------------------------------------


def test_a_fault_free_run_is_valid_and_summarised() -> None:
    fence = {"ts": ZERO_MS + 700, "node": 1, "type": "broker-fence", "broker": 5, "epoch": 12,
             "offset": 20, "reason": "want-fence"}
    result = judge(fault_free(), cluster(n1=[fence]))
    assert result["valid"] is True, result["anomalies"]
    assert result["judged"]["broker_answers"] == 38
    n4 = result["brokers"]["n4"]
    assert n4["id"] == 4
    assert [(r["epoch"], r["incarnation"]) for r in n4["registrations"]] == [(10, NEW)]
    assert n4["answers"] == {"ok": 19}
    assert set(result["brokers"]) == {"n4", "n5"}
    assert result["brokers"]["n5"]["fences"] == [
        {"epoch": 12, "offset": 20, "reason": "want-fence", "by": "n1"}]
    assert result["timings"]["broker_timeout_ms"] == 4500


def test_a_run_that_asked_nothing_is_skipped_and_one_with_no_answer_unknown() -> None:
    skipped = fencing.check([], TEST, [])
    assert skipped["valid"] is True and "asked nothing" in skipped["skipped"]
    refused = History().describe("n4", 1, type_="fail", error="broker-not-available")
    result = judge(refused)
    assert result["valid"] == "unknown" and "no describe succeeded" in result["error"]
    assert result["brokers"]["n4"]["answers"] == {"broker-not-available": 1}


def test_missing_timings_take_the_longest_defaults() -> None:
    test = {k: v for k, v in TEST.items() if k != "fencing"}
    history = History().describe("n4", 1, own=self_record(4, 10, age=9000))
    result = judge(history, test=test)
    assert result["valid"] is True  # 9 s is within the default 12 s broker timeout
    assert result["timings"]["broker_timeout_ms"] == 12000
    assert judge(history)["valid"] is False  # but not within the run's 4.5 s


# --- served-while-fenced --------------------------------------------------------------------------


def test_a_broker_whose_own_record_says_fenced_must_not_serve() -> None:
    fine = History().describe("n4", 1, own=self_record(4, 10, age=5400))  # 4.5 s + 1 s slack
    assert judge(fine)["valid"] is True
    for own in (self_record(4, 10, age=5600), self_record(4, 10, self_fenced=True),
                self_record(4, 10, state="inactive"), self_record(4, 10, age=None)):
        result = judge(History().describe("n4", 1, own=own))
        assert kinds(result) == ["served-while-fenced"], own
        found = result["anomalies"]["served-while-fenced"][0]
        assert found["ops"] == [0, 1] and found["rule"] == "self-report"


def test_a_broker_cut_off_from_every_controller_must_stop_serving() -> None:
    def run(at: float) -> dict[str, Any]:
        history = History().cut(10, 30, isolate("n4", CONTROLLERS))
        return judge(history.describe("n4", at, own=self_record(4, 10)))

    assert run(10.5)["valid"] is True  # 0.5 s after the cut: it may still serve
    assert run(16.4)["valid"] is True  # within 4.5 s + 2 s
    result = run(20)
    assert kinds(result) == ["served-while-fenced"]
    found = result["anomalies"]["served-while-fenced"][0]
    assert found["rule"] == "cut-off" and found["ops"] == [2, 3]
    assert abs(found["cut_off_since_s"] - 10.01) < 1e-6  # from the start's completion
    assert run(31)["valid"] is True  # healed


def test_an_answer_that_spans_the_heal_is_not_judged_by_the_cut() -> None:
    history = History().cut(10, 20, isolate("n4", CONTROLLERS))
    history.describe("n4", 19.9, own=self_record(4, 10), took=0.5)
    assert judge(history)["valid"] is True


def test_a_broker_that_still_reaches_one_controller_may_serve() -> None:
    history = History().cut(10, 30, isolate("n4", ["n1", "n2"]))
    history.describe("n4", 20, own=self_record(4, 10))
    assert judge(history)["valid"] is True
    # ... unless that one is down: then no controller can answer it
    history = History().cut(10, 30, isolate("n4", ["n1", "n2"])).down("pause", ["n3"], 11, 29)
    history.describe("n4", 20, own=self_record(4, 10))
    assert kinds(judge(history)) == ["served-while-fenced"]
    # one way is enough: heartbeats out, or their answers back
    history = History().cut(10, 30, [["n1", "n4"], ["n4", "n2"], ["n3", "n4"]])
    history.describe("n4", 20, own=self_record(4, 10))
    assert kinds(judge(history)) == ["served-while-fenced"]


def test_replacing_the_cuts_keeps_only_what_both_cut_certain() -> None:
    history = History().cut(10, None, isolate("n4", CONTROLLERS))
    history.cut(15, 30, isolate("n4", CONTROLLERS) + isolate("n5", CONTROLLERS))
    history.describe("n4", 20, own=self_record(4, 10))
    result = judge(history)
    assert kinds(result) == ["served-while-fenced"]
    assert abs(result["anomalies"]["served-while-fenced"][0]["cut_off_since_s"] - 10.01) < 1e-6
    # a second start that heals n4 breaks its isolation from that start's invoke on
    history = History().cut(10, None, isolate("n4", CONTROLLERS))
    history.cut(15, 30, isolate("n5", CONTROLLERS))
    history.describe("n4", 20, own=self_record(4, 10))
    assert judge(history)["valid"] is True
    # a failed start makes nothing certain
    history = History().nemesis("start-partition", 10, {"cut": isolate("n4", CONTROLLERS)},
                                type_="info")
    history.describe("n4", 20, own=self_record(4, 10))
    assert judge(history)["valid"] is True


# --- unfenced-without-heartbeat -------------------------------------------------------------------


def test_a_controller_must_fence_a_broker_whose_heartbeats_cannot_reach_it() -> None:
    def run(at: float, nodes: list[NodeData] | None = None, leader: str = "n1") -> dict[str, Any]:
        history = History().cut(10, 40, [["n4", "n1"], ["n4", "n2"], ["n4", "n3"]])
        return judge(history.describe(leader, at), nodes)

    assert run(10.5)["valid"] is True
    assert run(15.5)["valid"] is True  # within 3 s session + 3 s allowance
    result = run(20)
    assert kinds(result) == ["unfenced-without-heartbeat"]
    found = result["anomalies"]["unfenced-without-heartbeat"][0]
    assert found["broker"] == "n4" and found["node"] == "n1" and found["ops"] == [2, 3]
    # a leader elected at 17 s starts n4's session then (Kafka's failover rule)
    failover = cluster(n2=[led(2, 17)])
    assert run(20, failover, leader="n2")["valid"] is True
    assert run(23.2, failover, leader="n2")["valid"] is True  # the events' clock slack, 0.5 s
    assert kinds(run(24, failover, leader="n2")) == ["unfenced-without-heartbeat"]
    # without the leader's events, its tenure is unknown: not judged, and counted
    result = run(20, [])
    assert result["valid"] is True and result["judged"]["unjudged_controller_answers"] == 1


def test_only_the_link_from_the_broker_to_the_leader_matters() -> None:
    # answers from n1 to n4 are lost, but n4's heartbeats arrive: n1 may keep it unfenced
    history = History().cut(10, 40, [["n1", "n4"]]).describe("n1", 20)
    assert judge(history)["valid"] is True
    history = History().cut(10, 40, [["n4", "n1"]]).describe("n1", 20)
    assert kinds(judge(history)) == ["unfenced-without-heartbeat"]


def test_a_killed_broker_must_be_fenced_until_it_restarts() -> None:
    history = History().down("kill", ["n4"], 10, 30).describe("n1", 20)
    assert kinds(judge(history)) == ["unfenced-without-heartbeat"]
    history = History().down("kill", ["n4"], 10, 30).describe("n1", 31)
    assert judge(history)["valid"] is True
    # a paused leader restarts its count when it resumes
    history = History().down("pause", ["n4"], 10, 30).down("pause", ["n1"], 10.5, 18)
    history.describe("n1", 20)
    assert judge(history)["valid"] is True
    listed_fenced = [info(4, 10, fenced=True, since=30), info(5, 12)]
    history = History().down("kill", ["n4"], 10, 30).describe("n1", 20, listed_fenced)
    assert judge(history)["valid"] is True


# --- stale-incarnation-accepted-------------------------------------------------------------------


def test_an_accepted_stale_incarnation_replay_over_a_live_session_is_caught() -> None:
    def run(answer: dict[str, Any], fenced: bool = False) -> dict[str, Any]:
        history = History().nemesis("start-stale-incarnation", 5,
                                    {"node": "n4", "old_incarnation": OLD,
                                     "new_incarnation": NEW})
        history.describe("n1", 6, [info(4, 20, NEW)])
        history.nemesis("stop-stale-incarnation", 7, None, {
            "node": "n4", "old_incarnation": OLD, "answer": answer,
            "held_before": {"incarnation": NEW, "fenced": fenced}})
        return judge(history)

    refused = run({"error": "duplicate_broker_registration", "broker_epoch": -1})
    assert refused["valid"] is True
    # a fenced registration has no live session: the controller may hand the id over
    assert run({"error": "none", "broker_epoch": 25}, fenced=True)["valid"] is True
    result = run({"error": "none", "broker_epoch": 25})
    assert kinds(result) == ["stale-incarnation-accepted"]
    found = result["anomalies"]["stale-incarnation-accepted"][0]
    assert found["ops"] == [4, 5]  # the replay's invoke and completion


# --- unfenced-before-caught-up --------------------------------------------------------------------


def test_an_unfence_below_the_registration_is_caught() -> None:
    def unfence(caught_up: int) -> dict[str, Any]:
        return {"ts": ZERO_MS + 500, "node": 1, "type": "broker-unfence", "broker": 4,
                "epoch": 10, "offset": 14, "caught_up": caught_up}

    # caught_up is the last offset the broker applied (inclusive, Kafka's CurrentMetadataOffset):
    # 10 has applied the registration at offset 10, 9 has not.
    history = fault_free()
    assert judge(history, cluster(n1=[unfence(10)]))["valid"] is True
    result = judge(history, cluster(n1=[unfence(9)]))
    assert kinds(result) == ["unfenced-before-caught-up"]
    assert result["anomalies"]["unfenced-before-caught-up"][0]["rule"] == "controller-event"


def test_a_broker_active_below_its_registration_is_caught() -> None:
    def state(offset: int) -> dict[str, Any]:
        return {"ts": ZERO_MS + 600, "node": 4, "type": "broker-state", "state": "active",
                "broker_epoch": 10, "metadata_offset": offset, "incarnation": NEW,
                "self_fenced": False}

    history = fault_free()
    # metadata_offset as heartbeats carry it: the last offset applied, inclusive
    assert judge(history, cluster(n4=[state(10)]))["valid"] is True
    assert kinds(judge(history, cluster(n4=[state(9)]))) == ["unfenced-before-caught-up"]
    answered = History().describe("n4", 1, own=self_record(4, 10, offset=3))
    result = judge(answered)
    assert kinds(result) == ["unfenced-before-caught-up"]
    assert result["anomalies"]["unfenced-before-caught-up"][0]["ops"] == [0, 1]
    inactive = History().describe("n4", 1, own=self_record(4, 10, offset=3, state="inactive"),
                                  type_="fail", error="broker-not-available")
    assert "unfenced-before-caught-up" not in kinds(judge(inactive))


# --- fenced-broker-listed -------------------------------------------------------------------------


def test_a_view_older_than_a_fence_seen_long_before_is_caught() -> None:
    def run(at: float, since: int = 20) -> dict[str, Any]:
        history = History().describe("n1", 10, [info(4, 10), info(5, 12, fenced=True, since=40)])
        history.describe("n4", at, [info(4, 10), info(5, 12, since=since)],
                         own=self_record(4, 10))
        return judge(history)

    assert run(12)["valid"] is True  # a broker's image may lag a little
    assert run(16.4)["valid"] is True  # within 4.5 s + 2 s of the fenced answer's completion
    result = run(20)
    assert kinds(result) == ["fenced-broker-listed"]
    found = result["anomalies"]["fenced-broker-listed"][0]
    assert found["ops"] == [1, 2, 3] and found["broker"] == "n5" and found["node"] == "n4"
    assert run(20, since=45)["valid"] is True  # unfenced again, after the fence


# --- composition ----------------------------------------------------------------------------------


def test_the_brokers_workload_is_judged_by_its_own_suite(tmp_path: Path) -> None:
    from workloads import brokers

    # the workload module composes the suite; a stored run finds it through the one registry
    assert workloads.get("brokers").checker is brokers.check
    history = History().cut(10, 30, isolate("n4", CONTROLLERS))
    history.describe("n4", 1, own=self_record(4, 10)).describe("n4", 20, own=self_record(4, 10))
    ops = history.ops()
    plain = workloads.check(ops, TEST)
    assert set(plain["checkers"]) == {"fencing", "completeness"}
    assert plain["valid"] is False and plain["anomaly_types"] == ["served-while-fenced"]
    assert "availability" in plain["stats"]
    # with node data, the invariants every workload gets
    files = {"events": [{"ts": ZERO_MS, "node": 1, "type": "start", "pid": 1}], "log": [],
             "final": {"node_id": 1, "high_watermark": 0, "epoch": 1, "leader": 1,
                       "log_start_offset": 0}}
    run = write_run(tmp_path, ops, test=TEST, nodes={"n1": files})
    results = workloads.check_run(run)
    assert {"fencing", "raft-invariants", "snapshots", "completeness"} <= set(results["checkers"])
    assert results["valid"] is False
    text = render(results, ops)
    assert "served-while-fenced: 1" in text
    assert "  n4: 1 registration(s) (epochs 10; 1 incarnation(s)), 0 fence(s); answers ok=2" \
        in text


def test_a_valid_brokers_run_through_compose(tmp_path: Path) -> None:
    # a fault-free history: a run that asked for none
    results = workloads.check(fault_free().ops(), {**TEST, "nemesis": []})
    assert results["valid"] is True, results
    assert results["checkers"]["fencing"]["valid"] is True
    # had it asked for a partition, it was not tested under one
    asked = workloads.check(fault_free().ops(), TEST)
    assert asked["valid"] == "unknown" and asked["checkers"]["fencing"]["valid"] is True
    assert asked["reason"].startswith("no fault took effect: the run asked for partition")
