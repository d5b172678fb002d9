"""Snapshot and log invariants (KIP-630), judged from the nodes' stored data and the history.

A snapshot is seen in two places: the `.checkpoint` files a node held at the end
(`nodes/<node>/snapshots.jsonl`) and the `snapshot` events of `events.jsonl`. Each is checked
against the committed log, known from the nodes' `log.jsonl` and the history's ok reads; an
acknowledged append is a claim about the log, not knowledge of it, so where nothing else shows its
offset the snapshots judge it.

Anomalies: `snapshot-disagreement` (two snapshots of one end offset differ),
`snapshot-log-mismatch` (a snapshot is not the fold of the committed prefix it names),
`snapshot-beyond-hw`, `log-start-without-snapshot` and `lost-write` (an acknowledged append that
only the snapshots still cover, and they do not hold it). Details, with what counts as verified
and unverifiable: docs/internals/checkers.md#snapshots

Pure: a function of the node data and the parsed history. Checkers never read a node's own files.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any

from checkers.append_history import Append, AppendHistory
from checkers.node_data import NodeData
from checkers.result import Anomalies
from reference_node.raft.image import Image, fold_digest
from reference_node.raft.messages import Entry, EntryKind

# A committed record as known to the checker: its value (a data record), or one of these.
Record = bytes | int
CONTROL = 0  # a control record (LeaderChange, ...): moves the offset, nothing else
UNKNOWN_DATA = 1  # a data record whose value is not known (log.jsonl without `payload`)
CONFLICT = 2  # sources disagree (the log checkers report that); the offset counts as unknown


@dataclass
class Seen:
    """One snapshot as one node holds it: its file, its `snapshot` event, or both (same content)."""

    node: str
    end_offset: int
    epoch: int
    records: int
    digest: str  # hex, lower case
    kv: dict[Any, Any] | None = None  # the file's map (events carry none)
    file: str | None = None
    ts: Any = None  # of the first `snapshot` event that named it

    @property
    def id(self) -> str:
        return f"{self.end_offset}-{self.epoch}"

    @property
    def content(self) -> tuple[int, int, str]:
        return (self.epoch, self.records, self.digest)

    def where(self) -> str:
        seen = [f"file {self.file}"] if self.file else []
        if self.ts is not None:
            seen.append(f"snapshot event at ts {self.ts}")
        return f"node {self.node} ({', '.join(seen)})"

    def describe(self) -> str:
        return f"{self.records} data records, digest {self.digest}"

    def image(self) -> Image:
        return Image(self.end_offset, self.epoch, self.records, bytes.fromhex(self.digest),
                     self.kv)


@dataclass
class _Known:
    """The committed log as far as the node logs and the history's reads show it."""

    records: dict[int, Record] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)  # from log.jsonl
    conflicts: int = 0
    in_logs: set[int] = field(default_factory=set)  # offsets some node's committed log holds

    def put(self, offset: int, record: Record) -> None:
        seen = self.records.get(offset)
        if seen is None or seen == record:
            self.records[offset] = record
        elif seen == UNKNOWN_DATA and type(record) is bytes:
            self.records[offset] = record  # the same data record, its value now known
        elif record == UNKNOWN_DATA and type(seen) is bytes:
            pass
        elif seen != CONFLICT:
            self.records[offset] = CONFLICT
            self.conflicts += 1


