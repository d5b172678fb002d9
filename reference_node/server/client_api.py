"""The Kafka client APIs of the node, for the one partition `__cluster_metadata-0`.

ApiVersions (what `wire.apis.SUPPORTED_APIS` says), Metadata (the topic, its leader; brokers are
the voters at their client addresses), Produce (acks=-1 only; answered once the high watermark
passes the batch), Fetch from consumers (records below the high watermark, always read through the
core: linearizable, unless `read.mode=leader` turned on its stale-leader-reads switch), ListOffsets
and DescribeQuorum, and KIP-853's AddRaftVoter and RemoveRaftVoter (UpdateRaftVoter is a Raft
request between voters: routing.py steps it into the core).

The log keeps each record's value and nothing else (docs/contracts.md). What it cannot keep is
refused, never dropped; otherwise the answers follow Kafka's. The `kv` workload rides on the same
APIs (a write or cas is a Produce of a kv command, a read a Fetch of the view `__kv_image`), and
so do the brokers of issue 17 (the view `__brokers`). Each handler describes its response once,
version-free, and `kiobuild.build` fits it to the version asked. Handlers raise nothing for
anything a client sends: a request that cannot be served gets its error code.

Details (what is refused, kv, KIP-630's log start, KIP-853's voter RPCs, brokers):
docs/internals/node.md#client_api
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from reference_node.config import Endpoint
from reference_node.raft.api import (
    AddVoter,
    AppendReply,
    QuorumDescription,
    ReadReply,
    RemoveVoter,
    ReplicaDescription,
    VoterChangeReply,
)
from reference_node.raft.lifecycle import BrokerStatus
from reference_node.raft.messages import Entry, ErrorCode
from reference_node.raft.records import BrokerInfo, decode_broker_record
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.server.kiobuild import build, has_field
from reference_node.server.translate import entries_to_records
from reference_node.wire import apis
from reference_node.wire.codec import Request
from reference_node.wire.errors import ProtocolError
from reference_node.wire.records import (
    CONTROL_ATTRIBUTE,
    ProducedRecord,
    build_batch,
    read_produced_batch,
)

TOPIC = apis.METADATA_TOPIC
IMAGE_TOPIC = "__kv_image"
"""The state machine's kv map, readable (only) with a consumer Fetch of partition 0."""
IMAGE_TOPIC_ID = uuid.UUID("5f6b765f-696d-6167-655f-5f6b765f696d")
"""`__kv_image`'s topic id (Metadata v10+, Fetch v13+): fixed, as the view always exists."""
BROKERS_TOPIC = "__brokers"
"""The registered brokers, readable (only) with a consumer Fetch of partition 0."""
BROKERS_TOPIC_ID = uuid.UUID("5f5f6272-6f6b-6572-735f-5f62726f6b65")
"""`__brokers`' topic id (Metadata v10+, Fetch v13+): fixed, as the view always exists."""
SELF_KEY = b'"self"'
"""The key of a broker's own record in `__brokers` (the JSON string "self")."""
TOPIC_IDS = {TOPIC: apis.METADATA_TOPIC_ID, IMAGE_TOPIC: IMAGE_TOPIC_ID,
             BROKERS_TOPIC: BROKERS_TOPIC_ID}
TOPIC_NAMES = {topic_id: name for name, topic_id in TOPIC_IDS.items()}
CAS_OUTCOMES = ("swapped", "not-swapped")
PARTITION = apis.METADATA_PARTITION
EARLIEST, LATEST = -2, -1
READ_TIMEOUT_S = 5.0
MAX_FETCH_WAIT_S = 30.0
"""A consumer Fetch is parked at most this long, whatever its MaxWaitMs (up to 24 days): Kafka's
clients give up on a request after request.timeout.ms, 30 s by default."""
MAX_VOTER_WAIT_MS = 60_000
"""An AddRaftVoter waits at most this long for its replica to catch up, whatever its TimeoutMs
(Kafka's admin client gives up on a call after default.api.timeout.ms, 60 s)."""
VOTER_CHANGE_GRACE_S = 15.0
"""How long past the catch-up wait a voter change may take to commit before it is answered
REQUEST_TIMED_OUT (the core still answers later; nobody is listening then)."""
_ATTRIBUTES = struct.Struct(">h")
_ATTRIBUTES_AT = 21  # base offset, length, leader epoch, magic, CRC come first
_COMPRESSION_MASK = 0x07
_ENTRY_OVERHEAD = 16  # bytes a one-record entry costs in a batch beyond its value, roughly


