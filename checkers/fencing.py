"""Broker fencing (issue 17, early KIP-631): who may serve, who is listed unfenced, and when.

Theory of operation. The `brokers` workload's clients `describe` every node: a broker answers from
its own metadata image with a `self` record, or refuses (`broker-not-available`); the active
controller answers a linearizable read of the image. Each ok answer lists every registered broker.
Beside the answers the checker reads the nemesis ops, test.json's `brokers` and `fencing` timings,
and, with node data, the controllers' and brokers' events and the broker records of the nodes'
committed logs.

The faults are turned into what was *certainly* true, never what may have been: every "since T"
is late and every "until U" early, so the faults can only be shorter than the checker thinks. The
anomalies (`served-while-fenced`, `unfenced-without-heartbeat`, `stale-incarnation-accepted`,
`unfenced-before-caught-up`, `fenced-broker-listed`) each come with the ops or events that prove
them; the time bounds carry slacks under which a correct cluster on a loaded 2-core machine passes.

Details (the fault windows, each anomaly's rule, why each bound is sound, missing timings, the
result's fields): docs/internals/checkers.md#fencing
"""

from __future__ import annotations

import datetime as dt
import json
import re
import statistics
import uuid
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from checkers.faults import Faults, faults, windows
from checkers.history import NEMESIS, Op, pairs
from checkers.node_data import NodeData
from checkers.result import UNKNOWN, Anomalies

DESCRIBE = "describe"
NS_PER_MS = 1_000_000

SELF_REPORT_SLACK_MS = 1_000
SERVE_SLACK_MS = 2_000
FAILOVER_ALLOWANCE_MS = 3_000
STALE_VIEW_SLACK_MS = 2_000
CLOCK_SLACK_MS = 500

SERVING_STATES = ("active", "stopping")
STALE_INCARNATION = "stale-incarnation"
REGISTER, FENCE, UNFENCE, SHUTDOWN = ("register-broker", "fence-broker", "unfence-broker",
                                      "shutdown-broker")

# --- what the run was told -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Timings:
    """test.json's `fencing` (ms); the design's defaults where it has none."""

    session_timeout_ms: int = 9000
    heartbeat_interval_ms: int = 2000
    broker_timeout_ms: int = 12000
    given: bool = False

    @classmethod
    def of(cls, test: Mapping[str, Any]) -> Timings:
        given = test.get("fencing")
        if not isinstance(given, dict):
            return cls()
        defaults = cls()
        values = {name: given.get(name) for name in
                  ("session_timeout_ms", "heartbeat_interval_ms", "broker_timeout_ms")}
        return cls(**{name: int(value) if type(value) is int and value > 0
                      else getattr(defaults, name) for name, value in values.items()},
                   given=True)


@dataclass(frozen=True, slots=True)
class Roster:
    """Which nodes are brokers and which controllers, by name, and the brokers' ids."""

    brokers: tuple[str, ...]
    controllers: tuple[str, ...]
    names: dict[int, str]  # node id -> name (the number in the name, or final.json's node_id)

    @classmethod
    def of(cls, test: Mapping[str, Any], nodes: list[NodeData]) -> Roster:
        brokers = tuple(str(b) for b in test.get("brokers") or ())
        named = [str(n) for n in test.get("nodes") or ()]
        membership = test.get("membership")
        if isinstance(membership, dict):
            named += [str(n) for n in membership.get("spares") or ()]
        if not named:
            named = [n.name for n in nodes]
        controllers = tuple(dict.fromkeys(n for n in named if n not in brokers))
        names: dict[int, str] = {}
        for name in (*controllers, *brokers, *(n.name for n in nodes)):
            number = re.fullmatch(r"\D*(\d+)", name)
            if number:
                names.setdefault(int(number.group(1)), name)
        for node in nodes:
            if node.node_id.isdigit():
                names[int(node.node_id)] = node.name
        return cls(brokers, controllers, names)

    def name(self, broker: int) -> str:
        return self.names.get(broker, str(broker))


@dataclass(frozen=True, slots=True)
class Describe:
    """An ok `describe`: when it ran (ns), against which node, and what it showed."""

    invoke: int  # history index
    done: int
    start: int
    end: int
    node: str
    role: str
    offset: int | None
    self_record: dict[str, Any] | None
    brokers: dict[int, dict[str, Any]]


