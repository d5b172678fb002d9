"""Raft's invariants, and KIP-630's for snapshots, checked by the simulator after every event.

Each check is incremental (it looks only at what the last event changed), so that checking after
every event stays cheap. A broken invariant raises `Violation` naming it.

| invariant | holds when |
| --- | --- |
| SingleLeader | at most one leader per epoch, ever (whatever the voter sets: KIP-853 changes them) |
| MonotonicEpoch | a node's epoch never decreases, across restarts too |
| MonotonicHighWatermark | a node's high watermark never decreases while it runs |
| MajorityReachedHighWatermark | when a leader's HW reaches H, a majority of voters has flushed entry H-1 as the leader has it; with KIP-853, of the voter set in effect at the leader when its HW moved, each voter counted only as the replica (directory id) the set names, the leader's own log only if it is in the set |
| ConsistentCommittedData | every offset below any node's HW holds the same entry on every node, ever; no node truncates below its HW; a node whose HW passes entries it never held (below its log start: a snapshot holds them) has a state machine image equal to the committed log's fold |
| NoAckedAppendLost | an acknowledged append stays committed at its offset |
| ConsistentOutcomes | what a client is told (a kv command's outcome: ok, swapped, not-swapped; an image read's kv map at the HW it names) is what applying the committed log gives |
| ReadsLinearizable | a read's HW covers every append acknowledged before the read began |
| SnapshotsAgree | snapshots with the same id have the same content, on every node, ever |
| SnapshotMatchesLog | a snapshot's content (end offset, epoch, records, digest, kv) is the fold of the committed log prefix its id claims |
| SnapshotWithinHighWatermark | no snapshot holds entries above the HW of the node that took it, when it took it |
| LogStartAtSnapshot | a node's log start offset is 0 or the end offset of one of its durable snapshots (checked as it moves: on install, on deletion below a snapshot) |
| ObserversFollow | no observer ends the run stranded: in an epoch above every voter's and behind what was committed when faults healed (an observer that campaigns, `observer-campaign`, strands itself in an epoch no leader has and stops replicating: KAFKA-17067's harm, brokers stuck on stale metadata) |
| ZombieStepDown | a leader cut off from a majority (of the voter set it holds) is no longer leader once the leader progress timeout (plus delivery slack) has passed |
| SingleVoterChange | (KIP-853) a leader's log holds at most one uncommitted voter change: at most one VotersRecord at or above the committed end (checked when a leader is elected and when it appends a change) |
| VoterSetsOverlap | (KIP-853) a leader's committed voter set and its latest one overlap: every majority of one meets every majority of the other |
| VoterSetAtLogEnd | (KIP-853) every replica's voter set is the one its log ends with: its last VotersRecord, else its snapshot's (checked whenever its voter entries may have changed: appended, truncated, installed) |
| Liveness | once faults heal, an append commits within the remaining simulated time |
| BrokerSelfFence | (brokers) a broker that says it is serving had a request answered within broker.heartbeat.timeout.ms (the `no-self-fence` switch breaks it; sim/brokers.py) |
| IncarnationMonotonic | (brokers) per broker id, the incarnation registered in the committed log never goes back to an older one (`accept-old-incarnation`) |
| UnfenceAfterCaughtUp | (brokers) every unfence record (appended, and committed) names a caught-up offset at least its registration's epoch, and no broker turns active before its metadata offset reaches its broker epoch (`unfence-before-caught-up`) |
| SessionExpiry | (brokers) a leader's view (its log, committed or not) keeps no broker unfenced longer than broker.session.timeout.ms (+ 1 ms) after its last heartbeat to that leader, or the leader's election (sim/brokers.py) |
| BrokersAgree | (brokers) a node's image at offset k holds the brokers the committed log's first k entries register (they are part of the image; snapshots compare them too, SnapshotMatchesLog) |
| BrokersLive | (brokers) when a fault-free or healed run ends, every broker is active, serving, and listed unfenced with its current incarnation by the leader |

The broker checks are on only with brokers (`Invariants(brokers=True)`): a run without brokers pays
nothing for them. Broker records are recognised by the design's format (a JSON object whose first
key, sorted, is "broker"), read here independently of the node's own decoder.

The committed log is kept whole (`committed`), with its fold: the running image, the outcome of
every offset, (records, digest) after every prefix, and a copy of the image every
`CHECKPOINT_EVERY` offsets, so that the image at any offset costs at most that many applies. A
snapshot's content is compared with the committed fold once per snapshot id (later copies of the
same id only have to equal the first: SnapshotsAgree).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection, Hashable
from typing import Any

from reference_node.raft.image import GENESIS_DIGEST, Image
from reference_node.raft.messages import Entry, EntryKind, SnapshotId
from reference_node.raft.voters import VoterSet, overlapping

INVARIANTS = (
    "SingleLeader",
    "MonotonicEpoch",
    "MonotonicHighWatermark",
    "MajorityReachedHighWatermark",
    "ConsistentCommittedData",
    "NoAckedAppendLost",
    "ConsistentOutcomes",
    "ReadsLinearizable",
    "SnapshotsAgree",
    "SnapshotMatchesLog",
    "SnapshotWithinHighWatermark",
    "LogStartAtSnapshot",
    "ObserversFollow",
    "ZombieStepDown",
    "SingleVoterChange",
    "VoterSetsOverlap",
    "VoterSetAtLogEnd",
    "Liveness",
    "BrokerSelfFence",
    "IncarnationMonotonic",
    "UnfenceAfterCaughtUp",
    "SessionExpiry",
    "BrokersAgree",
    "BrokersLive",
)

CHECKPOINT_EVERY = 64
"""Offsets between two kept copies of the committed image."""


class Violation(Exception):
    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


def same_entry(a: Entry, b: Entry) -> bool:
    return a is b or (a.epoch == b.epoch and a.kind is b.kind and a.payload == b.payload)


class Invariants:
    """The global memory the checks need: leaders per epoch, the committed log and its fold,
    acked appends, the content of every snapshot id seen."""

    def __init__(self, brokers: bool = False) -> None:
        self.leaders: dict[int, int] = {}
        self.committed: list[Entry] = []
        self.acked: dict[int, bytes] = {}
        self.max_acked = -1
        self.image = Image()
        """The committed log's fold: the image every node must reach at `len(committed)`."""
        self.outcomes: list[str | None] = []
        """What applying each committed offset did (`Image.apply`)."""
        self.folds: list[tuple[int, bytes]] = [(0, GENESIS_DIGEST)]
        """(records, digest) of the image after the first k committed entries, at index k."""
        self.checkpoints: list[Image] = [Image()]
        """The committed image at every multiple of CHECKPOINT_EVERY."""
        self.snapshots: dict[SnapshotId, Image] = {}
        """The first content seen for each snapshot id."""
        self.matched: set[SnapshotId] = set()
        """Snapshot ids whose content was found equal to the committed fold."""
        self.pending: list[tuple[int, SnapshotId, Image]] = []
        """Snapshots naming offsets not committed yet when they were seen: checked once they are."""
        self.broker_folds: list[tuple[Any, ...]] | None = [()] if brokers else None
        """With brokers: the committed image's brokers (sorted items) after the first k entries,
        at index k (the same tuple until a broker record changes them)."""
        self.registered: dict[int, tuple[uuid.UUID, int]] = {}
        """Broker id -> (incarnation, epoch) of its latest committed registration."""

    def leader(self, node: int, epoch: int) -> None:
        other = self.leaders.setdefault(epoch, node)
        if other != node:
            raise Violation("SingleLeader", f"nodes {other} and {node} both led epoch {epoch}")

    def epoch(self, node: int, old: int, new: int) -> None:
        if new < old:
            raise Violation("MonotonicEpoch", f"node {node} went from epoch {old} to {new}")

    def observer_followed(self, node: int, hw: int, committed_at_heal: int, state: str,
                          epoch: int, voter_epoch: int) -> None:
        if hw < committed_at_heal:
            raise Violation(
                "ObserversFollow",
                f"observer {node} ends the run {state} in epoch {epoch}, above every voter's "
                f"(at most {voter_epoch}), with high watermark {hw}; {committed_at_heal} entries "
                "were committed when the faults healed",
            )

    def truncated(self, node: int, offset: int, hw: int) -> None:
        if offset < hw:
            raise Violation(
                "ConsistentCommittedData",
                f"node {node} truncated its log to {offset}, below its high watermark {hw}",
            )

    def high_watermark(
        self, node: int, old: int, new: int, entry_at: Callable[[int], Entry | None],
        log_start: int = 0, image: Image | None = None,
    ) -> None:
        """`node`'s HW moved from `old` to `new`: record or compare every newly committed entry
        the node holds; below its log start (a snapshot holds those), compare its image."""
        if new < old:
            raise Violation("MonotonicHighWatermark", f"node {node} HW went from {old} to {new}")
        committed = self.committed
        if log_start > old:
            # Entries the node never held (it installed a snapshot) or deleted under a durable
            # snapshot: the snapshot vouches for them (SnapshotMatchesLog), if they were committed.
            if log_start > len(committed):
                raise Violation(
                    "ConsistentCommittedData",
                    f"node {node} has HW {new} and a log starting at {log_start} (a snapshot), "
                    f"but only {len(committed)} entries were ever committed",
                )
            old = log_start
        for offset in range(old, new):
            entry = entry_at(offset)
            if entry is None:
                raise Violation(
                    "ConsistentCommittedData", f"node {node} has HW {new} but no entry at {offset}"
                )
            if offset < len(committed):
                if not same_entry(entry, committed[offset]):
                    name = ("NoAckedAppendLost" if offset in self.acked
                            else "ConsistentCommittedData")
                    raise Violation(
                        name,
                        f"offset {offset}: node {node} committed {entry}, "
                        f"earlier committed {committed[offset]}",
                    )
            elif offset == len(committed):
                self._commit(entry)
        if image is not None:
            self.image_matches(node, image)

    def _commit(self, entry: Entry) -> None:
        """`entry` is committed at the end of the committed log: fold it in."""
        self.committed.append(entry)
        image = self.image
        self.outcomes.append(image.apply(entry))
        self.folds.append((image.records, image.digest))
        folds = self.broker_folds
        if folds is not None:
            record = _broker_record(entry)
            if record is None:
                folds.append(folds[-1])
            else:
                self._broker_committed(entry.offset, record)
                folds.append(_brokers_key(image.brokers))
        if image.end_offset % CHECKPOINT_EVERY == 0:
            self.checkpoints.append(image.copy())
        if self.pending:
            self._check_pending()

    def image_at(self, offset: int) -> Image:
        """The committed log's image at `offset` (<= len(committed)); do not change it."""
        if offset == len(self.committed):
            return self.image
        image = self.checkpoints[offset // CHECKPOINT_EVERY].copy()
        for entry in self.committed[image.end_offset : offset]:
            image.apply(entry)
        return image

    def image_matches(self, node: int, image: Image) -> None:
        """A node's running image, where the committed log reaches it, is that log's fold."""
        end = image.end_offset
        if end <= len(self.committed) and (image.records, image.digest) != self.folds[end]:
            records, digest = self.folds[end]
            raise Violation(
                "ConsistentCommittedData",
                f"node {node}'s image at offset {end} holds {image.records} records (digest "
                f"{image.digest.hex()[:12]}), the committed log's first {end} entries "
                f"{records} (digest {digest.hex()[:12]})",
            )
        folds = self.broker_folds
        if folds is not None and end <= len(self.committed):
            held = _brokers_key(image.brokers)
            if held != folds[end]:
                raise Violation(
                    "BrokersAgree",
                    f"node {node}'s image at offset {end} holds the brokers {held}; the committed "
                    f"log's first {end} entries register {folds[end]}",
                )

    # --- brokers --------------------------------------------------------------------------------

    def _broker_committed(self, offset: int, record: dict[str, Any]) -> None:
        """A broker record committed at `offset`: registrations never go back to an older
        incarnation; an unfence names a caught-up offset."""
        op, broker = record.get("op"), record.get("broker")
        if op == "register-broker" and isinstance(broker, int):
            incarnation = uuid.UUID(str(record.get("incarnation")))
            before = self.registered.get(broker)
            if before is not None and incarnation.int < before[0].int:
                raise Violation(
                    "IncarnationMonotonic",
                    f"broker {broker} registered at offset {offset} with incarnation "
                    f"{incarnation}, older than {before[0]} it registered with at {before[1]}",
                )
            self.registered[broker] = (incarnation, offset)
        elif op == "unfence-broker" and isinstance(broker, int):
            self.unfence_caught_up(None, broker, int(record.get("epoch", -1)),
                                   int(record.get("caught_up", -1)), offset)

    def unfence_caught_up(self, node: int | None, broker: int, epoch: int, caught_up: int,
                          offset: int | None) -> None:
        """An unfence of `broker`'s registration `epoch`, on the evidence of metadata offset
        `caught_up` (appended by leader `node`, or committed: None), at `offset`."""
        if caught_up < epoch:
            where = f"leader {node} appended" if node is not None else "the committed log holds"
            raise Violation(
                "UnfenceAfterCaughtUp",
                f"{where} an unfence of broker {broker} (epoch {epoch}) at offset {offset} on the "
                f"evidence of metadata offset {caught_up}, below its registration",
            )

    def active_caught_up(self, broker: int, broker_epoch: int, metadata_offset: int) -> None:
        """`broker` just turned active: it must have applied its own registration."""
        if metadata_offset < broker_epoch:
            raise Violation(
                "UnfenceAfterCaughtUp",
                f"broker {broker} turned active at metadata offset {metadata_offset}, below its "
                f"broker epoch {broker_epoch} (its own registration)",
            )

    # --- snapshots ------------------------------------------------------------------------------

    def snapshot_taken(self, node: int, sid: SnapshotId, image: Image, hw: int) -> None:
        """`node` asks to write `image` as snapshot `sid`, under high watermark `hw`."""
        if sid.end_offset > hw:
            if hw <= len(self.committed) and self._holds_prefix(image, hw):
                # Its content is within the HW: what lies is its name (KAFKA-14618's defect).
                raise Violation(
                    "SnapshotMatchesLog",
                    f"node {node}'s snapshot {_sid(sid)} claims offsets [0, {sid.end_offset}) "
                    f"but holds exactly the committed [0, {hw}) (its HW)",
                )
            raise Violation(
                "SnapshotWithinHighWatermark",
                f"node {node} took snapshot {_sid(sid)} ({image.records} records) under high "
                f"watermark {hw}",
            )
        self.snapshot_seen(node, sid, image)

    def snapshot_seen(self, node: int, sid: SnapshotId, image: Image) -> None:
        """`node` holds `image` as snapshot `sid` (its own, or downloaded from the leader)."""
        first = self.snapshots.setdefault(sid, image)
        if first is not image and first != image:
            raise Violation(
                "SnapshotsAgree",
                f"node {node}'s snapshot {_sid(sid)} holds {image!r}; another copy holds {first!r}",
            )
        if sid in self.matched:
            return
        if image.snapshot_id != sid:
            raise Violation(
                "SnapshotMatchesLog",
                f"node {node}'s snapshot {_sid(sid)} holds an image of {_sid(image.snapshot_id)}",
            )
        if sid.end_offset > len(self.committed):
            self.pending.append((node, sid, image))
            return
        self._match(node, sid, image)

    def _check_pending(self) -> None:
        top = len(self.committed)
        due = [p for p in self.pending if p[1].end_offset <= top]
        if due:
            self.pending = [p for p in self.pending if p[1].end_offset > top]
            for node, sid, image in due:
                if sid not in self.matched:
                    self._match(node, sid, image)

    def _match(self, node: int, sid: SnapshotId, image: Image) -> None:
        want = self.image_at(sid.end_offset)
        wrong = [
            f"{name} {got!r} (committed: {expected!r})"
            for name, got, expected in (
                ("epoch", image.epoch, want.epoch),
                ("records", image.records, want.records),
                ("digest", image.digest.hex()[:12], want.digest.hex()[:12]),
                ("kv", image.kv, want.kv),
                ("brokers", image.brokers, want.brokers),
            )
            if got != expected
        ]
        if wrong:
            raise Violation(
                "SnapshotMatchesLog",
                f"node {node}'s snapshot {_sid(sid)} differs from the committed log's fold at "
                f"{sid.end_offset}: " + "; ".join(wrong),
            )
        self.matched.add(sid)

    def _holds_prefix(self, image: Image, offset: int) -> bool:
        return ((image.records, image.digest) == self.folds[offset]
                and image.kv == self.image_at(offset).kv)

    def log_start(self, node: int, offset: int, durable: Collection[SnapshotId], how: str) -> None:
        """`node`'s log start offset moved to `offset` (`how`: install, deletion, restart)."""
        if offset != 0 and not any(sid.end_offset == offset for sid in durable):
            held = ", ".join(_sid(s) for s in sorted(durable, key=_order)) or "none"
            raise Violation(
                "LogStartAtSnapshot",
                f"node {node}'s log starts at {offset} after {how}, but no durable snapshot ends "
                f"there (durable: {held})",
            )

    def majority_flushed(self, node: int, hw: int, holders: int, majority: int,
                         voters: list[int] | None = None) -> None:
        if holders < majority:
            of = f" of {voters}" if voters is not None else ""
            raise Violation(
                "MajorityReachedHighWatermark",
                f"leader {node} set HW {hw} but only {holders} voters{of} (need {majority}) "
                f"have flushed entry {hw - 1}",
            )

    # --- KIP-853 ------------------------------------------------------------------------------------

    def single_voter_change(self, node: int, epoch: int, uncommitted: list[int],
                            committed_end: int) -> None:
        """`uncommitted`: the offsets of the VotersRecords in leader `node`'s log at or above
        `committed_end` (its HW, or the committed log's end when that is further)."""
        if len(uncommitted) > 1:
            raise Violation(
                "SingleVoterChange",
                f"leader {node} (epoch {epoch}) has {len(uncommitted)} uncommitted voter changes "
                f"in its log, at offsets {uncommitted} (committed below {committed_end})",
            )

    def voter_sets_overlap(self, node: int, epoch: int, committed: VoterSet,
                           latest: VoterSet) -> None:
        if not overlapping(committed, latest):
            raise Violation(
                "VoterSetsOverlap",
                f"leader {node} (epoch {epoch}): its committed voters {committed.sorted()} and "
                f"its latest {latest.sorted()} have majorities that do not meet",
            )

    def voters_at_log_end(self, node: int, held: VoterSet, at_log_end: VoterSet) -> None:
        if held != at_log_end:
            raise Violation(
                "VoterSetAtLogEnd",
                f"node {node} holds the voter set {held!r}; its log ends with {at_log_end!r}",
            )

    def acknowledged(self, offset: int, payload: bytes) -> None:
        entry = self.committed[offset] if offset < len(self.committed) else None
        if entry is None or entry.payload != payload:
            raise Violation(
                "NoAckedAppendLost",
                f"append {payload!r} acknowledged at {offset}, committed there: {entry}",
            )
        self.acked[offset] = payload
        self.max_acked = max(self.max_acked, offset)

    def outcome(self, node: int, offset: int, told: str | None) -> None:
        """A client was told `told` for its command committed at `offset`."""
        if told != self.outcomes[offset]:
            raise Violation(
                "ConsistentOutcomes",
                f"node {node} told a client {told!r} for {self.committed[offset].payload!r} at "
                f"{offset}; applying the committed log gives {self.outcomes[offset]!r}",
            )

    def read(self, node: int, max_acked_at_invoke: int, hw: int,
             records: tuple[Entry, ...]) -> None:
        self._read_covers(node, max_acked_at_invoke, hw)
        committed = self.committed
        for entry in records:
            if entry.offset >= len(committed) or not same_entry(entry, committed[entry.offset]):
                raise Violation(
                    "ConsistentCommittedData",
                    f"read at node {node} returned {entry} at {entry.offset}",
                )

    def read_image(self, node: int, max_acked_at_invoke: int, hw: int,
                   kv: tuple[tuple[Hashable, Any], ...] | None) -> None:
        """An image read: its kv map is the committed image's at the HW it names."""
        self._read_covers(node, max_acked_at_invoke, hw)
        want = self.image_at(hw).kv if hw <= len(self.committed) else None
        if kv is None or dict(kv) != want:
            raise Violation(
                "ConsistentOutcomes",
                f"image read at node {node} returned {kv} at HW {hw}; the committed log's image "
                f"there holds {want}",
            )

    def _read_covers(self, node: int, max_acked_at_invoke: int, hw: int) -> None:
        if hw <= max_acked_at_invoke:
            raise Violation(
                "ReadsLinearizable",
                f"read at node {node} returned HW {hw}, but offset {max_acked_at_invoke} was "
                "acknowledged before the read began",
            )

    def zombie(self, node: int, cut_for_ms: int, limit_ms: int) -> None:
        if cut_for_ms > limit_ms:
            raise Violation(
                "ZombieStepDown",
                f"node {node} is still leader {cut_for_ms} ms after losing its majority "
                f"(limit {limit_ms} ms)",
            )


def _broker_record(entry: Entry) -> dict[str, Any] | None:
    """The broker record (the design's JSON, keys sorted: "broker" first) an entry holds, or
    None."""
    payload = entry.payload
    if entry.kind is not EntryKind.DATA or not payload.startswith(b'{"broker"'):
        return None
    try:
        record = json.loads(payload)
    except ValueError:
        return None
    return record if isinstance(record, dict) and "op" in record else None


def _brokers_key(brokers: dict[int, Any]) -> tuple[Any, ...]:
    return tuple(sorted(brokers.items()))


def _sid(sid: SnapshotId) -> str:
    return f"{sid.end_offset}-{sid.epoch}"


def _order(sid: SnapshotId) -> tuple[int, int]:
    return (sid.end_offset, sid.epoch)