def check(nodes: list[NodeData], parsed: AppendHistory | None = None,
          damaged: Mapping[str, list[float]] | None = None) -> dict[str, Any]:
    """`parsed` is the append history (None for other workloads: the node logs alone tell the
    committed log then). `damaged`: per node, the wall-clock times (ms) at which the `corrupt`
    nemesis damaged one of its snapshot files (`damaged_snapshots`): a log found without its
    snapshot after that is what KIP-630 tells the node to do with a damaged disk, counted as
    `log_reset_after_damage`, not an anomaly (what it costs, lost writes, is judged by the
    checkers of acknowledged writes)."""
    found = Anomalies()
    seen, invalid_files = _observations(nodes)
    _beyond_hw(nodes, seen, found)
    resets_after_damage = _log_starts(nodes, found, damaged or {})
    # the log is needed up to the last snapshot's end (and the offsets the node logs hold)
    known = _known_log(nodes, parsed, max((s.end_offset for s in seen), default=0))
    fold = _Fold(known, _claims(parsed, known), found,
                 parsed.index if parsed is not None else int)
    for end, group in _by_end(seen):
        _disagreement(end, group, found)
        fold.judge(end, group)
    return found.result(
        snapshots=len(seen),
        snapshot_ids=len({(s.end_offset, s.epoch) for s in seen}),
        verified=fold.verified,
        unverifiable=fold.unverifiable,
        log_conflicts=known.conflicts,
        invalid_files=invalid_files,
        installs=_count(nodes, "snapshot-install"),
        fetch_snapshot_chunks=_count(nodes, "fetch-snapshot"),
        refused=_count(nodes, "snapshot-refused"),
        invalid_at_start=_count(nodes, "snapshot-invalid"),
        log_reset_after_damage=resets_after_damage,
        log_start_offsets={node.name: node.log_start_offset for node in nodes},
        writes_below_log_start=_writes_below_start(nodes, parsed, known, fold),
    )


# --- reading the snapshots ------------------------------------------------------------------------

def _observations(nodes: list[NodeData]) -> tuple[list[Seen], int]:
    """Every node's snapshots (file and event merged when they agree), and the invalid files."""
    seen: list[Seen] = []
    invalid = 0
    for node in nodes:
        mine: dict[tuple[int, int, int, str], Seen] = {}
        for number, line in enumerate(node.snapshots or (), 1):
            where = f"node {node.name}: snapshots.jsonl entry {number}"
            if line.get("valid") is False:
                invalid += 1
                continue
            if line.get("valid") is not True:
                raise ValueError(f"{where}: `valid` must be true or false, got "
                                 f"{line.get('valid')!r} (docs/contracts.md, snapshots.jsonl)")
            snap = _seen(node.name, line, where)
            snap.file = str(line.get("file"))
            snap.kv = _kv(line.get("kv"), where)
            key = (snap.end_offset, snap.epoch, snap.records, snap.digest)
            mine.setdefault(key, snap)
        for event in node.events:
            if event.get("type") != "snapshot":
                continue
            snap = _seen(node.name, event, f"node {node.name}: events.jsonl snapshot event "
                         f"at ts {event.get('ts')}")
            key = (snap.end_offset, snap.epoch, snap.records, snap.digest)
            held = mine.setdefault(key, snap)
            if held.ts is None:
                held.ts = event.get("ts")
        seen.extend(mine.values())
    return seen, invalid


def _seen(node: str, line: dict[str, Any], where: str) -> Seen:
    numbers = {}
    for name in ("end_offset", "epoch", "records"):
        value = line.get(name)
        if type(value) is not int or value < 0:
            raise ValueError(f"{where}: `{name}` must be an integer >= 0, got {value!r} "
                             "(docs/contracts.md, snapshots.jsonl)")
        numbers[name] = value
    digest = line.get("digest")
    try:
        if not isinstance(digest, str) or len(bytes.fromhex(digest)) != 16:
            raise ValueError
    except ValueError:
        raise ValueError(f"{where}: `digest` must be 32 hex digits, got {digest!r}") from None
    return Seen(node, numbers["end_offset"], numbers["epoch"], numbers["records"], digest.lower())


def _kv(pairs: Any, where: str) -> dict[Any, Any] | None:
    if pairs is None:
        return None
    if not isinstance(pairs, list):
        raise ValueError(f"{where}: `kv` must be a list of [key, value] pairs, got {pairs!r}")
    kv: dict[Any, Any] = {}
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) in (str, int)):
            raise ValueError(f"{where}: `kv` holds {pair!r}, not a [key, value] pair with a "
                             "string or integer key")
        kv[pair[0]] = pair[1]
    return kv


def _by_end(seen: list[Seen]) -> list[tuple[int, list[Seen]]]:
    groups: dict[int, list[Seen]] = {}
    for snap in sorted(seen, key=lambda s: (s.end_offset, s.node, s.file or "", repr(s.ts))):
        groups.setdefault(snap.end_offset, []).append(snap)
    return sorted(groups.items())