class NodeApi(Protocol):
    """What the client handlers need from the running node."""

    node_id: int
    cluster_id: str

    def leader_id(self) -> int | None: ...
    def epoch(self) -> int: ...
    def high_watermark(self) -> int: ...
    def log_start_offset(self) -> int: ...
    def log_end_offset(self) -> int: ...
    def voter_ids(self) -> list[int]: ...
    def client_address(self, node_id: int) -> Endpoint | None: ...
    def describe_quorum(self) -> QuorumDescription: ...
    def voter_set(self) -> VoterSet: ...
    def controller_listener(self) -> str: ...
    def change_voters(self, make: Callable[[int], AddVoter | RemoveVoter]
                      ) -> Awaitable[VoterChangeReply]: ...
    def append(self, payloads: tuple[bytes, ...]) -> Awaitable[AppendReply]: ...
    def read(self, from_offset: int) -> Awaitable[ReadReply]: ...
    def read_image(self) -> Awaitable[ReadReply]: ...
    def hw_changed(self) -> asyncio.Future[None]: ...
    def broker_status(self) -> BrokerStatus | None: ...
    def brokers_view(self) -> dict[int, BrokerInfo]: ...
    def is_controller(self) -> bool: ...


def _response(req: Request, data: dict[str, Any]) -> Any:
    return build(apis.response_class(req.api_key, req.api_version), data)