def describes(history: Sequence[Op]) -> tuple[list[Describe], dict[str, Counter[str]]]:
    """The ok describes in completion order, and per node the count of each outcome (`ok`, or
    the error of a failure, `info`)."""
    found: list[Describe] = []
    outcomes: dict[str, Counter[str]] = {}
    for pair in pairs(history):
        if pair.invoke.get("f") != DESCRIBE:
            continue
        done, value = pair.completion, pair.completion.get("value")
        node = str((value.get("node") if isinstance(value, dict) else None)
                   or done.get("node") or pair.invoke.get("node"))
        kind = "ok" if pair.type == "ok" else "info" if pair.type == "info" \
            else str(done.get("error") or "fail")
        outcomes.setdefault(node, Counter())[kind] += 1
        if pair.type != "ok" or not isinstance(value, dict):
            continue
        listed = value.get("brokers")
        if not isinstance(listed, dict):
            listed = {}
        found.append(Describe(
            int(pair.invoke["index"]), int(done["index"]), int(pair.invoke["time"]),
            int(done["time"]), node, str(value.get("role")),
            value.get("offset") if type(value.get("offset")) is int else None,
            value.get("self") if isinstance(value.get("self"), dict) else None,
            {int(k): v for k, v in listed.items() if str(k).lstrip("-").isdigit()
             and isinstance(v, dict)}))
    return found, outcomes


# --- the nodes' clocks, and their records ---------------------------------------------------------


def clock_zero(history: Sequence[Op]) -> float | None:
    """The Unix time (ms) of history time 0, from the nemesis ops' `wall` stamped with their
    `time` (the harness's clock, the one the nodes stamp their events with)."""
    zeros = []
    for op in history:
        wall = op.get("wall")
        if not isinstance(wall, str):
            continue
        try:
            zeros.append(dt.datetime.fromisoformat(wall).timestamp() * 1e3
                         - float(op["time"]) / NS_PER_MS)
        except ValueError:
            continue
    return statistics.median(zeros) if zeros else None


@dataclass(frozen=True, slots=True)
class Registration:
    broker: int
    epoch: int
    incarnation: uuid.UUID
    source: str  # what showed it: "op N", "log", "event of n1", "stale-incarnation op N"
    ops: tuple[int, ...] = ()


def _uuid(text: Any) -> uuid.UUID | None:
    try:
        return uuid.UUID(str(text))
    except ValueError:
        return None


def committed_records(nodes: list[NodeData]) -> dict[int, dict[str, Any]]:
    """The broker records of the nodes' committed logs (below each one's final high watermark),
    by offset."""
    found: dict[int, dict[str, Any]] = {}
    for node in nodes:
        hw = (node.final or {}).get("high_watermark")
        if type(hw) is not int:
            continue
        for entry in node.log or ():
            offset, payload = entry.get("offset"), entry.get("payload")
            if type(offset) is not int or offset >= hw or not isinstance(payload, str):
                continue
            record = _broker_record(payload)
            if record is not None:
                found.setdefault(offset, record)
    return found


def _broker_record(payload: str) -> dict[str, Any] | None:
    try:
        record = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("op") not in (REGISTER, FENCE, UNFENCE, SHUTDOWN):
        return None
    return record if type(record.get("broker")) is int else None


def _covered(offset: int, nodes: list[NodeData]) -> bool:
    """Whether some node's final log holds `offset` below its high watermark."""
    for node in nodes:
        hw, start = (node.final or {}).get("high_watermark"), node.log_start_offset
        if node.log and type(hw) is int and start is not None and start <= offset < hw:
            return True
    return False


def _never_committed(offset: int, nodes: list[NodeData]) -> bool:
    hws = [(n.final or {}).get("high_watermark") for n in nodes]
    known = [hw for hw in hws if type(hw) is int]
    return bool(known) and all(offset >= hw for hw in known)


def events(nodes: list[NodeData], kind: str) -> Iterable[tuple[NodeData, dict[str, Any]]]:
    for node in nodes:
        for event in node.events:
            if event.get("type") == kind:
                yield node, event


# --- the check ------------------------------------------------------------------------------------


@dataclass
class _Run:
    history: Sequence[Op]
    timings: Timings
    roster: Roster
    nodes: list[NodeData]
    answers: list[Describe]
    faults: Faults
    records: dict[int, dict[str, Any]]
    leaderships: dict[str, list[float]]
    found: Anomalies = field(default_factory=Anomalies)
    judged: Counter[str] = field(default_factory=Counter)