def _disagreement(end: int, group: list[Seen], found: Anomalies) -> None:
    """Snapshots ending at one offset hold one committed prefix: they must be identical."""
    first = group[0]
    reported: set[tuple[int, int, str]] = set()
    for other in group[1:]:
        if other.content != first.content and other.content not in reported:
            reported.add(other.content)
            found.add("snapshot-disagreement", [],
                      f"snapshot {first.id} on {first.where()} holds {first.describe()}; snapshot "
                      f"{other.id} on {other.where()}, ending at the same offset {end}, holds "
                      f"{other.describe()}",
                      end_offset=end, nodes=sorted({first.node, other.node}))
    with_kv = [(s, s.kv) for s in group if s.kv is not None]
    for other, kv in with_kv[1:]:
        mine, my_kv = with_kv[0]
        if other.content == mine.content and kv != my_kv:
            found.add("snapshot-disagreement", [],
                      f"snapshot {other.id}: the kv map on {mine.where()} and on "
                      f"{other.where()} differ ({_kv_difference(my_kv, kv)}), "
                      f"yet their record counts and digests agree",
                      end_offset=end, nodes=sorted({mine.node, other.node}))


# --- the committed log as known -------------------------------------------------------------------

def _known_log(nodes: list[NodeData], parsed: AppendHistory | None, end: int) -> _Known:
    """Offsets below `end` (the last snapshot's) that the node logs and the reads show."""
    known = _Known()
    for node in nodes:
        if not node.log:
            continue
        committed = _committed_end(node)
        for line in node.log:
            offset = line.get("offset")
            if type(offset) is not int or offset >= committed:
                continue
            known.in_logs.add(offset)
            if type(line.get("epoch")) is int:
                known.epochs.setdefault(offset, line["epoch"])
            if offset < end:
                known.put(offset, _log_record(line))
    if parsed is not None:
        put, records = known.put, known.records
        for read in parsed.reads:
            if read.start >= end:
                continue
            limit = min(read.hw, end)
            for offset, value in read.records:
                if type(offset) is int and 0 <= offset < limit:
                    record = CONTROL if value is None else \
                        str(value).encode() if type(value) is int else None
                    if record is None or records.get(offset) == record:
                        continue  # (a malformed record is the append parse's to name)
                    put(offset, record)
    return known


def _committed_end(node: NodeData) -> int:
    """Below it, the node's log.jsonl holds committed records: its final high watermark, or its log
    start (what lies below a log start was committed when the snapshot there was taken)."""
    hw = node.final.get("high_watermark") if node.final else None
    return max(hw if type(hw) is int else 0, node.log_start_offset or 0)


def _log_record(line: dict[str, Any]) -> Record:
    if line.get("control"):
        return CONTROL
    payload = line.get("payload")
    if isinstance(payload, str):
        return payload.encode()
    value = line.get("value")
    if type(value) is int:
        return str(value).encode()
    return UNKNOWN_DATA


def _claims(parsed: AppendHistory | None, known: _Known) -> dict[int, Append]:
    """Acknowledged appends at offsets nothing else shows (one claim per offset; two acks of one
    offset are an inconsistency the log checkers report, and leave the offset unknown)."""
    claims: dict[int, Append] = {}
    if parsed is None:
        return claims
    doubled: set[int] = set()
    for append in parsed.appends.values():
        offset = append.offset
        if offset is None:
            continue
        if offset in claims:
            doubled.add(offset)
        claims[offset] = append
    for offset in doubled:
        del claims[offset]
    return {offset: append for offset, append in claims.items()
            if known.records.get(offset, CONFLICT) == CONFLICT}


# --- the fold ---------------------------------------------------------------------------------------