class ClientApi:
    def __init__(self, node: NodeApi) -> None:
        self.node = node
        self.handlers: dict[int, Callable[[Request], Awaitable[Any]]] = {
            apis.API_VERSIONS: self.api_versions,
            apis.METADATA: self.metadata,
            apis.PRODUCE: self.produce,
            apis.FETCH: self.fetch,
            apis.LIST_OFFSETS: self.list_offsets,
            apis.DESCRIBE_QUORUM: self.describe_quorum,
            apis.ADD_RAFT_VOTER: self.add_raft_voter,
            apis.REMOVE_RAFT_VOTER: self.remove_raft_voter,
        }

    # --- ApiVersions, Metadata ----------------------------------------------------------------

    async def api_versions(self, req: Request) -> Any:
        # A broker alone leaves the controllers' APIs out; with combined roles it answers them.
        # kraft.version (KIP-853) is the log's: a Kafka leader checks it before adding a voter.
        node = self.node
        table = apis.SUPPORTED_APIS
        if not node.is_controller():
            table = {k: v for k, v in table.items() if k not in apis.CONTROLLER_ONLY_APIS}
        return apis.api_versions_response(
            req.api_version, supported=table, kraft_version=node.describe_quorum().kraft_version,
            features_epoch=node.high_watermark() - 1)

    async def metadata(self, req: Request) -> Any:
        node = self.node
        status = self.node.broker_status()
        if status is not None:
            return self._broker_metadata(req, status)
        leader = node.leader_id()
        brokers = []
        for vid in node.voter_ids():
            ep = node.client_address(vid)
            if ep is not None:
                brokers.append({"node_id": vid, "host": ep.host, "port": ep.port, "rack": None})
        return self._metadata(req, brokers, -1 if leader is None else leader)

    def _broker_metadata(self, req: Request, status: BrokerStatus) -> Any:
        """Metadata on a broker: the unfenced brokers of its image; none, and every topic
        BROKER_NOT_AVAILABLE, while it is not serving."""
        node = self.node
        if not status.serving:
            topics: list[dict[str, Any]] = [
                      {"error_code": ErrorCode.broker_not_available, "name": name,
                       "topic_id": TOPIC_IDS.get(name) if name else None,
                       "is_internal": name in TOPIC_IDS, "partitions": []}
                      for name in self._asked_names(req, [TOPIC])]
            for topic in topics:
                if topic["name"] is None and req.api_version < 12:
                    topic["name"] = ""
            return _response(req, {"throttle_time": 0, "brokers": [],
                                   "cluster_id": node.cluster_id, "controller_id": -1,
                                   "topics": topics,
                                   "cluster_authorized_operations": -2147483648})
        brokers = [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": None}
                   for b in sorted(node.brokers_view().values(), key=lambda b: b.broker_id)
                   if not b.fenced]
        listed = [b.broker_id for b in sorted(node.brokers_view().values(),
                                              key=lambda b: b.broker_id) if not b.fenced]
        controller = node.node_id if node.node_id in listed else (listed[0] if listed else -1)
        return self._metadata(req, brokers, controller)

    def _asked_names(self, req: Request, default: list[str]) -> list[str | None]:
        if req.body.topics is None:
            return list(default)
        return [_metadata_topic_name(t, req.api_version) for t in req.body.topics]

    def _metadata(self, req: Request, brokers: list[dict[str, Any]], controller: int) -> Any:
        node = self.node
        leader = node.leader_id()
        voters = node.voter_ids()
        # Kafka's metadata cache reports a missing leader on the partition only: the topic exists.
        ours: dict[str, Any] = {
                "error_code": ErrorCode.none, "name": TOPIC, "topic_id": TOPIC_IDS[TOPIC],
                "is_internal": True,
                "partitions": [{"error_code": ErrorCode.none if leader is not None
                                else ErrorCode.leader_not_available,
                                "partition_index": PARTITION,
                                "leader_id": -1 if leader is None else leader,
                                "leader_epoch": node.epoch(), "replica_nodes": voters,
                                "isr_nodes": voters, "offline_replicas": []}],
                "topic_authorized_operations": -2147483648}
        topics: list[dict[str, Any]] = [ours]
        if req.body.topics is not None:
            # The views are listed only when asked for by name: they are not logs. A broker
            # serves `__brokers` itself, so it names itself its leader.
            view_leader = node.node_id if self.node.broker_status() is not None else None
            brokers_part = dict(ours["partitions"][0])
            if view_leader is not None:
                brokers_part.update(error_code=ErrorCode.none, leader_id=view_leader,
                                    replica_nodes=[view_leader], isr_nodes=[view_leader])
            described = {TOPIC: ours, IMAGE_TOPIC: {**ours, "name": IMAGE_TOPIC,
                                                    "topic_id": IMAGE_TOPIC_ID},
                         BROKERS_TOPIC: {**ours, "name": BROKERS_TOPIC,
                                         "topic_id": BROKERS_TOPIC_ID,
                                         "partitions": [brokers_part]}}
            names = [_metadata_topic_name(t, req.api_version) for t in req.body.topics]
            topics = [described[name] if name in described
                      else _not_a_topic(name, req.api_version) for name in names]
        return _response(req, {"throttle_time": 0, "brokers": brokers,
                               "cluster_id": node.cluster_id, "controller_id": controller,
                               "topics": topics, "cluster_authorized_operations": -2147483648})

    # --- Produce ------------------------------------------------------------------------------

    def produce(self, req: Request) -> asyncio.Future[Any]:
        """Appends now, in arrival order, and returns the answer to come: a future fed by the
        appends' callbacks, not a coroutine, so that a Produce costs no task."""
        body = req.body
        parts: list[tuple[str, Any]] = [
            (t.name, p) for t in body.topic_data for p in t.partition_data
        ]
        results: dict[tuple[str, int], asyncio.Future[dict[str, Any]] | dict[str, Any]] = {}
        keys = [(name, int(p.index)) for name, p in parts]
        if len(set(keys)) != len(keys):
            # One answer per partition: a partition named twice would append twice and be
            # answered once. Kafka's broker refuses such a request; append nothing.
            for key in keys:
                results[key] = _produce_error(ErrorCode.invalid_request,
                                              "a partition is named more than once")
            parts = []
        for name, p in parts:
            results[(name, int(p.index))] = self._produce_one(
                int(body.acks), name, p, max(body.timeout.total_seconds(), 0.1))

        def response(answers: dict[tuple[str, int], dict[str, Any]]) -> Any:
            if int(body.acks) == 0:
                return None
            answered: dict[str, list[dict[str, Any]]] = {}
            for (name, index), part in answers.items():
                answered.setdefault(name, []).append({"index": index, **part})
            return _response(req, {
                "responses": [{"name": n, "partition_responses": ps}
                              for n, ps in answered.items()],
                "throttle_time": 0})

        return _when_all(results, response)

    def _produce_one(self, acks: int, name: str, p: Any, timeout: float
                     ) -> asyncio.Future[dict[str, Any]] | dict[str, Any]:
        """Steps the core now (so that requests append in arrival order) and returns the wait."""
        if name != TOPIC or int(p.index) != PARTITION:
            return _produce_error(ErrorCode.unknown_topic_or_partition)
        if acks != -1:
            return _produce_error(ErrorCode.invalid_required_acks,
                                  "this node only accepts acks=-1 (all)")
        try:
            payloads = _payloads(p.records)
        except ProtocolError as exc:
            return _produce_error(ErrorCode.corrupt_message, str(exc))
        except _Compressed:
            return _produce_error(ErrorCode.unsupported_compression_type,
                                  "compressed batches are not supported")
        except _Unkept as exc:
            return _produce_error(ErrorCode.invalid_record, _UNKEPT_MESSAGE, exc.record_errors)
        if not payloads:
            return _produce_error(ErrorCode.invalid_record, "no records")
        forged = [i for i, payload in enumerate(payloads) if _is_broker_record(payload)]
        if forged:
            return _produce_error(
                ErrorCode.invalid_record, BROKER_RECORD_MESSAGE,
                [{"batch_index": i, "batch_index_error_message": "a broker record"}
                 for i in forged])
        return self._committed(asyncio.ensure_future(self.node.append(payloads)), timeout)

    def _committed(self, waiting: asyncio.Future[AppendReply], timeout: float
                   ) -> asyncio.Future[dict[str, Any]]:
        """The partition's answer once the append is known to commit, or REQUEST_TIMED_OUT
        after `timeout`. A future fed by callbacks, not a task per request: if the request is
        cancelled (its connection closed), the append goes on and nothing is left waiting."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[str, Any]] = loop.create_future()

        def on_timeout() -> None:
            if not answer.done():
                answer.set_result(_produce_error(ErrorCode.request_timed_out,
                                                 "not committed in time"))

        def on_reply(done: asyncio.Future[AppendReply]) -> None:
            timer.cancel()
            if done.cancelled():
                if not answer.done():
                    answer.cancel()
                return
            error = done.exception()  # retrieved even when nobody waits any more
            if answer.done():
                return
            try:
                if error is not None:
                    raise error
                answer.set_result(self._produce_reply(done.result()))
            except Exception as exc:  # the handler fails, as it would awaiting the append
                answer.set_exception(exc)

        timer = loop.call_later(timeout, on_timeout)
        waiting.add_done_callback(on_reply)
        return answer

    def _produce_reply(self, reply: AppendReply) -> dict[str, Any]:
        if reply.indeterminate:
            # Appended but not known to commit: Kafka's "may have been written" code, never
            # one a client may read as a certain failure.
            return _produce_error(ErrorCode.request_timed_out, "leadership lost before commit")
        if reply.error != ErrorCode.none:
            return _produce_error(reply.error, None)
        return {"error_code": ErrorCode.none, "base_offset": reply.offsets[0],
                "log_append_time": None, "log_start_offset": self.node.log_start_offset(),
                "record_errors": [], "error_message": _outcome_message(reply.outcomes)}

    # --- Fetch (consumers) --------------------------------------------------------------------

    async def fetch(self, req: Request) -> Any:
        """Up to v12 topics go by name, from v13 by id (Kafka's UNKNOWN_TOPIC_ID for an id
        that names no topic); the answer names each topic the way it was asked for."""
        body = req.body
        max_wait = min(body.max_wait.total_seconds(), MAX_FETCH_WAIT_S)
        wanted = [(_fetch_topic(t), p) for t in body.topics for p in t.partitions]
        out: dict[tuple[str | None, uuid.UUID | None], list[dict[str, Any]]] = {}
        ours = [(k, p) for k, p in wanted if k[0] == TOPIC and int(p.partition) == PARTITION]
        image = [(k, p) for k, p in wanted
                 if k[0] == IMAGE_TOPIC and int(p.partition) == PARTITION]
        brokers = [(k, p) for k, p in wanted
                   if k[0] == BROKERS_TOPIC and int(p.partition) == PARTITION]
        for key, p in wanted:
            if (key, p) not in ours and (key, p) not in image and (key, p) not in brokers:
                code = ErrorCode.unknown_topic_or_partition if key[0] is not None \
                    else ErrorCode.unknown_topic_id
                out.setdefault(key, []).append(_fetch_error(int(p.partition), code))
        if brokers:
            key, p = brokers[0]
            out.setdefault(key, []).insert(0, await self._fetch_brokers(p))
        if image:
            key, p = image[0]
            out.setdefault(key, []).insert(0, await self._fetch_image(p))
        if ours:
            key, p = ours[0]
            out.setdefault(key, []).insert(0, await self._fetch_ours(p, max_wait))
        return _response(req, {"throttle_time": 0, "error_code": ErrorCode.none,
                               "session_id": 0,
                               "responses": [{"topic": name or "", "topic_id": topic_id,
                                              "partitions": ps}
                                             for (name, topic_id), ps in out.items()]})

    async def _fetch_ours(self, p: Any, max_wait: float) -> dict[str, Any]:
        offset = int(p.fetch_offset)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait
        while True:
            changed = self.node.hw_changed()
            try:
                reply = await asyncio.wait_for(asyncio.shield(self.node.read(offset)),
                                               READ_TIMEOUT_S)
            except TimeoutError:
                return _fetch_error(PARTITION, ErrorCode.request_timed_out)
            start = self.node.log_start_offset()
            if reply.error == ErrorCode.offset_out_of_range or (
                    reply.error == ErrorCode.none and offset < start):
                # Below the log start (KIP-630: a snapshot holds it now): Kafka's answer names
                # where the log starts, so that the client goes on from there.
                return _fetch_error(PARTITION, ErrorCode.offset_out_of_range, reply.leader_id,
                                    reply.leader_epoch, reply.high_watermark, start)
            if reply.error != ErrorCode.none:
                return _fetch_error(PARTITION, reply.error, reply.leader_id, reply.leader_epoch)
            if offset > reply.high_watermark and offset > self.node.log_end_offset():
                return _fetch_error(PARTITION, ErrorCode.offset_out_of_range,
                                    reply.leader_id, reply.leader_epoch, reply.high_watermark,
                                    start)
            remaining = deadline - loop.time()
            if reply.records or remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(changed), remaining)
        records = _limit(reply.records, int(p.partition_max_bytes))
        return {"partition_index": PARTITION, "error_code": ErrorCode.none,
                "high_watermark": reply.high_watermark,
                "last_stable_offset": reply.high_watermark,
                "log_start_offset": self.node.log_start_offset(),
                "aborted_transactions": None, "preferred_read_replica": -1,
                "current_leader": {"leader_id": _or_minus(reply.leader_id),
                                   "leader_epoch": reply.leader_epoch},
                "records": entries_to_records(records) if records else b""}

    async def _fetch_image(self, p: Any) -> dict[str, Any]:
        """The kv map at the high watermark, after the same leadership confirmation as a log
        read; pairs from the fetch offset on (a reader asks from 0 and gets them all)."""
        try:
            reply = await asyncio.wait_for(asyncio.shield(self.node.read_image()),
                                           READ_TIMEOUT_S)
        except TimeoutError:
            return _fetch_error(PARTITION, ErrorCode.request_timed_out)
        if reply.error != ErrorCode.none:
            return _fetch_error(PARTITION, reply.error, reply.leader_id, reply.leader_epoch)
        pairs = list(reply.kv or ())
        offset = int(p.fetch_offset)
        if not 0 <= offset <= len(pairs):
            return _fetch_error(PARTITION, ErrorCode.offset_out_of_range, reply.leader_id,
                                reply.leader_epoch, reply.high_watermark, 0)
        records = b""
        if offset < len(pairs):
            rest = pairs[offset:]
            records = build_batch(offset, reply.leader_epoch,
                                  [_json(value) for _, value in rest],
                                  keys=[_json(key) for key, _ in rest])
        return {"partition_index": PARTITION, "error_code": ErrorCode.none,
                "high_watermark": reply.high_watermark,
                "last_stable_offset": reply.high_watermark, "log_start_offset": 0,
                "aborted_transactions": None, "preferred_read_replica": -1,
                "current_leader": {"leader_id": _or_minus(reply.leader_id),
                                   "leader_epoch": reply.leader_epoch},
                "records": records}

    async def _fetch_brokers(self, p: Any) -> dict[str, Any]:
        """`__brokers`: a broker's own image at once (BROKER_NOT_AVAILABLE while it does not
        serve), or the leader's image at the high watermark after a linearizable read."""
        node = self.node
        status = self.node.broker_status()
        rows: list[tuple[bytes, bytes]] = []
        if status is not None:
            if not status.serving:
                return _fetch_error(PARTITION, ErrorCode.broker_not_available, node.node_id,
                                    node.epoch(), status.metadata_offset, 0)
            view = node.brokers_view()
            hw, leader, epoch = status.metadata_offset, node.node_id, node.epoch()
            rows.append((SELF_KEY, _json(self_record(node.node_id, status))))
        else:
            try:
                reply = await asyncio.wait_for(asyncio.shield(node.read_image()),
                                               READ_TIMEOUT_S)
            except TimeoutError:
                return _fetch_error(PARTITION, ErrorCode.request_timed_out)
            if reply.error != ErrorCode.none:
                return _fetch_error(PARTITION, reply.error, reply.leader_id, reply.leader_epoch)
            view = {b.broker_id: b for b in reply.brokers or ()}
            hw, leader, epoch = reply.high_watermark, _or_minus(reply.leader_id), \
                reply.leader_epoch
        rows += [(_json(i), _json(view[i].to_json())) for i in sorted(view)]
        offset = int(p.fetch_offset)
        if not 0 <= offset <= len(rows):
            return _fetch_error(PARTITION, ErrorCode.offset_out_of_range, leader, epoch, hw, 0)
        rest = rows[offset:]
        records = build_batch(offset, max(epoch, 0), [v for _, v in rest],
                              keys=[k for k, _ in rest]) if rest else b""
        return {"partition_index": PARTITION, "error_code": ErrorCode.none,
                "high_watermark": hw, "last_stable_offset": hw, "log_start_offset": 0,
                "aborted_transactions": None, "preferred_read_replica": -1,
                "current_leader": {"leader_id": leader, "leader_epoch": epoch},
                "records": records}

    # --- ListOffsets, DescribeQuorum ----------------------------------------------------------

    async def list_offsets(self, req: Request) -> Any:
        node = self.node
        topics = []
        for t in req.body.topics:
            parts: list[dict[str, Any]] = []
            for p in t.partitions:
                index = int(p.partition_index)
                if t.name != TOPIC or index != PARTITION:
                    parts.append({"partition_index": index,
                                  "error_code": ErrorCode.unknown_topic_or_partition})
                elif node.leader_id() != node.node_id:
                    parts.append({"partition_index": index,
                                  "error_code": ErrorCode.not_leader_or_follower})
                else:
                    parts.append({"partition_index": index, **self._offset_at(int(p.timestamp))})
            topics.append({"name": t.name, "partitions": parts})
        return _response(req, {"throttle_time": 0, "topics": topics})

    def _offset_at(self, timestamp: int) -> dict[str, Any]:
        """The leader's answer for one timestamp, as Kafka's `Partition.fetchOffsetForTimestamp`
        gives it to a consumer."""
        node = self.node
        if timestamp == EARLIEST:
            # Kafka names the epoch of the log's first record, or none; the current epoch would
            # be wrong for every log that outlived its first leader.
            return _listed_offset(node.log_start_offset(), -1)
        if timestamp != LATEST:
            return {"error_code": ErrorCode.unsupported_for_message_format}
        if node.describe_quorum().high_watermark < 0:
            # A new leader's high watermark is unknown until its epoch commits: the old one would
            # name an end that is already behind.
            return {"error_code": ErrorCode.offset_not_available}
        return _listed_offset(node.high_watermark(), node.epoch())

    async def describe_quorum(self, req: Request) -> Any:
        node = self.node
        named = [(t.topic_name, int(p.partition_index)) for t in req.body.topics
                 for p in t.partitions]
        if named != [(TOPIC, PARTITION)]:
            return _response(req, {"error_code": ErrorCode.invalid_request,
                                   "error_message": f"only {TOPIC}-{PARTITION} exists",
                                   "topics": [], "nodes": []})
        d = node.describe_quorum()
        is_leader = d.leader_id == node.node_id
        part = {"partition_index": PARTITION,
                "error_code": ErrorCode.none if is_leader else ErrorCode.not_leader_or_follower,
                "error_message": None, "leader_id": d.leader_id, "leader_epoch": d.leader_epoch,
                "high_watermark": d.high_watermark, "current_voters": _rows(d.voters),
                "observers": _rows(d.observers)}
        return _response(req, {"error_code": ErrorCode.none, "error_message": None,
                               "topics": [{"topic_name": TOPIC, "partitions": [part]}],
                               "nodes": self._voter_nodes(d.voter_set)})

    def _voter_nodes(self, voters: VoterSet | None) -> list[dict[str, Any]]:
        """DescribeQuorum v2's Nodes: each voter's endpoints from the voter set; a static voter
        (no endpoints) at its client address on the controller listener."""
        node = self.node
        nodes = []
        for voter in voters if voters is not None else node.voter_set():
            listeners = [{"name": e.name, "host": e.host, "port": e.port}
                         for e in voter.endpoints]
            if not listeners:
                ep = node.client_address(voter.id)
                if ep is None:
                    continue
                listeners = [{"name": node.controller_listener(), "host": ep.host,
                              "port": ep.port}]
            nodes.append({"node_id": voter.id, "listeners": listeners})
        return nodes

    # --- KIP-853: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter -------------------------------

    async def add_raft_voter(self, req: Request) -> Any:
        body = req.body
        voter = self._checked_voter(body.cluster_id, None, "Add voter", body.voter_id,
                                    body.voter_directory_id, body.listeners)
        if isinstance(voter, dict):
            return _response(req, {"throttle_time": 0, **voter})
        timeout_ms = min(max(int(body.timeout.total_seconds() * 1000), 0), MAX_VOTER_WAIT_MS)
        reply = await self._change(
            lambda rid: AddVoter(rid, voter, timeout_ms), timeout_ms / 1000.0)
        return _response(req, {"throttle_time": 0, **reply})

    async def remove_raft_voter(self, req: Request) -> Any:
        body = req.body
        voter = self._checked_voter(body.cluster_id, None, "Remove voter", body.voter_id,
                                    body.voter_directory_id, None, needs_endpoint=False)
        if isinstance(voter, dict):
            return _response(req, {"throttle_time": 0, **voter})
        reply = await self._change(
            lambda rid: RemoveVoter(rid, voter.id, voter.directory_id), 0.0)
        return _response(req, {"throttle_time": 0, **reply})

    def _checked_voter(self, cluster_id: str | None, epoch: int | None, what: str,
                       voter_id: int, directory_id: uuid.UUID | None, listeners: Any,
                       needs_endpoint: bool = True) -> Voter | dict[str, Any]:
        """The replica a voter RPC names, or its refusal (ErrorCode and ErrorMessage) by Kafka's
        checks before a voter change reaches its handler, in KafkaRaftClient's order."""
        node = self.node
        if cluster_id is not None and cluster_id != node.cluster_id:
            return _voter_error(ErrorCode.inconsistent_cluster_id,
                                f'The given id "{cluster_id}" doesn\'t match the cluster id '
                                f'"{node.cluster_id}"')
        if epoch is not None and epoch != node.epoch():
            code = ErrorCode.fenced_leader_epoch if epoch < node.epoch() \
                else ErrorCode.unknown_leader_epoch
            return _voter_error(code, f"{what} request names epoch {epoch}, the current one is "
                                      f"{node.epoch()}")
        if node.leader_id() != node.node_id:
            leader = node.leader_id()
            return _voter_error(ErrorCode.not_leader_or_follower,
                                f"{what}: node {node.node_id} is not the leader (the leader is "
                                f"{'unknown' if leader is None else leader})")
        voter = _voter(voter_id, directory_id, listeners or ())
        if voter is None:
            return _voter_error(ErrorCode.invalid_request,
                                f"{what} request didn't include a valid voter (a non-negative "
                                "id and a directory id)")
        listener = node.controller_listener()
        if needs_endpoint and not any(e.name == listener for e in voter.endpoints):
            return _voter_error(ErrorCode.invalid_request,
                                f"{what} request didn't include the endpoint for the default "
                                f"listener {listener}")
        return voter

    async def _change(self, make: Callable[[int], AddVoter | RemoveVoter],
                      wait_s: float) -> dict[str, Any]:
        """Steps the change into the core and waits for its reply (see VOTER_CHANGE_GRACE_S)."""
        waiting = self.node.change_voters(make)
        try:
            reply = await asyncio.wait_for(asyncio.shield(waiting),
                                           wait_s + VOTER_CHANGE_GRACE_S)
        except TimeoutError:
            return _voter_error(ErrorCode.request_timed_out,
                                "the voter change did not commit in time; it may still")
        return {"error_code": reply.error, "error_message": reply.message}