def check(history: Sequence[Op], test: Mapping[str, Any], nodes: list[NodeData]) -> dict[str, Any]:
    answers, outcomes = describes(history)
    roster = Roster.of(test, nodes)
    records = committed_records(nodes)
    asked = sum(c.total() for c in outcomes.values())
    broker_events = any(str(e.get("type", "")).startswith("broker-")
                        for n in nodes for e in n.events)
    if not asked and not records and not broker_events:
        return {"valid": True, "skipped": "the run asked nothing of brokers: no describe op, "
                                          "no broker record or event"}
    zero = clock_zero(history)
    run = _Run(history, Timings.of(test), roster, nodes, answers, faults(history), records,
               leaderships(nodes, zero))
    _served_while_fenced(run)
    _unfenced_without_heartbeat(run)
    registrations = _registrations(run)
    _stale_incarnation_accepted(run)
    _unfenced_before_caught_up(run)
    _fenced_broker_listed(run)
    result = run.found.result(
        brokers=_summary(run, registrations, outcomes),
        timings={"session_timeout_ms": run.timings.session_timeout_ms,
                 "heartbeat_interval_ms": run.timings.heartbeat_interval_ms,
                 "broker_timeout_ms": run.timings.broker_timeout_ms,
                 "from": "test.json" if run.timings.given else "defaults (test.json has none)"},
        slack_ms={"self_report": SELF_REPORT_SLACK_MS, "serve": SERVE_SLACK_MS,
                  "failover": FAILOVER_ALLOWANCE_MS, "stale_view": STALE_VIEW_SLACK_MS,
                  "clock": CLOCK_SLACK_MS},
        judged=dict(sorted(run.judged.items())),
        clock="nemesis wall clock" if zero is not None else "none (no nemesis op)")
    if asked and not answers and not run.found:
        result["valid"] = UNKNOWN
        result["error"] = f"no describe succeeded ({asked} asked): no broker answer to judge"
    return result


def _served_while_fenced(run: _Run) -> None:
    timeout = run.timings.broker_timeout_ms
    for answer in run.answers:
        if not _is_broker(run, answer):
            continue
        run.judged["broker_answers"] += 1
        why = _not_serving(answer.self_record, timeout) if answer.self_record else None
        if why:
            run.found.add("served-while-fenced", [answer.invoke, answer.done],
                          f"{answer.node} answered ok (op {answer.done}) while its own record "
                          f"says {why}", node=answer.node, rule="self-report")
            continue
        since = run.faults.since(partial(_isolated, run, answer.node), answer.start, answer.end)
        if since is not None and answer.start > since + (timeout + SERVE_SLACK_MS) * NS_PER_MS:
            run.found.add("served-while-fenced", [answer.invoke, answer.done],
                          f"{answer.node} answered ok (op {answer.done}, invoked at "
                          f"{answer.start / 1e9:.3f}s) though cut off from every controller "
                          f"since {since / 1e9:.3f}s, more than the broker timeout "
                          f"({timeout} ms) + {SERVE_SLACK_MS} ms before",
                          node=answer.node, rule="cut-off", cut_off_since_s=since / 1e9)


def _is_broker(run: _Run, answer: Describe) -> bool:
    return answer.role == "broker" or answer.node in run.roster.brokers


def _is_controller(run: _Run, answer: Describe) -> bool:
    """The answer of a controller alone (a combined broker,controller answers as a broker)."""
    return not _is_broker(run, answer) and (answer.role == "controller"
                                            or answer.node in run.roster.controllers)


def _not_serving(own: dict[str, Any], timeout: int) -> str | None:
    """Why a broker's `self` record says it must not serve; None when it may."""
    if own.get("self_fenced") is True:
        return "it had fenced itself (self_fenced)"
    if own.get("state") not in SERVING_STATES:
        return f"its state was {own.get('state')!r}, not unfenced"
    age = own.get("contact_age_ms")
    if age is None:
        return "no heartbeat of it was ever answered (contact_age_ms null)"
    if isinstance(age, int | float) and age > timeout + SELF_REPORT_SLACK_MS:
        return (f"its last answered heartbeat was sent {age} ms before, beyond the broker "
                f"timeout ({timeout} ms) + {SELF_REPORT_SLACK_MS} ms")
    return None


def _isolated(run: _Run, broker: str, time: float) -> bool:
    """No request of `broker` to any controller can be answered at `time`."""
    controllers = run.roster.controllers
    return bool(controllers) and (run.faults.is_down(broker, time) or all(
        run.faults.is_down(c, time) or run.faults.cut(broker, c, time)
        or run.faults.cut(c, broker, time) for c in controllers))