class _Fold:
    """The image of the committed log, folded forward from offset 0 (or from a snapshot, past an
    offset known from nowhere), compared with the snapshots in end-offset order."""

    def __init__(self, known: _Known, claims: dict[int, Append], found: Anomalies,
                 index: Callable[[int], int]) -> None:
        self.known, self.claims, self.found, self.index = known, claims, found, index
        self.image: Image | None = Image()
        self.base: Seen | None = None  # the snapshot the fold restarted from (None: offset 0)
        self.trusted = True  # from offset 0 (or a verified snapshot) over known offsets only
        self.exact = True  # every data record's value known: digest and kv are checkable
        self.kv_known = True
        self.pending: list[Append] = []  # claims folded in since the last verified snapshot
        self.gap: int | None = None
        self.verified = 0
        self.unverifiable = 0
        self.verified_end = 0  # every offset below it is in a verified snapshot
        self.proven: set[int] = set()  # values of claims a verified snapshot holds
        self.lost: set[int] = set()  # values of claims reported lost

    def judge(self, end: int, group: list[Seen]) -> None:
        if not self._advance(end):
            self.unverifiable += len(group)
            self._rebase(group)  # past an offset known from nowhere: go on from these snapshots
            return
        expected = self.image
        assert expected is not None
        differences = {id(snap): self._differences(snap, expected) for snap in group}
        matched = [snap for snap in group if not differences[id(snap)]]
        if matched and self.trusted and self.exact:
            self.verified += len(matched)
            self.verified_end = end
            self.proven.update(append.value for append in self.pending)
            self.pending = []
        else:
            self.unverifiable += len(matched)
        mismatched = [snap for snap in group if differences[id(snap)]]
        if mismatched and not matched and self.pending and self.trusted and self.exact:
            self._lost(end, mismatched)
        else:
            for snap in mismatched:
                self._mismatch(snap, differences[id(snap)])
        if not self.exact:
            # a value is unknown, so the digest is: go on from the snapshots that agree with the
            # record count (or all), whose digest and map the later ones can be compared with
            self._rebase(matched or group)
        elif not matched and (self.pending or not self.trusted):
            # the fold holds an unproven claim or starts at an unverified snapshot: go on from the
            # snapshots here, so that one wrong snapshot is reported once, not at every later one
            self._rebase(group)

    def _advance(self, end: int) -> bool:
        image = self.image
        if image is None:
            return False
        records, epochs, claims = self.known.records, self.known.epochs, self.claims
        # Image.apply's fold, inlined for the opaque data records (the append workload's
        # decimals: all of them, in a long run), which only count and digest; kv commands go
        # through Image.apply itself
        digest, count, epoch = image.digest, image.records, image.epoch
        for offset in range(image.end_offset, end):
            record = records.get(offset, CONFLICT)
            if record == CONFLICT:
                claim = claims.get(offset)
                if claim is None:
                    self.image, self.gap = None, offset
                    return False
                record = str(claim.value).encode()
                self.pending.append(claim)
            epoch = epochs.get(offset, epoch)
            if type(record) is bytes:
                if record[:1] == b"{":  # perhaps a kv command
                    image.end_offset, image.epoch = offset, epoch
                    image.records, image.digest = count, digest
                    image.apply(Entry(offset, epoch, EntryKind.DATA, record))
                    digest, count = image.digest, image.records
                else:
                    digest = fold_digest(digest, offset, record)
                    count += 1
            elif record == UNKNOWN_DATA:  # counted, but digest and kv are lost
                count += 1
                self.exact = self.kv_known = False
        if end > image.end_offset:
            image.end_offset, image.epoch = end, epoch
        image.records, image.digest = count, digest
        return True

    def _differences(self, snap: Seen, expected: Image) -> list[str]:
        why = []
        if snap.records != expected.records:
            why.append(f"it holds {snap.records} data records, the log {expected.records}")
        if self.exact and snap.digest != expected.digest.hex():
            why.append(f"its digest is {snap.digest}, the log's {expected.digest.hex()}")
        last = self.known.epochs.get(snap.end_offset - 1)
        if last is not None and snap.epoch != last:
            why.append(f"its epoch is {snap.epoch}, the committed entry at offset "
                       f"{snap.end_offset - 1} has epoch {last}")
        if self.kv_known and snap.kv is not None and snap.kv != expected.kv:
            why.append(f"its kv map differs from the log's commands "
                       f"({_kv_difference(snap.kv, expected.kv)})")
        return why

    def _what(self, end: int) -> str:
        if self.base is None:
            return f"the committed log below offset {end}"
        return (f"snapshot {self.base.id} on {self.base.where()} and the committed log "
                f"[{self.base.end_offset}, {end})")

    def _mismatch(self, snap: Seen, why: list[str]) -> None:
        blame = "" if self.trusted else "; one of the two snapshots does not hold the prefix it names"
        self.found.add("snapshot-log-mismatch", [],
                       f"snapshot {snap.id} on {snap.where()} is not the fold of "
                       f"{self._what(snap.end_offset)}: {'; '.join(why)}{blame}",
                       end_offset=snap.end_offset, epoch=snap.epoch, nodes=[snap.node])

    def _lost(self, end: int, mismatched: list[Seen]) -> None:
        """No snapshot here is the fold of the log with the acknowledged values in: a write is
        missing from them (or they do not hold their prefix)."""
        pending = self.pending
        self.lost.update(append.value for append in pending)
        index = self.index
        acked = ", ".join(f"{a.value} at offset {a.offset} (op {index(a.done)})"
                          for a in pending[:10])
        more = f" and {len(pending) - 10} more" if len(pending) > 10 else ""
        snaps = "; ".join(f"{s.id} on {s.where()}" for s in mismatched[:5])
        one = len(pending) == 1
        self.found.add(
            "lost-write", [index(p) for a in pending for p in (a.invoke, a.done)],
            f"snapshot {snaps} is not the fold of the committed log below offset {end} with the "
            f"acknowledged value{'' if one else 's'} {acked}{more} in, which only the snapshots "
            f"still cover: {'that write is' if one else 'one of those writes is'} missing from it, "
            f"or it does not hold the prefix it names",
            offsets=[a.offset for a in pending[:50]], values=[a.value for a in pending[:50]],
            end_offset=end, nodes=sorted({s.node for s in mismatched}))

    def _rebase(self, group: list[Seen]) -> None:
        """Go on from the snapshot most of the group agree on (unverified)."""
        common = Counter(snap.content for snap in group).most_common(1)[0][0]
        base = next(s for s in group if s.content == common)
        kv = next((s.kv for s in group if s.content == common and s.kv is not None), None)
        self.image = Image(base.end_offset, base.epoch, base.records,
                           bytes.fromhex(base.digest), kv)
        self.base, self.trusted, self.exact, self.kv_known = base, False, True, kv is not None
        self.pending = []