_K = TypeVar("_K")


def _when_all(parts: dict[_K, asyncio.Future[dict[str, Any]] | dict[str, Any]],
              answer: Callable[[dict[_K, dict[str, Any]]], Any]) -> asyncio.Future[Any]:
    """`answer` of every part's result once the last is in, as a future fed by callbacks (no
    task). The first failure of a part fails it; cancelled (its connection closed), it
    cancels the parts' waits, and their appends go on unwatched."""
    out: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    waits = [w for w in parts.values() if isinstance(w, asyncio.Future)]
    left = len(waits)

    def finish() -> None:
        try:
            out.set_result(answer({k: v.result() if isinstance(v, asyncio.Future) else v
                                   for k, v in parts.items()}))
        except Exception as exc:
            out.set_exception(exc)

    def on_part(done: asyncio.Future[dict[str, Any]]) -> None:
        nonlocal left
        error = None if done.cancelled() else done.exception()  # retrieved in any case
        if out.done():
            return
        if done.cancelled():
            out.cancel()
        elif error is not None:
            out.set_exception(error)
        else:
            left -= 1
            if not left:
                finish()

    def on_out(_: asyncio.Future[Any]) -> None:
        if out.cancelled():
            for w in waits:
                w.cancel()

    if not waits:
        finish()
    for w in waits:
        w.add_done_callback(on_part)
    out.add_done_callback(on_out)
    return out


