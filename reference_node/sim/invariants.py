"""Raft's invariants, and KIP-630's for snapshots, checked by the simulator after every event.

Each check is incremental (it looks only at what the last event changed), so that checking after
every event stays cheap. A broken invariant raises `Violation` naming it. They speak of the log and
its snapshots (SingleLeader, ConsistentCommittedData, SnapshotMatchesLog, ...), of voter changes
(KIP-853), of brokers (on only with `Invariants(brokers=True)`), of liveness, and of behaviour
(`Behaviour`: what handling one delivered message did to the node that handled it, judged from
what its host sees, never by calling the core's own decision code). The table of every invariant
and when it holds: docs/internals/simulator.md#invariants

What the checks expect comes from their own models (oracle.py), never from the code they judge:
the committed log's fold is the oracle's `StateModel`, not `Image.apply`; a majority is the
oracle's count, not `VoterSet.majority`; broker records are read by the oracle, not by the node's
decoder. A bug planted in the implementation then shows as a disagreement, not as a changed
expectation (tests/raft/test_sim_oracle.py plants some). The committed log is kept whole, with its
fold and checkpoints of it (same page).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Hashable
from typing import TYPE_CHECKING, Any

from reference_node.raft.api import TRUNCATION_BELOW_HIGH_WATERMARK, Fatal, Receive
from reference_node.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChange,
    Message,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from reference_node.sim.oracle import (
    GENESIS_DIGEST,
    BrokerRecord,
    StateModel,
    broker_record,
    brokers_key,
    image_content,
    majorities_meet,
    majority,
    observed_brokers,
    voters_content,
)

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore
    from reference_node.raft.image import Image
    from reference_node.raft.voters import VoterSet

INVARIANTS = (
    "SingleLeader",
    "MonotonicEpoch",
    "MonotonicHighWatermark",
    "MajorityReachedHighWatermark",
    "ConsistentCommittedData",
    "TruncateAboveHighWatermark",
    "NoAckedAppendLost",
    "ConsistentOutcomes",
    "ReadsLinearizable",
    "SnapshotsAgree",
    "SnapshotMatchesLog",
    "SnapshotWithinHighWatermark",
    "LogStartAtSnapshot",
    "CommittedKeptAtStart",
    "ObserversFollow",
    "ZombieStepDown",
    "SingleVoterChange",
    "VoterSetsOverlap",
    "VoterSetAtLogEnd",
    "Liveness",
    "BrokerSelfFence",
    "DuplicateRegistration",
    "UnfenceAfterCaughtUp",
    "SessionExpiry",
    "BrokersAgree",
    "BrokersLive",
    "StepDownOnHigherEpoch",
    "GrantsOfOwnEpoch",
    "VoteOncePerEpoch",
    "VoteForUpToDateLog",
    "StaleEpochRefused",
    "RecordsFromLeader",
    "FetchInOwnEpoch",
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
        self.image = StateModel()
        """The committed log's fold (the oracle's model): the image every node must reach at
        `len(committed)`."""
        self.outcomes: list[str | None] = []
        """What applying each committed offset did (`StateModel.apply`)."""
        self.folds: list[tuple[int, bytes]] = [(0, GENESIS_DIGEST)]
        """(records, digest) of the image after the first k committed entries, at index k."""
        self.checkpoints: list[StateModel] = [StateModel()]
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
        self.behaviour = Behaviour()
        """The invariants of behaviour: the host steps every delivered message through it."""

    def leader(self, node: int, epoch: int) -> None:
        other = self.leaders.setdefault(epoch, node)
        if other != node:
            raise Violation("SingleLeader", f"nodes {other} and {node} both led epoch {epoch}")

    def inconsistent_leader(self, node: int, event: dict[str, Any]) -> None:
        """`node` heard of another leader for its epoch than the one it knows (its
        `inconsistent-leader` event): two leaders named in one epoch."""
        raise Violation(
            "SingleLeader",
            f"node {node} knows leader {event['leader']} for epoch {event['epoch']}, and a "
            f"{event['message']} from {event['source']} names {event['claimed']}",
        )

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
                "TruncateAboveHighWatermark",
                f"node {node} truncated its log to {offset}, below its high watermark {hw}",
            )

    def halted(self, node: int, fatal: Fatal) -> None:
        """A core that cannot go on (`Ready.fatal`) saw a broken quorum: the only such error is a
        leader asking it to truncate below its high watermark, which it refused."""
        raise Violation(
            "TruncateAboveHighWatermark" if fatal.name == TRUNCATION_BELOW_HIGH_WATERMARK
            else fatal.name,
            f"node {node} halted: {fatal}",
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
        self.holds_committed(node, old, new, new, entry_at)
        if image is not None:
            self.image_matches(node, image)

    def holds_committed(self, node: int, start: int, end: int, hw: int,
                        entry_at: Callable[[int], Entry | None]) -> None:
        """Every entry `node` (HW `hw`) holds in [start, end) is the one committed there; one
        just past the committed log's end is committed now."""
        committed = self.committed
        for offset in range(start, end):
            entry = entry_at(offset)
            if entry is None:
                raise Violation(
                    "ConsistentCommittedData", f"node {node} has HW {hw} but no entry at {offset}"
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

    def _commit(self, entry: Entry) -> None:
        """`entry` is committed at the end of the committed log: fold it in."""
        self.committed.append(entry)
        image = self.image
        self.outcomes.append(image.apply(entry))
        self.folds.append((image.records, image.digest))
        folds = self.broker_folds
        if folds is not None:
            record = broker_record(entry)
            if record is None:
                folds.append(folds[-1])
            else:
                self._broker_committed(entry.offset, record)
                folds.append(brokers_key(image.brokers))
        if image.end_offset % CHECKPOINT_EVERY == 0:
            self.checkpoints.append(image.copy())
        if self.pending:
            self._check_pending()

    def image_at(self, offset: int) -> StateModel:
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
            held = brokers_key(observed_brokers(image.brokers))
            if held != folds[end]:
                raise Violation(
                    "BrokersAgree",
                    f"node {node}'s image at offset {end} holds the brokers {held}; the committed "
                    f"log's first {end} entries register {folds[end]}",
                )

    # --- brokers --------------------------------------------------------------------------------

    def _broker_committed(self, offset: int, record: BrokerRecord) -> None:
        """A broker record committed at `offset`: an unfence names a caught-up offset. (Which
        incarnation may register is judged against sessions: brokers.py, DuplicateRegistration.)"""
        if record.op == "unfence-broker":
            self.unfence_caught_up(None, record.broker, record.epoch, record.caught_up, offset)

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
        if first is not image and image_content(first) != image_content(image):
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
                ("brokers", observed_brokers(image.brokers), want.brokers),
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

    def kept_at_start(self, node: int, held: int, kept: int) -> None:
        """`node` starts again as the same replica (id and directory id): its disk held a log up
        to `held`; what it starts from (its log, or a snapshot past it) must reach every
        committed offset below that. One that starts short of it still counts in majorities it
        no longer backs (issue 41: a voter whose covering snapshot is gone, its log emptied,
        votes in a leader that lacks a committed entry)."""
        must = min(held, len(self.committed))
        if kept < must:
            raise Violation(
                "CommittedKeptAtStart",
                f"node {node} starts as the same replica from a log ending at {kept}, but its "
                f"disk held committed entries up to {must}",
            )

    def majority_flushed(self, node: int, hw: int, holders: int, voters: Collection[int],
                         named: bool = True) -> None:
        """`holders` of `voters` (ids) have flushed entry `hw - 1` as leader `node` has it
        (`named`: the message lists the voters)."""
        need = majority(len(voters))
        if holders < need:
            of = f" of {sorted(voters)}" if named else ""
            raise Violation(
                "MajorityReachedHighWatermark",
                f"leader {node} set HW {hw} but only {holders} voters{of} (need {need}) "
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
        if not majorities_meet(committed.ids, latest.ids):
            raise Violation(
                "VoterSetsOverlap",
                f"leader {node} (epoch {epoch}): its committed voters {committed.sorted()} and "
                f"its latest {latest.sorted()} have majorities that do not meet",
            )

    def voters_at_log_end(self, node: int, held: VoterSet, at_log_end: VoterSet) -> None:
        if voters_content(held) != voters_content(at_log_end):
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


Replica = tuple[int, uuid.UUID | None]
"""A replica: its node id and its directory id (None with static voters; a wiped disk is a new
replica of the same id, KIP-853)."""


class Behaviour:
    """The invariants of behaviour (the table above): what handling one delivered message must
    have done to the node that handled it.

    `receive` steps the message into the core, as the host would, and judges the step from the
    message, the core's public state just before and after it, and the step's Ready (the host
    advanced the previous one, so `core.ready()` holds exactly this step's output). Most messages
    are fetches of the epoch the node is in: they cost one comparison. The memory kept is small:
    the votes each replica cast, by epoch, and the grants each node received, by round.
    """

    __slots__ = ("grants", "votes")

    def __init__(self) -> None:
        self.votes: dict[Replica, dict[int, int]] = {}
        """Replica -> epoch -> the candidate it voted for in that epoch (itself, as a candidate)."""
        self.grants: dict[tuple[int, int, bool], set[int]] = {}
        """(node, epoch, pre-vote) -> the voters whose grant of that round reached the node: a
        granted Vote answering its Vote for that epoch, or a granted pre-vote answering its
        pre-vote asked in that epoch (its own: KIP-996's prospective does not bump it)."""

    def receive(self, node: int, directory_id: uuid.UUID | None, core: RaftCore,
                receive: Receive, now_ms: int) -> None:
        """Step `receive` into `core` (node `node`, on the disk `directory_id`) and judge it."""
        rule = _RULES.get(type(receive.message))
        if rule is None:
            core.step(receive, now_ms=now_ms)  # a broker message: no epoch, no vote
            return
        rule(self, (node, directory_id), core, receive, now_ms)

    # --- the rules, one per kind of message --------------------------------------------------

    def _fetch_request(self, replica: Replica, core: RaftCore, receive: Receive,
                       now_ms: int) -> None:
        request = receive.message
        assert isinstance(request, FetchRequest | FetchSnapshotRequest)
        if request.current_leader_epoch >= core.epoch:
            core.step(receive, now_ms=now_ms)  # the common case: nothing to judge
            return
        self._stale(replica[0], core, receive, now_ms)

    def _from_leader(self, replica: Replica, core: RaftCore, receive: Receive,
                     now_ms: int) -> None:
        """BeginQuorumEpoch and EndQuorumEpoch: the leader of a higher epoch is followed."""
        request = receive.message
        assert isinstance(request, BeginQuorumEpochRequest | EndQuorumEpochRequest)
        before = core.epoch
        if request.leader_epoch < before:
            self._stale(replica[0], core, receive, now_ms)
            return
        core.step(receive, now_ms=now_ms)
        _fetches_in_own_epoch(replica[0], core)
        if request.leader_epoch > before:
            answer = _answer(core, request)
            if answer is not None and answer.error == ErrorCode.none:
                _stepped_down(replica[0], core, request, request.leader_epoch, before)

    def _vote_request(self, replica: Replica, core: RaftCore, receive: Receive,
                      now_ms: int) -> None:
        request = receive.message
        assert isinstance(request, VoteRequest)
        before, voted = core.epoch, core.voted_id
        if request.candidate_epoch < before:
            self._stale(replica[0], core, receive, now_ms)
            return
        log_before = (core.last_epoch, core.log_end_offset)
        core.step(receive, now_ms=now_ms)
        answer = _answer(core, request)
        if not isinstance(answer, VoteResponse):
            return
        node = replica[0]
        if voted is not None:
            self._voted(replica, before, voted)
        if answer.vote_granted:
            # The same vote granted again (a resent request) is KIP-595's step 3, not a new
            # judgement of the logs: the log may have grown since, from this very candidate.
            again = not request.pre_vote and voted == request.candidate_id and \
                before == request.candidate_epoch
            candidate_log = (request.last_offset_epoch, request.last_offset)
            if not again and candidate_log < log_before:
                kind = "pre-vote" if request.pre_vote else "vote"
                raise Violation(
                    "VoteForUpToDateLog",
                    f"node {node} granted its {kind} for epoch {request.candidate_epoch} to "
                    f"{request.candidate_id}, whose log ends at {request.last_offset} in epoch "
                    f"{request.last_offset_epoch}; its own ended at {log_before[1]} in epoch "
                    f"{log_before[0]}",
                )
            if not request.pre_vote:
                self._voted(replica, request.candidate_epoch, request.candidate_id)
        if core.voted_id is not None:
            self._voted(replica, core.epoch, core.voted_id)
        if request.candidate_epoch > before and answer.error == ErrorCode.none:
            _stepped_down(node, core, request, request.candidate_epoch, before)

    def _vote_response(self, replica: Replica, core: RaftCore, receive: Receive,
                       now_ms: int) -> None:
        response = receive.message
        assert isinstance(response, VoteResponse)
        node = replica[0]
        before, role = core.epoch, core.state_name
        core.step(receive, now_ms=now_ms)
        if response.leader_epoch > before:
            _stepped_down(node, core, response, response.leader_epoch, before)
        if response.vote_granted and response.error == ErrorCode.none:
            key = _round(node, response, receive.in_reply_to, role, before)
            if key is not None:
                self.grants.setdefault(key, set()).add(receive.src)
        self._tally(node, core, role, before)

    def _response(self, replica: Replica, core: RaftCore, receive: Receive,
                  now_ms: int) -> None:
        """Every other response: its epoch, when higher, is the node's after the step. An answer
        to a fetch that is no longer the one in flight is ignored (Kafka's RequestManager), so
        it proves nothing; that pairing is read from the core's state before the step, by
        identity (an equal fetch sent earlier, to a bootstrap server, is another request)."""
        response = receive.message
        assert isinstance(response, BeginQuorumEpochResponse | EndQuorumEpochResponse
                          | FetchResponse | FetchSnapshotResponse)
        before = core.epoch
        if response.leader_epoch <= before:
            core.step(receive, now_ms=now_ms)  # the common case: one look at what it did
            ready = core.ready()
            if (ready.entries or ready.truncate_to is not None) and type(response) is FetchResponse:
                _records_from_leader(replica[0], core, receive.src, response)
            if ready.messages:
                _fetches_in_own_epoch(replica[0], core)
            return
        acted_on = True
        if isinstance(response, FetchResponse | FetchSnapshotResponse):
            request = receive.in_reply_to
            acted_on = request is None or request is getattr(core.state, "fetch_in_flight", None)
        core.step(receive, now_ms=now_ms)
        if acted_on:
            _stepped_down(replica[0], core, response, response.leader_epoch, before)

    def _stale(self, node: int, core: RaftCore, receive: Receive, now_ms: int) -> None:
        """StaleEpochRefused: a request below the node's epoch."""
        request = receive.message
        epoch = getattr(request, "epoch", None)
        state = core.quorum_state()
        core.step(receive, now_ms=now_ms)
        answer = _answer(core, request)
        after = core.quorum_state()
        if answer is not None and answer.error != ErrorCode.none and after == state:
            return
        refused = answer is not None and answer.error != ErrorCode.none
        raise Violation(
            "StaleEpochRefused",
            f"node {node} in epoch {state.leader_epoch} {'refused' if refused else 'accepted'} "
            f"{type(request).__name__} of epoch {epoch} from {receive.src}; its quorum state "
            f"went from {state} to {after}",
        )

    # --- votes and rounds ----------------------------------------------------------------------

    def _voted(self, replica: Replica, epoch: int, candidate: int) -> None:
        """VoteOncePerEpoch: `replica` holds (or just cast) its vote in `epoch` for `candidate`."""
        votes = self.votes.setdefault(replica, {})
        first = votes.setdefault(epoch, candidate)
        if first != candidate:
            raise Violation(
                "VoteOncePerEpoch",
                f"node {replica[0]} voted for {first} in epoch {epoch}, then for {candidate}",
            )

    def _tally(self, node: int, core: RaftCore, role: str, before: int) -> None:
        """GrantsOfOwnEpoch, after a vote answer: the round still open counts only its own
        grants; a round won in this step had a majority of them."""
        name = core.state_name
        if name == "candidate" or name == "prospective":
            pre = name == "prospective"
            epoch = core.epoch
            allowed = self.grants.get((node, epoch, pre), set())
            granted: set[int] = getattr(core.state, "granted", set())
            strays = granted - allowed - {node}
            if strays:
                kind = "pre-vote" if pre else "vote"
                raise Violation(
                    "GrantsOfOwnEpoch",
                    f"{name} {node} in epoch {core.epoch} counts {sorted(strays)} among the grants "
                    f"of its {kind} for epoch {epoch}; only {sorted(allowed)} granted that",
                )
        ready = core.ready()
        for event in ready.events:
            if event["type"] != "state":
                continue
            if event["state"] == "leader":
                self._won(node, core, ready.entries, event["epoch"])
            elif event["state"] == "candidate" and role == "prospective" and \
                    event["epoch"] == before + 1:
                self._majority(node, core, "pre-vote", before,
                               self.grants.get((node, before, True), set()))

    def _won(self, node: int, core: RaftCore, entries: list[Entry], epoch: int) -> None:
        allowed = self.grants.get((node, epoch, False), set())
        for entry in entries:
            if entry.kind is EntryKind.LEADER_CHANGE and entry.epoch == epoch:
                named = set(LeaderChange.decode(entry.payload).granting_voters) - {node}
                if not named <= allowed:
                    raise Violation(
                        "GrantsOfOwnEpoch",
                        f"leader {node} of epoch {epoch} names {sorted(named - allowed)} as "
                        f"granting voters in its LeaderChange record; only {sorted(allowed)} "
                        "granted that epoch",
                    )
        self._majority(node, core, "vote", epoch, allowed)

    def _majority(self, node: int, core: RaftCore, kind: str, epoch: int,
                  allowed: set[int]) -> None:
        voters = core.voters.ids
        need = majority(len(voters))
        if len(voters & (allowed | {node})) < need:
            raise Violation(
                "GrantsOfOwnEpoch",
                f"node {node} won its {kind} for epoch {epoch} with grants of that epoch from "
                f"{sorted(allowed)} only (voters {sorted(voters)}, majority {need})",
            )


_Rule = Callable[[Behaviour, Replica, "RaftCore", Receive, int], None]

_RULES: dict[type, _Rule] = {
    FetchRequest: Behaviour._fetch_request,
    FetchSnapshotRequest: Behaviour._fetch_request,
    FetchResponse: Behaviour._response,
    FetchSnapshotResponse: Behaviour._response,
    BeginQuorumEpochRequest: Behaviour._from_leader,
    EndQuorumEpochRequest: Behaviour._from_leader,
    BeginQuorumEpochResponse: Behaviour._response,
    EndQuorumEpochResponse: Behaviour._response,
    VoteRequest: Behaviour._vote_request,
    VoteResponse: Behaviour._vote_response,
}
"""The rule for each Raft message; broker messages (no epoch) have none."""


def _round(node: int, grant: VoteResponse, request: Message | None, role: str,
           before: int) -> tuple[int, int, bool] | None:
    """The round a grant belongs to: the epoch its request asked for (a real vote is granted in
    that very epoch), or None for a grant that answers no vote request of the same kind. Without
    the request (a host that does not pair answers): a real grant's epoch is its own, a pre-vote
    grant reaching a prospective is for the epoch it asks in (its own)."""
    if request is None:
        if not grant.pre_vote:
            return (node, grant.leader_epoch, False)
        return (node, before, True) if role == "prospective" else None
    if not isinstance(request, VoteRequest) or request.pre_vote != grant.pre_vote:
        return None
    if not grant.pre_vote and grant.leader_epoch != request.candidate_epoch:
        return None
    return (node, request.candidate_epoch, grant.pre_vote)


def _answer(core: RaftCore, request: Message) -> Any:
    """The response the step sent to `request` (the core names the request it answers), or None
    (a fetch parked until there is something to send)."""
    for send in reversed(core.ready().messages):
        if send.in_reply_to is request:
            return send.message
    return None


def _records_from_leader(node: int, core: RaftCore, src: int, response: FetchResponse) -> None:
    """RecordsFromLeader: a Fetch answer that changed the log came from the leader the node
    follows, in its epoch."""
    if core.is_leader or (src == core.leader_id and response.leader_epoch == core.epoch):
        return
    raise Violation(
        "RecordsFromLeader",
        f"node {node} ({core.state_name} of {core.leader_id} in epoch {core.epoch}) changed its "
        f"log on a Fetch answer from {src} in epoch {response.leader_epoch}",
    )


def _fetches_in_own_epoch(node: int, core: RaftCore) -> None:
    """FetchInOwnEpoch: every fetch the step sent names the node's epoch, and goes to the leader
    it follows when it knows one."""
    for send in core.ready().messages:
        message = send.message
        kind = type(message)
        if kind is not FetchRequest and kind is not FetchSnapshotRequest:
            continue
        leader = core.leader_id
        epoch = message.current_leader_epoch  # type: ignore[union-attr]
        if epoch != core.epoch or (leader is not None and send.dst != leader):
            raise Violation(
                "FetchInOwnEpoch",
                f"node {node} ({core.state_name} of {leader} in epoch {core.epoch}) sent a "
                f"{kind.__name__} naming epoch {epoch} to {send.dst}",
            )


def _stepped_down(node: int, core: RaftCore, message: Message, epoch: int, before: int) -> None:
    """StepDownOnHigherEpoch: `node`, in epoch `before`, handled `message` naming `epoch`."""
    if core.epoch < epoch:
        role = core.state_name
        raise Violation(
            "StepDownOnHigherEpoch",
            f"node {node} handled {type(message).__name__} of epoch {epoch} in epoch {before} "
            f"and is still {role} in epoch {core.epoch}",
        )


def _sid(sid: SnapshotId) -> str:
    return f"{sid.end_offset}-{sid.epoch}"


def _order(sid: SnapshotId) -> tuple[int, int]:
    return (sid.end_offset, sid.epoch)