def _silent_to(run: _Run, broker: str, controller: str, time: float) -> bool:
    """No heartbeat of `broker` can reach `controller` at `time`."""
    return run.faults.is_down(broker, time) or run.faults.cut(broker, controller, time)


def _unfenced_without_heartbeat(run: _Run) -> None:
    allowance = (run.timings.session_timeout_ms + FAILOVER_ALLOWANCE_MS) * NS_PER_MS
    for answer in run.answers:
        if not _is_controller(run, answer):
            continue
        leader = answer.node
        for broker, info in sorted(answer.brokers.items()):
            if info.get("fenced") is not False:
                continue
            name = run.roster.name(broker)
            since = run.faults.since(partial(_silent_to, run, name, leader), answer.start,
                                     answer.end)
            if since is None:
                continue
            tenure = _tenure(run, leader, answer.end)
            if tenure is None:
                run.judged["unjudged_controller_answers"] += 1
                continue
            run.judged["controller_listings_of_silent_brokers"] += 1
            start = max(since, tenure)
            if answer.start > start + allowance:
                run.found.add(
                    "unfenced-without-heartbeat", [answer.invoke, answer.done],
                    f"{leader} (the active controller) listed broker {name} unfenced (op "
                    f"{answer.done}, invoked at {answer.start / 1e9:.3f}s) though no heartbeat "
                    f"of it could reach {leader} since {since / 1e9:.3f}s, and {leader} led "
                    f"since {tenure / 1e9:.3f}s at the latest: more than the session timeout "
                    f"({run.timings.session_timeout_ms} ms) + {FAILOVER_ALLOWANCE_MS} ms",
                    node=leader, broker=name, silent_since_s=since / 1e9)


def _tenure(run: _Run, controller: str, end: float) -> float | None:
    """The latest time (ns) at which `controller` may have become leader, or come back from a
    pause or a kill, before answering at `end`; None without its events to tell."""
    elected = run.leaderships.get(controller)
    if elected is None:
        return None
    slack = CLOCK_SLACK_MS * NS_PER_MS
    before = bisect_right(elected, end + slack)
    latest = elected[before - 1] + slack if before else 0.0
    for span in run.faults.maybe_down.get(controller, ()):
        if span.start < end:
            latest = max(latest, min(span.end, end))
    return latest


def leaderships(nodes: list[NodeData], zero: float | None) -> dict[str, list[float]]:
    """Per node with events, the history times (ns, sorted) at which it became leader."""
    if zero is None:
        return {}
    found: dict[str, list[float]] = {}
    for node in nodes:
        if not node.events:
            continue
        found[node.name] = sorted(
            (float(e["ts"]) - zero) * NS_PER_MS for e in node.events
            if e.get("type") == "state" and e.get("state") == "leader"
            and isinstance(e.get("ts"), int | float))
    return found


def _registrations(run: _Run) -> list[Registration]:
    found: list[Registration] = []
    for answer in run.answers:
        for broker, info in answer.brokers.items():
            incarnation = _uuid(info.get("incarnation"))
            if incarnation is not None and type(info.get("epoch")) is int:
                found.append(Registration(broker, info["epoch"], incarnation,
                                          f"op {answer.done}", (answer.done,)))
        own = answer.self_record or {}
        incarnation = _uuid(own.get("incarnation"))
        if type(own.get("node")) is int and type(own.get("epoch")) is int and own["epoch"] >= 0 \
                and incarnation is not None:
            found.append(Registration(own["node"], own["epoch"], incarnation,
                                      f"op {answer.done} (self)", (answer.done,)))
    for offset, record in sorted(run.records.items()):
        incarnation = _uuid(record.get("incarnation"))
        if record.get("op") == REGISTER and incarnation is not None:
            epoch = record.get("epoch")  # an amendment keeps its epoch; else the offset
            found.append(Registration(record["broker"], epoch if type(epoch) is int else offset,
                                      incarnation, "log"))
    for node, event in events(run.nodes, "broker-register"):
        epoch, incarnation = event.get("epoch"), _uuid(event.get("incarnation"))
        if type(epoch) is not int or type(event.get("broker")) is not int or incarnation is None \
                or _covered(epoch, run.nodes) or _never_committed(epoch, run.nodes):
            continue
        found.append(Registration(event["broker"], epoch, incarnation, f"event of {node.name}"))
    found += _replays(run)
    return found