def _rows(replicas: tuple[ReplicaDescription, ...]) -> list[dict[str, Any]]:
    """DescribeQuorum's ReplicaState rows (v2 adds ReplicaDirectoryId; None is Kafka's zero)."""
    return [{"replica_id": r.replica_id, "replica_directory_id": r.directory_id,
             "log_end_offset": r.log_end_offset,
             "last_fetch_timestamp": r.last_fetch_timestamp,
             "last_caught_up_timestamp": r.last_caught_up_timestamp} for r in replicas]


def self_record(node_id: int, status: BrokerStatus) -> dict[str, Any]:
    """A broker's own report, the value of the `"self"` record of `__brokers`."""
    return {"node": node_id, "role": "broker", "state": status.state,
            "incarnation": str(status.incarnation), "epoch": status.broker_epoch,
            "self_fenced": status.self_fenced, "contact_age_ms": status.contact_age_ms,
            "offset": status.metadata_offset}


BROKER_RECORD_MESSAGE = "broker records are written by the active controller only"


def _is_broker_record(payload: bytes) -> bool:
    try:
        return decode_broker_record(payload) is not None
    except Exception:  # whatever the codec makes of garbage, it is no broker record
        return False


def _voter(voter_id: int, directory_id: uuid.UUID | None, listeners: Any) -> Voter | None:
    """The replica a voter RPC names, or None when it names none Kafka accepts (a negative id,
    or no directory id: Kafka's ZERO_UUID). Endpoints are kept once per listener name, first
    wins (Kafka keys them by name)."""
    if int(voter_id) < 0 or directory_id is None or directory_id.int == 0:
        return None
    endpoints: dict[str, VoterEndpoint] = {}
    for listener in listeners or ():
        endpoints.setdefault(listener.name, VoterEndpoint(listener.name, listener.host,
                                                          int(listener.port)))
    return Voter(int(voter_id), directory_id, tuple(endpoints.values()))


