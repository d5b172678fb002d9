"""Protocol scenarios as text files, as etcd's `testdata/*.txt`: a command, `----`, what it did.

Theory of operation: a scenario file is a list of blocks separated by blank lines. A block is
optional `#` comment lines, one command, a `----` line and the expected output (one line per thing
the command made happen). `run_scenario(text)` runs every command against an in-memory `Cluster`
(testkit/raft_cluster.py) and returns the same file with each expected output replaced by the
actual one, so a test compares the two, and a rewrite writes the result back for review.

The commands build a cluster, set a down node's disk, tick, deliver or drop the messages in
flight, append, flush, shut down, add or remove a voter, crash, restart and print state; the
output follows the order in which a host carries out a `Ready`. The table of commands and the
output's format: docs/internals/testkit.md#raft_scenario
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from reference_node.raft.api import AddVoter, QuorumState, Ready, RemoveVoter, Shutdown
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.messages import (
    DivergingEpoch,
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
)
from reference_node.raft.voters import VoterSet
from testkit.raft_cluster import Cluster, Delivery, InFlight

SEPARATOR = "----"
OTHER_DIRECTORY = uuid.UUID(int=1, version=4)
"""The directory id `remove-voter ... dir=other` names: no replica's."""


class ScenarioError(ValueError):
    """A scenario file that cannot be run as written (the message names the line)."""


# --- the file format --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """A command and the comments above it (its expected output is only compared, as text)."""

    comments: tuple[str, ...]
    command: str
    line: int


def parse(text: str) -> tuple[list[Block], tuple[str, ...]]:
    """The blocks of a scenario file, and the comment lines after the last one."""
    lines = text.splitlines()
    blocks: list[Block] = []
    comments: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if line.startswith("#"):
            comments.append(line)
            i += 1
            continue
        if i + 1 >= len(lines) or lines[i + 1] != SEPARATOR:
            raise ScenarioError(f"line {i + 1}: `{line}` is not followed by `{SEPARATOR}`")
        end = i + 2
        while end < len(lines) and lines[end].strip():
            end += 1
        blocks.append(Block(tuple(comments), line, i + 1))
        comments = []
        i = end
    return blocks, tuple(comments)


def render(blocks: list[tuple[Block, list[str]]], trailer: tuple[str, ...]) -> str:
    parts = []
    for block, output in blocks:
        parts.append("\n".join([*block.comments, block.command, SEPARATOR, *output]))
    if trailer:
        parts.append("\n".join(trailer))
    return "\n\n".join(parts) + "\n"


def run_scenario(text: str) -> str:
    """Run every command of `text`; the file as it would read with the actual outputs."""
    blocks, trailer = parse(text)
    run = ScenarioRun()
    results = []
    for block in blocks:
        try:
            output = run.execute(block.command)
        except ScenarioError as e:
            raise ScenarioError(f"line {block.line}: {e}") from None
        results.append((block, output or ["ok"]))
    return render(results, trailer)


# --- printing ---------------------------------------------------------------------------------


def show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.name).upper()
    if isinstance(value, Entry):
        return show_entry(value)
    if isinstance(value, DivergingEpoch):
        return f"(epoch={value.epoch} end_offset={value.end_offset})"
    if isinstance(value, tuple | list):
        return "[" + " ".join(show(v) for v in value) + "]"
    if isinstance(value, uuid.UUID):
        return str(value)[:8]
    if isinstance(value, VoterSet):
        return show(value.sorted())
    return str(value)


def show_entry(entry: Entry) -> str:
    payload = entry.payload.decode(errors="backslashreplace")
    if entry.kind is EntryKind.DATA:
        return f"{entry.offset}@{entry.epoch}={payload}"
    if entry.kind is EntryKind.VOTERS:
        return f"{entry.offset}@{entry.epoch}=voters:{show(VoterSet.decode(entry.payload))}"
    return f"{entry.offset}@{entry.epoch}={entry.kind.value}:{payload}"