def _replays(run: _Run) -> list[Registration]:
    """Stale-incarnation replays the controller accepted: the old incarnation registered anew."""
    found: list[Registration] = []
    old: tuple[int, uuid.UUID] | None = None  # (index of the start, its old incarnation)
    for op in run.history:
        value = op.get("value")
        if op.get("process") != NEMESIS or op.get("type") != "ok" or not isinstance(value, dict):
            continue
        if op.get("f") == f"start-{STALE_INCARNATION}":
            incarnation = _uuid(value.get("old_incarnation"))
            old = None if incarnation is None else (int(op["index"]), incarnation)
        elif op.get("f") == f"stop-{STALE_INCARNATION}" and old is not None:
            answer = value.get("answer")
            broker = _broker_id(run, value.get("node"))
            if isinstance(answer, dict) and str(answer.get("error") or "none").lower() == "none" \
                    and type(answer.get("broker_epoch")) is int and answer["broker_epoch"] >= 0 \
                    and broker is not None:
                found.append(Registration(broker, answer["broker_epoch"], old[1],
                                          f"stale-incarnation op {op['index']}",
                                          (old[0], int(op["index"]))))
            old = None
    return found


def _broker_id(run: _Run, name: Any) -> int | None:
    return next((i for i, n in run.roster.names.items() if n == str(name)), None)


def _stale_incarnation_accepted(run: _Run) -> None:
    """A stale-incarnation replay the controller accepted (answer without an error) although the
    registration it held just before (`held_before`) was another incarnation, unfenced: a live
    session (its process heartbeats). Judged only with no other fault in effect from a session
    timeout before the stop's invoke to its completion: then nothing could have cut the session
    short between the read and the replay."""
    session_ns = run.timings.session_timeout_ms * NS_PER_MS
    others = [w for w in windows(run.history) if w.kind != STALE_INCARNATION]
    invoke: Op | None = None
    for done in run.history:
        if done.get("process") != NEMESIS or done.get("f") != f"stop-{STALE_INCARNATION}":
            continue
        if done.get("type") == "invoke":
            invoke = done
            continue
        value = done.get("value")
        if invoke is None or done.get("type") != "ok" or not isinstance(value, dict):
            continue
        answer, before, old = value.get("answer"), value.get("held_before"), \
            value.get("old_incarnation")
        if not isinstance(answer, dict) or str(answer.get("error") or "").lower() != "none" or \
                not isinstance(before, dict) or before.get("fenced") is not False or \
                before.get("incarnation") in (None, old):
            continue
        start, end = int(invoke["time"]) - session_ns, int(done["time"])
        if any(w.start < end and start < w.end for w in others):
            run.judged["replays_unjudged_under_faults"] += 1
            continue
        run.judged["replays"] += 1
        name = str(value.get("node"))
        run.found.add(
            "stale-incarnation-accepted", [int(invoke["index"]), int(done["index"])],
            f"the controller accepted {name}'s old incarnation {old} (answer epoch "
            f"{answer.get('broker_epoch')}) over incarnation {before.get('incarnation')}, "
            f"unfenced just before: its session was live",
            broker=name, incarnation=str(old), held_after=value.get("held_after"))


def _unfenced_before_caught_up(run: _Run) -> None:
    found = run.found
    for node, event in events(run.nodes, "broker-unfence"):
        epoch, caught_up = event.get("epoch"), event.get("caught_up")
        if type(epoch) is int and type(caught_up) is int and caught_up < epoch:
            found.add("unfenced-before-caught-up", [],
                      f"{node.name} unfenced broker {run.roster.name(event.get('broker', -1))} "
                      f"(epoch {epoch}) at offset {event.get('offset')} on a heartbeat whose "
                      f"metadata offset {caught_up} had not reached its registration record",
                      node=node.name, broker=run.roster.name(event.get("broker", -1)),
                      rule="controller-event", event=event)
    for offset, record in sorted(run.records.items()):
        epoch, caught_up = record.get("epoch"), record.get("caught_up")
        if record.get("op") == UNFENCE and type(epoch) is int and type(caught_up) is int \
                and caught_up < epoch:
            found.add("unfenced-before-caught-up", [],
                      f"the committed log unfences broker {run.roster.name(record['broker'])} "
                      f"(epoch {epoch}) at offset {offset} with caught_up {caught_up}: below its "
                      f"registration record", broker=run.roster.name(record["broker"]), rule="log",
                      offset=offset)
    _activated_before_caught_up(run)