def _voter_error(code: ErrorCode, message: str) -> dict[str, Any]:
    return {"error_code": code, "error_message": message}


class _Compressed(Exception):
    pass


class _Unkept(Exception):
    """Records the log cannot keep whole: Produce's RecordErrors (index within the request's
    records, why)."""

    def __init__(self, record_errors: list[dict[str, Any]]) -> None:
        super().__init__(record_errors)
        self.record_errors = record_errors


_UNKEPT_MESSAGE = "this log keeps record values only: no keys, headers or null values"


def _metadata_topic_name(topic: Any, version: int) -> str | None:
    """The name a Metadata request asks for; a null name asks by topic id (v12+; below, Kafka
    refuses it, `_not_a_topic`): ours, or None for an id no topic has."""
    if topic.name is not None or version < 12:
        return str(topic.name) if topic.name is not None else None
    return TOPIC_NAMES.get(topic.topic_id) if topic.topic_id is not None else None


def _fetch_topic(topic: Any) -> tuple[str | None, uuid.UUID | None]:
    """A consumer Fetch's topic as (name, id): by name up to v12, by id from v13 (the name
    None when no topic has that id)."""
    if has_field(topic, "topic"):
        return topic.topic, TOPIC_IDS.get(topic.topic)
    return TOPIC_NAMES.get(topic.topic_id), topic.topic_id