def show_record(record: Any, skip: frozenset[str] = frozenset({"cluster_id"})) -> str:
    """A message or reply: its type and every field (but the constant cluster id, and an
    unset directory id, or an empty list of them, of a cluster without them: KIP-853's fields
    stay out of older scenarios)."""
    fields = " ".join(
        f"{f.name}={show(getattr(record, f.name))}"
        for f in dataclasses.fields(record)
        if f.name not in skip
        and not (f.name.endswith("directory_id") and getattr(record, f.name) is None)
        and not (f.name.endswith("directory_ids") and not getattr(record, f.name))
    )
    return f"{type(record).__name__}({fields})"


def show_quorum_state(qs: QuorumState | None) -> str:
    qs = qs or QuorumState()
    return f"epoch={qs.leader_epoch} leader={show(qs.leader_id)} voted={show(qs.voted_id)}"


def show_event(node: int, event: dict[str, Any]) -> str:
    if event["type"] == "state":
        return (f"{node} state={event['state']} epoch={event['epoch']} "
                f"leader={show(event['leader'])} voted={show(event['voted_for'])}")
    rest = " ".join(f"{k}={show(v)}" for k, v in event.items() if k != "type")
    return f"{node} event {event['type']} {rest}".rstrip()


def show_ready(node: int, ready: Ready) -> list[str]:
    """A Ready's lines, in the order the host carries it out."""
    lines = []
    if ready.quorum_state is not None:
        lines.append(f"{node} persist {show_quorum_state(ready.quorum_state)}")
    if ready.truncate_to is not None:
        lines.append(f"{node} truncate from {ready.truncate_to}")
    if ready.entries:
        lines.append(f"{node} write {show(ready.entries)}")
    if ready.flush:
        lines.append(f"{node} flush")
    lines.extend(f"send {node}->{s.dst} {show_record(s.message)}" for s in ready.messages)
    lines.extend(f"{node} reply {show_record(r)}" for r in ready.replies)
    lines.extend(show_event(node, e) for e in ready.events)
    if ready.fatal is not None:
        lines.append(f"{node} halts: {ready.fatal.name}")
    return lines


# --- the commands -----------------------------------------------------------------------------


def _options(args: list[str]) -> dict[str, str]:
    options = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            raise ScenarioError(f"expected key=value, got `{arg}`")
        options[key] = value
    return options


