"""The configuration of one test run, validated; what `test.json` records (docs/contracts.md).

Every random choice of a run (the operations, the faults and their targets) derives from `seed`:
the generator and the nemesis each get a sub-seed drawn from it, and both are recorded.

With the `membership` nemesis, `spares` (its option) more nodes are deployed after `nodes` (named
on from them: n6, n7 after n1..n5), started as observers, and the initial voters (`nodes`) keep
their voter set in the log; each initial voter's directory id (Kafka's Uuid text) is drawn from
the seed (`directory_ids`), so that a run's voter set is the same on a replay.

With `brokers` > 0 (issue 17), that many broker nodes (`process.roles=broker`) are deployed after
the controllers and the spares, named on from them (n4, n5 after n1..n3), each with the node id of
its name. They follow the metadata log as observers, register with the active controller and
heartbeat to it; every node (controllers too: they fence on the session timeout) gets the fencing
settings (`FENCING_KEYS`, the harness's short timings `FENCING`), which `--node-config` may
override. test.json records the brokers' names and the fencing timings in effect, which the
fencing checker measures the history against.
"""

from __future__ import annotations

import base64
import difflib
import math
import random
import shlex
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from nemesis.membership import SPARES_OPTION
from nemesis.registry import DEFAULT_KINDS, DISK_KINDS, OPTIONS, default_options
from reference_node.raft.config import Unsafe


class UsageError(ValueError):
    """Bad command line or bad input: one line for the user, exit 64."""