def _payloads(records: bytes | None) -> tuple[bytes, ...]:
    """The values of the request's records, in order; refuses what cannot be appended as is."""
    out: list[bytes] = []
    unkept: list[dict[str, Any]] = []
    for attributes, batch in _batches(records):
        if attributes & CONTROL_ATTRIBUTE:
            raise ProtocolError("clients may not produce control batches")
        for key, value, headers in batch:
            why = _unkept_part(key, value, headers)
            if why is not None:
                unkept.append({"batch_index": len(out), "batch_index_error_message": why})
            out.append(value or b"")
    if unkept:
        raise _Unkept(unkept)
    return tuple(out)


def _batches(records: bytes | None) -> list[tuple[int, list[ProducedRecord]]]:
    """(attributes, records) of the whole uncompressed v2 batches filling `records` exactly."""
    if not records:
        return []
    data = bytes(records)
    batches = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < _ATTRIBUTES_AT + _ATTRIBUTES.size:
            raise ProtocolError("records are not whole v2 record batches")
        (length,) = struct.unpack_from(">i", data, pos + 8)
        (attributes,) = _ATTRIBUTES.unpack_from(data, pos + _ATTRIBUTES_AT)
        if attributes & _COMPRESSION_MASK:
            raise _Compressed
        end = pos + 12 + length
        if length < 0 or end > len(data):
            raise ProtocolError("records are not whole v2 record batches")
        try:
            attributes, batch, pos = read_produced_batch(data, pos, end)
        except Exception as exc:
            raise ProtocolError(f"bad record batch at byte {pos}: {exc}") from exc
        batches.append((attributes, batch))
    return batches