def _activated_before_caught_up(run: _Run) -> None:
    """A broker that calls itself active before its metadata reached its registration record:
    an event's `metadata_offset` (the last offset applied, inclusive, as heartbeats carry it)
    below its broker epoch, or a `self` record's `offset` (an image end offset, exclusive) at or
    below it."""
    found = run.found
    for node, event in events(run.nodes, "broker-state"):
        epoch, reached = event.get("broker_epoch"), event.get("metadata_offset")
        if event.get("state") == "active" and type(epoch) is int and type(reached) is int \
                and reached < epoch:
            found.add("unfenced-before-caught-up", [],
                      f"{node.name} became active at broker epoch {epoch} with its metadata "
                      f"applied up to offset {reached}: its registration not applied",
                      node=node.name, rule="broker-event",
                      event=event)
    for answer in run.answers:
        own = answer.self_record or {}
        epoch, reached = own.get("epoch"), own.get("offset")
        if own.get("state") == "active" and type(epoch) is int and type(reached) is int \
                and 0 <= reached <= epoch:
            found.add("unfenced-before-caught-up", [answer.invoke, answer.done],
                      f"{answer.node} answered (op {answer.done}) as active at broker epoch "
                      f"{epoch} with its metadata ending at offset {reached}: its registration not "
                      f"applied",
                      node=answer.node, rule="self-report")


def _fenced_broker_listed(run: _Run) -> None:
    bound = (run.timings.broker_timeout_ms + STALE_VIEW_SLACK_MS) * NS_PER_MS
    fenced = sorted(((a.end, broker, info["since"], a)
                     for a in run.answers for broker, info in a.brokers.items()
                     if info.get("fenced") is True and type(info.get("since")) is int),
                    key=lambda fact: fact[0])
    latest: dict[int, tuple[int, Describe]] = {}  # broker -> highest fenced-since known, by whom
    position = 0
    for answer in sorted(run.answers, key=lambda a: a.start):
        while position < len(fenced) and fenced[position][0] + bound < answer.start:
            _, broker, since, shown = fenced[position]
            if broker not in latest or since > latest[broker][0]:
                latest[broker] = (since, shown)
            position += 1
        for broker, info in sorted(answer.brokers.items()):
            known = latest.get(broker)
            if known is None or info.get("fenced") is not False or \
                    type(info.get("since")) is not int or info["since"] >= known[0]:
                continue
            run.judged["stale_listings"] += 1
            since, shown = known
            name = run.roster.name(broker)
            run.found.add(
                "fenced-broker-listed", [shown.done, answer.invoke, answer.done],
                f"{answer.node} listed broker {name} unfenced since offset {info['since']} (op "
                f"{answer.done}), more than the broker timeout + {STALE_VIEW_SLACK_MS} ms after "
                f"{shown.node} showed it fenced since offset {since} (op {shown.done})",
                node=answer.node, broker=name)
    run.judged["answers"] = len(run.answers)


def _summary(run: _Run, registrations: list[Registration],
             outcomes: dict[str, Counter[str]]) -> dict[str, Any]:
    """Per broker: its registrations (epoch, incarnation, where seen), fences, answers."""
    ids = {r.broker for r in registrations} | {i for i, n in run.roster.names.items()
                                                if n in run.roster.brokers}
    fences: dict[int, dict[int, dict[str, Any]]] = {}
    for node, event in events(run.nodes, "broker-fence"):
        if type(event.get("broker")) is int and type(event.get("offset")) is int:
            fences.setdefault(event["broker"], {}).setdefault(event["offset"], {
                "epoch": event.get("epoch"), "offset": event["offset"],
                "reason": event.get("reason"), "by": node.name})
    for offset, record in run.records.items():
        if record.get("op") == FENCE:
            fences.setdefault(record["broker"], {})[offset] = {
                "epoch": record.get("epoch"), "offset": offset, "reason": record.get("reason"),
                "by": "log"}
    summary: dict[str, Any] = {}
    for broker in sorted(ids):
        name = run.roster.name(broker)
        seen: dict[tuple[int, str], list[str]] = {}
        for r in registrations:
            if r.broker == broker:
                sources = seen.setdefault((r.epoch, str(r.incarnation)), [])
                if len(sources) < 3 and r.source not in sources:
                    sources.append(r.source)
        summary[name] = {
            "id": broker,
            "registrations": [{"epoch": epoch, "incarnation": incarnation, "seen": sources}
                              for (epoch, incarnation), sources in sorted(seen.items())],
            "fences": [fence for _, fence in sorted(fences.get(broker, {}).items())],
            "answers": dict(sorted(outcomes.get(name, Counter()).items())),
        }
    return summary