def _ids(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _optional_id(text: str | None) -> int | None:
    return None if text in (None, "none", "-1") else int(text)


Link = Callable[[InFlight], bool]


def _link(args: list[str]) -> Link:
    """`SRC->DST` (either side `*`), or every link when no argument is given."""
    if not args:
        return lambda m: True
    src, sep, dst = args[0].partition("->")
    if not sep or len(args) > 1:
        raise ScenarioError(f"expected SRC->DST, got `{' '.join(args)}`")
    return lambda m: src in ("*", str(m.src)) and dst in ("*", str(m.dst))


class ScenarioRun:
    """One scenario's cluster, and the lines each command printed."""

    def __init__(self) -> None:
        self._cluster: Cluster | None = None
        self.request_ids = itertools.count(1)
        self.out: list[str] = []
        self.indent = ""
        self.commands: dict[str, Callable[[list[str]], None]] = {
            "cluster": self.cmd_cluster,
            "disk": self.cmd_disk,
            "tick": self.cmd_tick,
            "deliver": self.cmd_deliver,
            "drop": self.cmd_drop,
            "forge-fetch-answer": self.cmd_forge_fetch_answer,
            "append": self.cmd_append,
            "flush": self.cmd_flush,
            "shutdown": self.cmd_shutdown,
            "add-voter": self.cmd_add_voter,
            "remove-voter": self.cmd_remove_voter,
            "crash": self.cmd_crash,
            "restart": self.cmd_restart,
            "state": self.cmd_state,
            "voters": self.cmd_voters,
        }

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            raise ScenarioError("no cluster yet: start with `cluster voters=...`")
        return self._cluster

    def execute(self, command: str) -> list[str]:
        name, *args = command.split()
        handler = self.commands.get(name)
        if handler is None:
            raise ScenarioError(f"unknown command `{name}`; known: {', '.join(self.commands)}")
        self.out = []
        try:
            handler(args)
        except ScenarioError:
            raise
        except (ValueError, KeyError, IndexError) as e:
            raise ScenarioError(f"`{command}`: {e!r}") from e
        return self.out

    def on_ready(self, node: int, ready: Ready) -> None:
        self.out.extend(self.indent + line for line in show_ready(node, ready))

    def node(self, text: str) -> int:
        node = int(text)
        if node not in self.cluster.hosts:
            raise ScenarioError(f"no node {node}")
        return node

    # --- one method per command ---------------------------------------------------------------

    def cmd_cluster(self, args: list[str]) -> None:
        options = _options(args)
        config = RaftConfig(
            pre_vote=options.pop("pre_vote", "true") == "true",
            unsafe=Unsafe.parse(options.pop("unsafe", "")),
        )
        self._cluster = Cluster(
            _ids(options.pop("voters")), _ids(options.pop("observers", "")), config,
            seed=int(options.pop("seed", "0")), on_ready=self.on_ready,
            down=_ids(options.pop("down", "")), kraft_version=int(options.pop("kraft", "0")),
        )
        if options:
            raise ScenarioError(f"unknown cluster option(s) {', '.join(options)}")

    def cmd_disk(self, args: list[str]) -> None:
        node = self.node(args[0])
        host = self.cluster.hosts[node]
        if host.up:
            raise ScenarioError(f"node {node} is running: crash it first")
        options = _options(args[1:])
        epochs = _ids(options.get("log", ""))
        host.disk.log = [Entry(i, e, EntryKind.DATA, str(i).encode()) for i, e in enumerate(epochs)]
        host.disk.flushed = len(epochs)
        host.disk.quorum_state = QuorumState(
            int(options.get("epoch", "0")),
            _optional_id(options.get("leader")),
            _optional_id(options.get("voted")),
        )

    def cmd_tick(self, args: list[str]) -> None:
        if len(args) != 2 or not args[1].startswith("+"):
            raise ScenarioError("expected `tick N +MS`")
        self.cluster.tick(self.node(args[0]), int(args[1][1:]))

    def _pending(self, args: list[str]) -> Iterator[InFlight]:
        """The messages in flight when the command began, on the link asked for."""
        on_link = _link(args)
        return iter([m for m in self.cluster.in_flight if on_link(m)])

    def cmd_deliver(self, args: list[str]) -> None:
        cluster = self.cluster
        for msg in self._pending(args):
            index = next(i for i, m in enumerate(cluster.in_flight) if m is msg)
            line = f"{msg.src}->{msg.dst} {type(msg.message).__name__}"
            self.out.append(line)
            self.indent = "  "
            try:
                outcome = cluster.deliver(index)
            finally:
                self.indent = ""
            if outcome is not Delivery.DELIVERED:
                self.out[-1] = f"{line} {outcome.value}"  # it caused nothing: nothing follows

    def cmd_drop(self, args: list[str]) -> None:
        cluster = self.cluster
        for msg in self._pending(args):
            cluster.drop(next(i for i, m in enumerate(cluster.in_flight) if m is msg))
            self.out.append(f"{msg.src}->{msg.dst} {type(msg.message).__name__} dropped")

    def cmd_forge_fetch_answer(self, args: list[str]) -> None:
        """`forge-fetch-answer L->F [hw=H] [diverging=E:O]`: F's Fetch in flight to L is
        answered, in its epoch, by what no correct leader would send (a broken quorum's): no
        records, high watermark H (-1), DivergingEpoch(E, O) when given."""
        if not args:
            raise ScenarioError("expected `forge-fetch-answer L->F [hw=H] [diverging=E:O]`")
        leader, sep, follower = args[0].partition("->")
        if not sep:
            raise ScenarioError(f"expected L->F, got `{args[0]}`")
        options = _options(args[1:])
        cluster = self.cluster
        index, fetch = next(
            ((i, m) for i, m in enumerate(cluster.in_flight)
             if isinstance(m.message, FetchRequest) and m.src == self.node(follower)
             and m.dst == self.node(leader)),
            (None, None),
        )
        if index is None or fetch is None:
            raise ScenarioError(f"no Fetch in flight from {follower} to {leader}")
        request = fetch.message
        assert isinstance(request, FetchRequest)
        diverging = None
        if "diverging" in options:
            epoch, _, offset = options["diverging"].partition(":")
            diverging = DivergingEpoch(int(epoch), int(offset))
        answer = FetchResponse(ErrorCode.none, fetch.dst, request.current_leader_epoch,
                               int(options.get("hw", "-1")), 0, (), diverging)
        cluster.in_flight[index] = InFlight(fetch.dst, fetch.src, answer, fetch.rid)
        self.out.append(f"{fetch.src}->{fetch.dst} FetchRequest answered by "
                        f"{show_record(answer)}")

    def cmd_append(self, args: list[str]) -> None:
        if len(args) < 2:
            raise ScenarioError("expected `append N PAYLOAD...`")
        self.cluster.append(self.node(args[0]), tuple(p.encode() for p in args[1:]))

    def cmd_flush(self, args: list[str]) -> None:
        node = self.node(args[0])
        if not self.cluster.flush(node):
            self.out.append(f"{node} has nothing to flush")

    def cmd_shutdown(self, args: list[str]) -> None:
        self.cluster.step(self.node(args[0]), Shutdown())

    def cmd_add_voter(self, args: list[str]) -> None:
        if len(args) < 2:
            raise ScenarioError("expected `add-voter N V [timeout=MS]`")
        timeout = _options(args[2:]).get("timeout")
        voter = self.cluster.voter(self.node(args[1]))
        self.cluster.step(self.node(args[0]), AddVoter(
            next(self.request_ids), voter, int(timeout) if timeout is not None else None))

    def cmd_remove_voter(self, args: list[str]) -> None:
        if len(args) < 2:
            raise ScenarioError("expected `remove-voter N V [dir=other]`")
        target = self.node(args[1])
        directory = self.cluster.hosts[target].directory_id
        if _options(args[2:]).get("dir") == "other":
            directory = OTHER_DIRECTORY
        self.cluster.step(self.node(args[0]),
                          RemoveVoter(next(self.request_ids), target, directory))

    def cmd_crash(self, args: list[str]) -> None:
        node = self.node(args[0])
        disk = self.cluster.hosts[node].disk
        lost = disk.log[disk.flushed :]
        self.cluster.crash(node)
        self.out.append(f"{node} crashed: disk {show_quorum_state(disk.quorum_state)} "
                        f"log={show(disk.log)} lost={show(lost)}")

    def cmd_restart(self, args: list[str]) -> None:
        """`restart N [host=NAME] [kraft=LO..HI]`: N starts from its disk, announcing its
        controller listener on host NAME, or supporting those kraft.version levels."""
        node = self.node(args[0])
        host = self.cluster.hosts[node]
        options = _options(args[1:])
        if "host" in options:
            host.endpoints = tuple(dataclasses.replace(e, host=options.pop("host"))
                                   for e in host.endpoints)
        if "kraft" in options:
            low, _, high = options.pop("kraft").partition("..")
            host.kraft_versions = (int(low), int(high))
        if options:
            raise ScenarioError(f"unknown restart option(s) {', '.join(options)}")
        self.cluster.start(node)

    def cmd_voters(self, args: list[str]) -> None:
        """`voters N`: the voter set in effect at N, each voter as `id@host:port:dir` and the
        kraft.version levels it supports."""
        core = self.cluster.core(self.node(args[0]))
        for voter in core.voters:
            low, high = voter.kraft_versions
            self.out.append(f"{voter.describe()} kraft={low}..{high}")

    def cmd_state(self, args: list[str]) -> None:
        nodes = [self.node(a) for a in args] or list(self.cluster.hosts)
        for node in nodes:
            host = self.cluster.hosts[node]
            if host.core is None:
                self.out.append(f"{node} down: disk {show_quorum_state(host.disk.quorum_state)} "
                                f"log={show(host.disk.log)}")
                continue
            core = host.core
            self.out.append(
                f"{node} state={core.state_name} {show_quorum_state(core.quorum_state())} "
                f"hw={core.high_watermark} log={show(core.log_view.entries())} "
                f"flushed={core.log_view.flushed_end}"
            )