def _unkept_part(key: bytes | None, value: bytes | None, headers: int) -> str | None:
    if key is not None:
        return "record key"
    if headers:
        return "record headers"
    if value is None:
        return "null value"
    return None


def _limit(records: tuple[Entry, ...], max_bytes: int) -> tuple[Entry, ...]:
    total = 0
    for i, entry in enumerate(records):
        total += len(entry.payload) + _ENTRY_OVERHEAD
        if total > max_bytes and i > 0:
            return records[:i]
    return records


def _not_a_topic(name: str | None, version: int) -> dict[str, Any]:
    """Metadata's answer for a topic that is not ours. A null name asks by topic id (v10+):
    Kafka refuses that below v12 (INVALID_REQUEST) and knows no such id from v12 on; the answer
    names it "" where the response cannot carry a null name."""
    if name is None:
        code = ErrorCode.unknown_topic_id if version >= 12 else ErrorCode.invalid_request
        return {"error_code": code, "name": None if version >= 12 else "", "topic_id": None,
                "is_internal": False, "partitions": []}
    return {"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "topic_id": None,
            "is_internal": False, "partitions": []}


def _or_minus(value: int | None) -> int:
    return -1 if value is None else value


def _produce_error(code: ErrorCode, message: str | None = None,
                   record_errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"error_code": code, "base_offset": -1, "log_append_time": None,
            "log_start_offset": -1, "record_errors": record_errors or [],
            "error_message": message}


def _listed_offset(offset: int, epoch: int) -> dict[str, Any]:
    return {"error_code": ErrorCode.none, "timestamp": -1, "offset": offset,
            "old_style_offsets": [offset], "leader_epoch": epoch}


def _outcome_message(outcomes: tuple[str | None, ...]) -> str | None:
    """Produce's error_message on success: what applying the records did, when one of them is
    a cas ("swapped" / "not-swapped"; several records: one word each, comma-separated, "-" for
    a record that is no cas); null when none is."""
    if not any(o in CAS_OUTCOMES for o in outcomes):
        return None
    return ",".join(o if o in CAS_OUTCOMES else "-" for o in outcomes)


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _fetch_error(index: int, code: ErrorCode, leader: int | None = None, epoch: int = -1,
                 hw: int = -1, log_start: int = -1) -> dict[str, Any]:
    return {"partition_index": index, "error_code": code, "high_watermark": hw,
            "last_stable_offset": hw, "log_start_offset": log_start,
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "current_leader": {"leader_id": _or_minus(leader), "leader_epoch": epoch},
            "records": b""}