# --- the acknowledged writes below the log start --------------------------------------------------

def _writes_below_start(nodes: list[NodeData], parsed: AppendHistory | None, known: _Known,
                        fold: _Fold) -> dict[str, int]:
    """The acknowledged appends whose offset only the snapshots still cover: proven present, or
    counted unverifiable (the lost ones are anomalies already)."""
    starts = [node.log_start_offset or 0 for node in nodes]
    top = max(starts, default=0)
    figures = {"acked_below_log_start": 0, "proven_present": 0, "unverifiable": 0}
    if parsed is None or top == 0:
        return figures
    for append in parsed.appends.values():
        offset = append.offset
        if offset is None or offset >= top or offset in known.in_logs:
            continue
        figures["acked_below_log_start"] += 1
        if append.value in fold.lost:
            continue
        shown, acked = known.records.get(offset), str(append.value).encode()
        if append.value in fold.proven or (offset < fold.verified_end and shown == acked):
            figures["proven_present"] += 1
        elif type(shown) is not bytes or shown == acked:
            # (a read showing another value there is the log checkers' inconsistent-offsets)
            figures["unverifiable"] += 1
    return figures


# --- high watermarks and log starts ---------------------------------------------------------------

def _beyond_hw(nodes: list[NodeData], seen: list[Seen], found: Anomalies) -> None:
    reports = sorted((float(e["ts"]), e["hw"]) for node in nodes for e in node.events
                     if e.get("type") == "high-watermark" and type(e.get("hw")) is int
                     and isinstance(e.get("ts"), int | float))
    times = [ts for ts, _ in reports]
    highest = list(accumulate((hw for _, hw in reports), max))
    for node in nodes:
        for event in node.events:
            if event.get("type") != "snapshot" or type(event.get("end_offset")) is not int:
                continue
            end, hw, ts = event["end_offset"], event.get("hw"), event.get("ts")
            where = f"snapshot {end}-{event.get('epoch')} on node {node.name} (event at ts {ts})"
            if type(hw) is int and end > hw:
                found.add("snapshot-beyond-hw", [],
                          f"{where} ends beyond the high watermark {hw} it was taken under",
                          end_offset=end, hw=hw, nodes=[node.name])
            elif reports and isinstance(ts, int | float):
                at = bisect_right(times, float(ts))
                best = highest[at - 1] if at else None
                if best is None or end > best:
                    by_then = "no node had reported a high watermark" if best is None else \
                        f"the highest high watermark any node had reported was {best}"
                    found.add("snapshot-beyond-hw", [],
                              f"{where} ends at {end}, but by then {by_then}",
                              end_offset=end, hw=best, nodes=[node.name])
    finals = [n.final.get("high_watermark") for n in nodes if n.final]
    ever = [hw for _, hw in reports] + [hw for hw in finals if type(hw) is int]
    if not ever:
        return
    top = max(ever)
    for snap in seen:  # a file its node never announced (the event check is the finer one)
        if snap.file is not None and snap.ts is None and snap.end_offset > top:
            found.add("snapshot-beyond-hw", [],
                      f"snapshot {snap.id} on {snap.where()} ends beyond {top}, the highest high "
                      f"watermark any node reported in the run",
                      end_offset=snap.end_offset, hw=top, nodes=[snap.node])