@dataclass
class TestConfig:
    __test__ = False  # a test's configuration, not a pytest test class

    backend: str = "auto"
    target: str = "reference"
    nodes: list[str] = field(default_factory=lambda: ["n1", "n2", "n3"])
    workload: str = "append"
    nemesis: list[str] = field(default_factory=lambda: list(DEFAULT_KINDS))
    nemesis_interval: float = 5.0
    # every fault's options by name (`nemesis.registry.OPTIONS`: the partition shapes, the
    # lagging follower's duration, the membership nemesis's spares, ...); those not given are
    # at their defaults. test.json records each as a key of its own, where it always stood
    nemesis_options: dict[str, Any] = field(default_factory=default_options)
    brokers: int = 0  # broker nodes deployed after the controllers (and spares)
    time_limit: float = 60.0
    concurrency: int = 0  # 0: twice the number of nodes
    rate: float = 10.0  # ops per second, all processes together
    op_timeout: float = 1.5
    recovery_time: float = 30.0
    seed: int = 0
    node_config: dict[str, str] = field(default_factory=dict)
    # availability floors (`--min-availability`, checkers/availability.py); {}: none
    min_availability: dict[str, float] = field(default_factory=dict)
    results_dir: str = "results"
    test_name: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.nemesis_options) - set(default_options()))
        if unknown:
            raise ValueError(f"unknown nemesis options {', '.join(unknown)}")
        # every option, in the registry's order (test.json's keys keep theirs)
        self.nemesis_options = {name: self.nemesis_options.get(name, default)
                                for name, default in default_options().items()}
        if self.concurrency <= 0:
            # the brokers get clients of their own: a broker's answers are what fencing guards
            self.concurrency = 2 * (len(self.nodes) + self.brokers)
        if not self.test_name:
            self.test_name = "-".join([self.target.replace(":", "."), self.workload,
                                       "+".join(self.nemesis) or "none"])

    def command(self) -> list[str]:
        """`kraft test` with every option that made this run, its seed among them: the line that
        runs it again (Jepsen's "rerun with"). The schedule and every random choice repeat; the
        timing of real processes does not."""
        named = self.nodes == [f"n{i}" for i in range(1, len(self.nodes) + 1)]
        argv = ["kraft", "test", "--backend", self.backend, "--target", self.target,
                "--nodes", str(len(self.nodes)) if named else ",".join(self.nodes),
                "--workload", self.workload, "--nemesis", ",".join(self.nemesis) or "none",
                "--nemesis-interval", _number(self.nemesis_interval),
                "--time-limit", _number(self.time_limit), "--concurrency", str(self.concurrency),
                "--rate", _number(self.rate), "--op-timeout", _number(self.op_timeout),
                "--recovery-time", _number(self.recovery_time), "--seed", str(self.seed)]
        if self.brokers:
            argv += ["--brokers", str(self.brokers)]
        defaults = default_options()
        for option in OPTIONS:
            value = self.nemesis_options[option.name]
            if value != defaults[option.name]:
                argv += [option.flag, ",".join(value) if isinstance(value, list)
                         else _number(value)]
        for key, value in self.node_config.items():
            argv += ["--node-config", f"{key}={value}"]
        if self.min_availability:
            argv += ["--min-availability", ",".join(f"{kind}={_number(floor)}" for kind, floor
                                                     in self.min_availability.items())]
        if self.results_dir != "results":
            argv += ["--results-dir", self.results_dir]
        if self.test_name != TestConfig(target=self.target, workload=self.workload,
                                        nemesis=self.nemesis).test_name:
            argv += ["--test-name", self.test_name]
        return argv

    def command_line(self) -> str:
        return shlex.join(self.command())

    def fault_turns(self) -> int:
        """How many nemesis turns come before the time limit: one every `nemesis_interval`, and
        one due at the very end may lose the race with it. Each kind's first start takes a
        turn, so fewer turns than kinds leave a kind that never starts (an UNKNOWN run)."""
        return max(0, math.ceil(self.time_limit / self.nemesis_interval) - 1)

    def seeds(self) -> dict[str, int]:
        rng = random.Random(self.seed)
        return {"generator": rng.getrandbits(63), "nemesis": rng.getrandbits(63)}

    @property
    def membership(self) -> bool:
        """Whether the run changes its voters (and so deploys spares, voters in the log)."""
        return MEMBERSHIP in self.nemesis

    @property
    def disk_faults(self) -> bool:
        """Whether a disk nemesis runs (and so the fault filesystem goes under every node)."""
        return bool(set(self.nemesis) & set(DISK_KINDS))

    def spare_nodes(self) -> list[str]:
        """The spares' names (none without the membership nemesis): n<k> for the next free k."""
        if not self.membership:
            return []
        spares = int(self.nemesis_options[SPARES_OPTION.name])
        names: list[str] = []
        k = len(self.nodes)
        while len(names) < spares:
            k += 1
            if f"n{k}" not in self.nodes:
                names.append(f"n{k}")
        return names

    def broker_nodes(self) -> list[str]:
        """The brokers' names: n<k> for the next free k after the controllers and spares."""
        taken = {*self.nodes, *self.spare_nodes()}
        names: list[str] = []
        k = len(taken)
        while len(names) < self.brokers:
            k += 1
            if f"n{k}" not in taken:
                names.append(f"n{k}")
        return names

    def all_nodes(self) -> list[str]:
        """Every node deployed: the initial voters, then the spares, then the brokers."""
        return [*self.nodes, *self.spare_nodes(), *self.broker_nodes()]

    def fencing(self) -> dict[str, int]:
        """The fencing timings the nodes run with (test.json's `fencing`): the harness's, or
        what `--node-config` set instead."""
        return {field_name: int(self.node_config.get(key, FENCING[key]))
                for key, field_name in FENCING_KEYS.items()}

    def node_settings(self) -> dict[str, str]:
        """What every node is configured with beyond what the target writes itself: with
        brokers, the fencing timings (`--node-config` wins), else `--node-config` alone."""
        if not self.brokers:
            return dict(self.node_config)
        return {**{key: str(value) for key, value in FENCING.items()}, **self.node_config}

    def directory_ids(self) -> dict[str, str]:
        """Each initial voter's directory id, drawn from the seed (membership runs only)."""
        if not self.membership:
            return {}
        rng = random.Random(f"directory-ids-{self.seed}")
        return {node: kafka_uuid_text(rng) for node in self.nodes}

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if key == "nemesis_options":
                data.update(value)  # each a key of its own, as before they were one mapping
            else:
                data[key] = value
        data["name"] = self.test_name
        data["seeds"] = self.seeds()
        data["command"] = self.command_line()
        data["brokers"] = self.broker_nodes()
        if not self.min_availability:  # recorded only when set: the checker runs only then
            del data["min_availability"]
        if self.brokers:
            data["fencing"] = self.fencing()
        if self.membership:
            # the runner adds the spares' directory ids and the final quorum once it knows them
            data["membership"] = {"spares": self.spare_nodes(),
                                  "directory_ids": self.directory_ids()}
        return data