def _log_starts(nodes: list[NodeData], found: Anomalies,
                damaged: Mapping[str, list[float]]) -> int:
    """Finds log starts without their snapshot; returns how many were the node's answer to a
    snapshot the harness damaged (not anomalies)."""
    after_damage = 0
    for node in nodes:
        durable: set[Any] = set()  # end offsets of the node's snapshots so far
        damage_times = damaged.get(node.name, [])
        lives = _lives(node.events)
        for life in lives:
            installed = {e.get("end_offset") for e in life if e.get("type") == "snapshot-install"}
            for event in life:
                kind = event.get("type")
                if kind in ("snapshot", "snapshot-install"):
                    durable.add(event.get("end_offset"))
                elif kind == "log-start":
                    start = event.get("offset")
                    if type(start) is int and start > 0 and start not in durable \
                            and start not in installed:
                        found.add("log-start-without-snapshot", [],
                                  f"node {node.name}: log start moved to {start} (ts "
                                  f"{event.get('ts')}) before any snapshot of its ending there "
                                  f"was durable (its snapshots so far end at "
                                  f"{_offsets(durable)})", offset=start, nodes=[node.name])
                elif kind == "log-invalid":
                    when = event.get("ts")
                    if isinstance(when, int | float) and any(t <= when for t in damage_times):
                        after_damage += 1
                        continue
                    detail = {k: v for k, v in event.items() if k not in ("type", "node", "ts")}
                    found.add("log-start-without-snapshot", [],
                              f"node {node.name}: at restart (ts {event.get('ts')}) its log start "
                              f"had no valid snapshot ending there or later, and the log was "
                              f"treated as empty ({json.dumps(detail, sort_keys=True)})",
                              nodes=[node.name], **{"event": detail})
        start = node.final.get("log_start_offset") if node.final else None
        if type(start) is int and start > 0 and node.snapshots is not None:
            ends = {line.get("end_offset") for line in node.snapshots if line.get("valid") is True}
            if start not in ends:
                if damage_times:
                    after_damage += 1
                    continue
                found.add("log-start-without-snapshot", [],
                          f"node {node.name}: final log start offset {start}, but its valid "
                          f"snapshot files end at {_offsets(ends)}", offset=start,
                          nodes=[node.name])
    return after_damage


def _lives(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A node's events split at each `start`: one list per process that ran."""
    lives: list[list[dict[str, Any]]] = [[]]
    for event in events:
        if event.get("type") == "start" and lives[-1]:
            lives.append([])
        lives[-1].append(event)
    return lives


def _offsets(values: set[Any]) -> str:
    shown = sorted(v for v in values if type(v) is int)
    return ", ".join(map(str, shown)) if shown else "no offset (none)"


def _count(nodes: list[NodeData], kind: str) -> int:
    return sum(1 for node in nodes for event in node.events if event.get("type") == kind)


def _kv_difference(mine: dict[Any, Any], theirs: dict[Any, Any]) -> str:
    keys = sorted(set(mine) | set(theirs), key=repr)
    diff = [f"key {k!r}: {mine.get(k)!r} vs {theirs.get(k)!r}" for k in keys
            if mine.get(k) != theirs.get(k)]
    return "; ".join(diff[:3]) + (f"; {len(diff) - 3} more" if len(diff) > 3 else "")