MEMBERSHIP = "membership"

# The node keys of the fencing timings and test.json's names for them.
FENCING_KEYS = {"broker.session.timeout.ms": "session_timeout_ms",
                "broker.heartbeat.interval.ms": "heartbeat_interval_ms",
                "broker.heartbeat.timeout.ms": "broker_timeout_ms"}
# The harness's timings: a session of 3 s (a cut-off broker is fenced within a nemesis interval),
# heartbeats every 0.5 s, and brokers that stop serving 4.5 s after their last answered
# heartbeat (later than the controller fences them, as the proposal requires).
FENCING = {"broker.session.timeout.ms": 3000, "broker.heartbeat.interval.ms": 500,
           "broker.heartbeat.timeout.ms": 4500}
MAX_BROKERS = 8


def kafka_uuid_text(rng: random.Random) -> str:
    """A random version-4 Uuid in Kafka's text form (URL-safe base64, unpadded) that does not
    begin with '-' (a command line would read it as a flag), as Kafka's Uuid.randomUuid avoids."""
    while True:
        value = uuid.UUID(int=rng.getrandbits(128), version=4)
        text = base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def parse_nodes(text: str) -> list[str]:
    """`5` -> n1..n5; `a,b,c` -> those names."""
    text = text.strip()
    if text.isdigit():
        count = int(text)
        if not 1 <= count <= 15:
            raise UsageError(f"--nodes: {count} is out of range 1..15")
        return [f"n{i}" for i in range(1, count + 1)]
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names or len(set(names)) != len(names) or not all(n.isidentifier() for n in names):
        raise UsageError(f"--nodes: {text!r} is neither a count nor distinct names")
    return names


def _number(value: float) -> str:
    """A number as a flag takes it back unchanged: 5, not 5.0; 0.1, not 0.10000000000000001."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """" (did you mean X?)" for a near miss of one of `choices`, else ""."""
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def parse_list(flag: str, text: str, allowed: tuple[str, ...], allow_none: bool) -> list[str]:
    items = [i.strip() for i in text.split(",") if i.strip()]
    if allow_none and items == ["none"]:
        return []
    unknown = [i for i in items if i not in allowed]
    if unknown or not items:
        named = ", ".join(f"{u}{did_you_mean(u, allowed)}" for u in unknown)
        raise UsageError(f"{flag}: unknown value {named or repr(text)}; "
                         f"one of: {', '.join(allowed)}{', none' if allow_none else ''}")
    return list(dict.fromkeys(items))


def parse_node_config(items: list[str]) -> dict[str, str]:
    """`KEY=VALUE` settings for every node. The unsafe switches are checked here, before anything
    is deployed, as the node would check them: a misspelt one must not run a test without it."""
    config: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--node-config: expected KEY=VALUE, got {item!r}")
        config[key.strip()] = value.strip()
    if "unsafe" in config:
        try:
            Unsafe.parse(config["unsafe"])
        except ValueError as exc:
            raise UsageError(f"--node-config: {exc}") from None
    return config
