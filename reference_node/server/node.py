"""`NodeHost`: the asyncio host around one `RaftCore`, and `run_node` for the CLI.

Every input reaches the core through `step` on the event loop thread, with the host's clock; the
pump drains the core's output. No clock ticks on a period: after each Ready the host arms one
timer for the core's next deadline (`RaftCore.next_deadline_ms`), so an idle node sleeps and a timer
fires when it is due, not up to a tick late. The pump takes a `Ready`, calls `advance` at once (so
no input is ever stepped between `ready()` and `advance()`), then carries it out in the order
`Ready` prescribes: the quorum state is written and fsynced (awaited: nothing of this Ready is sent
before it is durable), the reset, truncation and appends are queued to the disk thread with the
flush as one job, and only then messages go out, clients are answered and events written. Readies
are carried out one after the other, so the messages of a later Ready never overtake the durable
state of an earlier one.

The pump is a plain callback, not a task. A `step` schedules it for when the loop's current
callbacks have run, so that inputs stepped together (a read's worth of requests) make one Ready;
an input that comes alone on the commit path, a flush's end or the answer to our own request (a
follower's Fetch), is carried out at once (`_step_now`), a loop iteration sooner. Only a Ready with
a quorum state waits, in a task, for its fsync, and the pump stands still meanwhile.

Flushes run on the disk thread, in queue order behind the appends they cover; the loop keeps
serving meanwhile, and hears of a Ready's disk job only when its flush ends or it failed, not once
per job. Log writes queued while a flush runs are applied after it and covered by one more flush
(group commit, storage_adapter.Disk). A flush's end offset is stepped into the core as
`LogFlushed`, which is what lets the leader count its own log toward the high watermark and answer
producers, and a follower fetch again.

The core answers a peer's request with a `Send` of the response to that peer; the host matches it
to the oldest pending request of that kind from that peer and answers it on its connection.

KIP-630 snapshots. The core is built from the latest valid snapshot on disk (its image, the valid
snapshot ids, the log start and its epoch: `Disk.open_snapshots`) and reads snapshot files for
FetchSnapshot through `Disk.snapshot_reader` on the loop. What a Ready asks of snapshots goes to
the disk thread in the order `Ready` prescribes, behind the appends and truncations before it:
`log_reset` (an installed snapshot: the log restarts empty at it) before the truncation and the
appends, then `snapshot_write` (encode and write durably, then `SnapshotWritten` is stepped),
`snapshot_received` (decode, check and write durably, then `SnapshotLoaded` or `SnapshotRefused`),
and `delete_before` (retention) last. Under the `delete-before-snapshot` switch the snapshot write
waits `DELETE_BEFORE_SNAPSHOT_DELAY_S` off the disk thread while the deletion goes ahead, so that a
crash in between leaves a log start no snapshot covers (the defect the switch stands for).

KIP-853 voters. The core is built with the static voter set of `controller.quorum.voters` (none
when the key is unset: the set then comes from the bootstrap checkpoint `kraft node format
--standalone / --initial-controllers` wrote, a snapshot, or the log), this replica's directory id,
and one pseudo id per `controller.quorum.bootstrap.servers` address (-2, -3, ..., as Kafka numbers
them), which `Peers` maps to that address. Who is a voter is the core's to say (`core.voters`,
`core.is_voter`), never the configuration's. Peers learn where each voter is from every voter set
the core puts in effect (`Ready.voters`, the endpoint of the controller listener), before that
Ready's messages go out, so that BeginQuorumEpoch reaches a voter just added. An observer that
knows no voter set finds the leader through the bootstrap servers: a Fetch that a bootstrap
server answers without error was answered by the leader of that epoch (only a leader serves a
Fetch), so the leader it names is at that address. A bootstrap server that is not the leader
names the leader's id only (our Fetch responses' NodeEndpoints carry the responder's own client
address, not Kafka's leader endpoint), so the observer tries the bootstrap servers again after its
fetch timeout, until it meets the leader or learns the voter set from the log. Fetch v17 carries
this replica's directory id to the leader (KIP-853's ReplicaDirectoryId). AddRaftVoter,
RemoveRaftVoter and UpdateRaftVoter are stepped into the core as `AddVoter` / `RemoveVoter` /
`UpdateVoter` and answered with its `VoterChangeReply` (client_api.py).

Brokers (issue 17). A node with `broker` among its `process.roles` builds its core with a
`BrokerIdentity`: an incarnation id made at process start (`raft.brokers.new_incarnation`, a
UUIDv7: a later start compares greater) and the client endpoint it advertises
(`NodeConfig.advertised`). It follows the log as an observer, and its core sends
BrokerRegistration and BrokerHeartbeat to the leader it follows; `Peers` carries them to that
controller's endpoint (where it fetches), and the answer is stepped back paired with its request
(`Receive.in_reply_to`), as a Fetch's is. On a controller, an incoming BrokerRegistration or
BrokerHeartbeat (api 62/63) is checked (cluster id, a listener and an incarnation id: else
refused at once), stepped into the core as `Receive(broker id, ...)`, and answered with the
core's response, matched by identity like a Raft request's; a core that does not answer within
the request timeout gets REQUEST_TIMED_OUT sent back, never silence. `broker_status` and
`brokers_view` give the client API what a broker serves (`__brokers`, Metadata).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import itertools
import logging
import random
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

from reference_node.config import Endpoint, NodeConfig
from reference_node.raft import messages as m
from reference_node.raft.api import (
    AddVoter,
    AppendReply,
    ClientAppend,
    ClientRead,
    ClientReply,
    Input,
    LogFlushed,
    QuorumDescription,
    ReadReply,
    Ready,
    Receive,
    RemoveVoter,
    ReplicaDescription,
    Send,
    Shutdown,
    SnapshotLoaded,
    SnapshotRefused,
    SnapshotWrite,
    SnapshotWritten,
    Tick,
    UpdateVoter,
    VoterChangeReply,
)
from reference_node.raft.config import RaftConfig, Unsafe
from reference_node.raft.lifecycle import BrokerIdentity, BrokerStatus, new_incarnation
from reference_node.raft.records import BrokerInfo
from reference_node.raft.states import NEVER
from reference_node.raft.voters import Voter, VoterSet
from reference_node.server import translate
from reference_node.server.client_api import ClientApi
from reference_node.server.event_loop import choose as choose_event_loop
from reference_node.server.events import EventsWriter
from reference_node.server.linger import AppendLinger
from reference_node.server.listener import ConnectionLimits, Listener
from reference_node.server.metrics import Metrics, serve_metrics
from reference_node.server.peers import Peers
from reference_node.server.storage_adapter import Disk
from reference_node.storage.errors import StorageError
from reference_node.storage.snapshot import SnapshotError
from reference_node.wire import apis
from reference_node.wire.codec import Request
from reference_node.wire.errors import ProtocolError, WireError

log = logging.getLogger(__name__)

TICK_S = 0.01
"""How often a graceful stop looks whether the core may go."""
# a log flush slower than this is logged: a stalled or failing disk (Kafka's LogFlushStats)
SLOW_FLUSH_S = 1.0
_DRAIN_S = 1.0
"""At most this long past the shutdown timeout for the last Readies to be carried out."""
DELETE_BEFORE_SNAPSHOT_DELAY_S = 2.0
"""Under `delete-before-snapshot`: how long the snapshot write waits after the log below it is
deleted (long enough for a nemesis's kill to land in between)."""
_RAFT_APIS = (apis.VOTE, apis.BEGIN_QUORUM_EPOCH, apis.END_QUORUM_EPOCH, apis.FETCH_SNAPSHOT)
_BROKER_APIS = (apis.BROKER_REGISTRATION, apis.BROKER_HEARTBEAT)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


_TIMED_OUT: Any = object()
"""What a request's future holds when the core did not answer it in time."""


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_result(_TIMED_OUT)


def bootstrap_ids(count: int) -> tuple[int, ...]:
    """The pseudo ids of `count` bootstrap servers: -2, -3, ... (Kafka's numbering; -1 is "no
    node")."""
    return tuple(-2 - i for i in range(count))


def raft_config(cfg: NodeConfig) -> RaftConfig:
    return RaftConfig(
        election_timeout_ms=cfg.election_timeout_ms,
        fetch_timeout_ms=cfg.fetch_timeout_ms,
        election_backoff_max_ms=cfg.election_backoff_max_ms,
        request_timeout_ms=cfg.request_timeout_ms,
        retry_backoff_ms=cfg.retry_backoff_ms,
        append_linger_ms=cfg.append_linger_ms,
        snapshot_max_record_bytes=cfg.snapshot_max_record_bytes,
        snapshot_interval_ms=cfg.snapshot_interval_ms,
        retention_bytes=cfg.retention_bytes,
        retention_ms=cfg.retention_ms,
        snapshot_chunk_bytes=cfg.snapshot_chunk_bytes,
        broker_session_timeout_ms=cfg.broker_session_timeout_ms,
        broker_heartbeat_interval_ms=cfg.broker_heartbeat_interval_ms,
        broker_heartbeat_timeout_ms=cfg.broker_heartbeat_timeout_ms,
        unsafe=cfg.unsafe,
    )


def broker_identity(cfg: NodeConfig, now_unix_ms: int, rng: random.Random) -> BrokerIdentity | None:
    """This process's identity as a broker (None unless `broker` is among its roles): a new
    incarnation at every start, and the client endpoint it advertises."""
    if not cfg.is_broker:
        return None
    ep = cfg.advertised
    return BrokerIdentity(new_incarnation(now_unix_ms, rng), ep.host, ep.port)


class FatalError(Exception):
    """The node cannot go on (its disk failed): it stops rather than serve a wrong log."""


class NodeHost:
    _pump_busy = False
    """A Ready waits for its quorum state to be durable: nothing after it is carried out yet
    (stop waits for it to finish)."""
    _pump_due = False
    """A pass of the pump is scheduled on the loop."""
    _pumping = False
    """Between `start` and `stop`: steps are carried out."""

    def __init__(self, cfg: NodeConfig) -> None:
        from reference_node.raft.core import RaftCore

        self.cfg = cfg
        self.node_id = cfg.node_id
        self._loop = asyncio.get_running_loop()
        self.disk = Disk(cfg)
        self.cluster_id = self.disk.cluster_id
        for line in self.disk.recovery.describe() if self.disk.recovery else ():
            log.warning("log recovery: %s", line)
        self.events = EventsWriter(cfg.events_dir or cfg.metadata_log_dir, cfg.node_id)
        start = self.disk.open_snapshots()  # its notes are in the recovery report, logged above
        self._log_invalid = start.log_invalid
        state, entries = self.disk.initial_state()
        bootstrap = bootstrap_ids(len(cfg.bootstrap_servers))
        self.core = RaftCore(
            cfg.node_id, sorted(cfg.voters) or None, self.cluster_id, raft_config(cfg),
            random.Random(), _now_ms(), quorum_state=state, log=entries,
            log_start_offset=self.disk.log_start_offset, log_start_epoch=start.log_start_epoch,
            image=start.image, snapshots=start.snapshot_ids,
            snapshot_store=self.disk.snapshot_reader,
            directory_id=self.disk.directory_id, bootstrap=bootstrap,
            broker=broker_identity(cfg, int(time.time() * 1000), random.Random()),
        )
        if start.image is not None:
            log.info("loaded snapshot %d-%d (%d keys, %d records); log [%d, %d)",
                     start.image.end_offset, start.image.epoch, len(start.image.kv),
                     start.image.records, self.disk.log_start_offset, self.core.log_end_offset)
        self.metrics = Metrics(cfg.node_id, self._gauges)
        routes = {i: e for i, e in {**cfg.voters, **cfg.routes}.items() if i != cfg.node_id}
        routes.update(zip(bootstrap, cfg.bootstrap_servers, strict=True))
        self.peers = Peers(cfg.node_id, routes, cfg.request_timeout_ms, cfg.retry_backoff_ms,
                           ssl=cfg.peer_ssl())
        self._learn_voters(self.core.voters)
        self.client_api = ClientApi(self)
        self.linger = AppendLinger(cfg.append_linger_ms, self._step_appends)
        self.listener = Listener(self.dispatch, ConnectionLimits(
            cfg.socket_request_max_bytes, cfg.queued_max_request_bytes,
            cfg.connections_max_idle_ms))
        self.learned: dict[int, Endpoint] = {}
        self._ids = itertools.count(1)
        self._clients: dict[int, tuple[asyncio.Future[Any], float]] = {}
        self._inbound: dict[int, tuple[m.Message, asyncio.Future[Any]]] = {}
        """Raft requests handed to the core and not answered yet, by identity: the core names
        the request each response answers (`Send.in_reply_to`), in whatever order it answers."""
        self._hw_waiters: asyncio.Future[None] | None = None
        self._flushes_asked = 0
        """Flushes asked of the disk thread (`Ready.flush`) and not yet answered."""
        self._flush_started = 0.0
        self.disk.report_to(self._flushed, self._disk_failed)
        self._election_started: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = NEVER
        self._tasks: set[asyncio.Future[Any]] = set()
        self._delayed_writes: set[asyncio.TimerHandle] = set()
        self.fatal: asyncio.Future[BaseException] = self._loop.create_future()
        self.port = 0

    # --- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.events.start()
        if self._log_invalid is not None:
            self.events.emit("log-invalid", reason=self._log_invalid)
        # The metrics port first: the client port is what the harness and the peers take for
        # "started", so it accepts only once nothing else can fail the start (with the metrics
        # port taken after it, a node that then exited passed for started, and its run was VALID).
        self._metrics_server = None
        if self.cfg.metrics_port:
            self._metrics_server = await serve_metrics(self.metrics, self.cfg.listen.host,
                                                       self.cfg.metrics_port)
        try:
            self.port = await self.listener.start(self.cfg.listen.host, self.cfg.listen.port,
                                                  ssl=self.cfg.listener_ssl())
        except BaseException:
            if self._metrics_server is not None:
                self._metrics_server.close()
            raise
        log.info("node %d listening on %s:%d (cluster %s, directory %s, %s of voters %s, "
                 "kraft.version %d, roles %s)", self.node_id, self.cfg.listen.host, self.port,
                 self.cluster_id, self.core.directory_id,
                 "one" if self.core.is_voter else "observer", self.core.voters,
                 self.core.kraft_version, ",".join(self.cfg.process_roles))
        status = self.core.broker_status()
        if status is not None:
            log.info("broker %d: incarnation %s, advertising %s", self.node_id,
                     status.incarnation, self.cfg.advertised)
        self._pumping = True
        self._kick()

    async def stop(self, graceful: bool = True) -> None:
        """Close everything; data stays durable. Graceful: step `Shutdown` first and keep serving
        (ticks, peers' answers and requests) until the core may go (`RaftCore.shutdown_complete`:
        it knows the next leader, having resent EndQuorumEpoch and voted for it) or
        `shutdown.timeout.ms` has passed; then let the last output out."""
        # Appends still lingering reach the core now: refused (certainly not appended) rather
        # than left unanswered.
        self.linger.drain()
        if graceful:
            self.step(Shutdown())
            deadline = time.monotonic() + self.cfg.shutdown_timeout_ms / 1000.0
            while not self.core.shutdown_complete and time.monotonic() < deadline:
                await asyncio.sleep(TICK_S)
            if not self.core.shutdown_complete:
                log.warning("graceful shutdown timed out after %d ms (state %s)",
                            self.cfg.shutdown_timeout_ms, self.core.state_name)
            await self._let_output_out(deadline + _DRAIN_S)
        self.linger.close()
        if self._timer is not None:
            self._timer.cancel()
        for handle in self._delayed_writes:
            handle.cancel()
        await self.listener.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        self._pumping = False
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self.peers.close()
        with contextlib.suppress(Exception):
            await self.disk.flush()
        self.events.stop()
        self.events.close()
        self.disk.close()

    async def _let_output_out(self, deadline: float) -> None:
        """Until the pump has carried out every Ready (the last EndQuorumEpoch, a vote granted on
        the way out, each behind its fsync), then one more tick for the loop to write what they
        sent: requests on their spawned tasks, responses on the listener's connections."""
        while (self._pump_busy or self._pump_due or self.core.has_ready()) \
                and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        await asyncio.sleep(TICK_S)

    def _spawn(self, coro: Any) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("internal task failed: %r", exc, exc_info=exc)
            self._die(exc)

    def _die(self, exc: BaseException) -> None:
        if not self.fatal.done():
            self.fatal.set_result(exc)

    # --- driving the core ---------------------------------------------------------------------

    def step(self, inp: Input) -> None:
        # The core's clock moves with every input, not only with ticks: ticks come only when a
        # timer is due, and a deadline set from a stale clock would fire early.
        self.core.step(inp, _now_ms())
        self._kick()

    def _step_now(self, inp: Input) -> None:
        """Step and carry out the Ready at once, not on the next loop iteration: for an input
        that comes alone (a flush's end, the answer to our own request), with nothing to batch
        with, and on the path of a commit (a follower appends a Fetch's records, fetches again
        once they are flushed)."""
        self.core.step(inp, _now_ms())
        self._pump()

    def _kick(self) -> None:
        """Run the pump once the callbacks of this loop iteration have run, so that the inputs
        stepped together (a read's worth of requests) come out as one Ready."""
        if not self._pump_due:
            self._pump_due = True
            self._loop.call_soon(self._pump)

    def _arm_timer(self) -> None:
        """Tick when the core's next deadline is due (`RaftCore.next_deadline_ms`), not on a fixed
        period: an idle node sleeps. Called after every Ready, since any input may move it."""
        due = self.core.next_deadline_ms()
        if self._timer is not None:
            if self._timer_due <= due:
                return  # an earlier tick is armed; it re-arms for this one
            self._timer.cancel()
            self._timer = None
        if due >= NEVER:
            return
        self._timer_due = due
        delay = max(due - _now_ms(), 0) / 1000.0
        self._timer = self._loop.call_later(delay, self._timer_fired)

    def _timer_fired(self) -> None:
        self._timer = None
        self.step(Tick(_now_ms()))

    def _pump(self) -> None:
        """Carry out every Ready, in order, on the loop: a plain callback, not a task, as no
        Ready waits for anything but one with a quorum state, whose fsync `_carry_out_durably`
        awaits while the pump stands still."""
        self._pump_due = False
        if self._pump_busy or not self._pumping:
            return
        try:
            while self.core.has_ready():
                ready = self.core.ready()
                self.core.advance(ready)
                if ready.quorum_state is not None:
                    self._pump_busy = True
                    self._spawn(self._carry_out_durably(ready))
                    return
                self._carry_out(ready)
            self._arm_timer()
        except Exception as exc:  # the node cannot go on: nothing after this Ready goes out
            self._pumping = False
            log.error("carrying out the core's output failed: %r", exc, exc_info=exc)
            self._die(exc)

    async def _carry_out_durably(self, ready: Ready) -> None:
        """A Ready with a quorum state: nothing of it happens before that state is durable. If
        the write fails the pump stays stopped (the task's failure stops the node): no later
        Ready may go out over a state that is not durable."""
        assert ready.quorum_state is not None
        await self.disk.write_quorum_state(ready.quorum_state, tuple(self.core.voters.sorted()))
        try:
            self._carry_out(ready)
        except Exception:
            self._pumping = False
            raise
        self._pump_busy = False
        self._pump()

    def _carry_out(self, ready: Ready) -> None:
        if ready.log_reset is not None or ready.truncate_to is not None or ready.entries or \
                ready.flush:
            self._write_log(ready)
        if ready.snapshot_write is not None:
            self._write_snapshot(ready.snapshot_write)
        if ready.snapshot_received is not None:
            self._keep_snapshot(*ready.snapshot_received)
        if ready.delete_before is not None:
            self._watch(self.disk.delete_before(ready.delete_before))
        if ready.voters is not None:
            self._learn_voters(ready.voters)
        for send in ready.messages:
            self._send(send)
        for reply in ready.replies:
            self._answer(reply)
        for event in ready.events:
            self._event(dict(event))

    # --- snapshots (KIP-630) -----------------------------------------------------------------

    def _write_snapshot(self, write: SnapshotWrite) -> None:
        if Unsafe.DELETE_BEFORE_SNAPSHOT in self.cfg.unsafe:
            # The defect: the log below goes now (this Ready's delete_before), the snapshot that
            # covers it only later.
            def later() -> None:
                self._delayed_writes.discard(handle)
                self._start_snapshot_write(write)

            handle = asyncio.get_running_loop().call_later(DELETE_BEFORE_SNAPSHOT_DELAY_S, later)
            self._delayed_writes.add(handle)
            return
        self._start_snapshot_write(write)

    def _start_snapshot_write(self, write: SnapshotWrite) -> None:
        started = time.monotonic()
        sid = write.snapshot_id

        def done(fut: asyncio.Future[None]) -> None:
            if fut.cancelled():
                return
            if fut.exception() is not None:
                log.error("snapshot %d-%d: write failed: %r", sid.end_offset, sid.epoch,
                          fut.exception())
                self._die(FatalError(f"snapshot write failed: {fut.exception()}"))
                return
            log.info("snapshot %d-%d written in %.3f s (%d keys, %d records)", sid.end_offset,
                     sid.epoch, time.monotonic() - started, len(write.image.kv),
                     write.image.records)
            self.step(SnapshotWritten(sid))

        self.disk.write_snapshot(write).add_done_callback(done)

    def _keep_snapshot(self, sid: m.SnapshotId, data: bytes) -> None:
        """A downloaded snapshot: checked and written on the disk thread, then reported."""

        def done(fut: asyncio.Future[Any]) -> None:
            if fut.cancelled():
                return
            exc = fut.exception()
            if isinstance(exc, SnapshotError):
                log.warning("snapshot %d-%d from the leader refused: %s", sid.end_offset,
                            sid.epoch, exc)
                self.step(SnapshotRefused(sid, str(exc)))
            elif exc is not None:
                log.error("snapshot %d-%d: write failed: %r", sid.end_offset, sid.epoch, exc)
                self._die(FatalError(f"snapshot write failed: {exc}"))
            else:
                self.step(SnapshotLoaded(sid, fut.result()))

        self.disk.receive_snapshot(sid, data).add_done_callback(done)

    def _watch(self, fut: asyncio.Future[Any]) -> None:
        def done(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.error("disk write failed: %r", f.exception())
                self._die(FatalError(f"disk write failed: {f.exception()}"))

        fut.add_done_callback(done)

    def _write_log(self, ready: Ready) -> None:
        """The Ready's reset, truncation, appends and flush: one job for the disk thread, which
        nobody awaits; `_flushed` hears when its flush ends, `_disk_failed` if anything fails."""
        if ready.flush:
            if not self._flushes_asked:
                self._flush_started = time.monotonic()
            self._flushes_asked += 1
        self.disk.write_log(ready.log_reset, ready.truncate_to, ready.entries, ready.flush)
        if ready.entries:
            window = self.metrics.append_records if self.core.is_leader else \
                self.metrics.fetch_records
            window.record(float(sum(1 for e in ready.entries if not e.is_control)))

    def _flushed(self, end_offset: int, asked: int, took: float) -> None:
        """A flush ended on the disk thread: `asked` flush requests are answered, and every
        entry below `end_offset` is durable."""
        self._flushes_asked -= asked
        # the next flush's wait for the disk starts now (the gauge of a flush in flight)
        self._flush_started = time.monotonic()
        self.metrics.log_flush_time_ms.record(took * 1000.0)
        if took > SLOW_FLUSH_S:
            # what an operator sees of a stalled disk: nothing is acknowledged meanwhile
            log.warning("slow disk: a log flush took %.1f s", took)
        self._step_now(LogFlushed(min(end_offset, self.core.log_end_offset)))

    def _disk_failed(self, exc: BaseException) -> None:
        log.error("disk write failed: %r", exc)
        self._die(FatalError(f"disk write failed: {exc}"))

    def _event(self, event: dict[str, Any]) -> None:
        kind = event.pop("type")
        if kind == "high-watermark":
            if self._hw_waiters is not None:
                if not self._hw_waiters.done():
                    self._hw_waiters.set_result(None)
                self._hw_waiters = None
            if event.keys() == {"epoch", "hw"}:
                self.events.high_watermark_moved(event["epoch"], event["hw"])
                return
        if kind == "state":
            self._measure_election(event.get("state"))
        self.events.emit(kind, **event)
        if kind in ("state", "truncate", "snapshot", "snapshot-install", "snapshot-refused",
                    "log-start", "broker-state", "broker-register", "broker-fence",
                    "broker-unfence", "broker-shutdown", "broker-refused"):
            log.info("%s %s", kind, event)

    def _measure_election(self, state: Any) -> None:
        if state in ("prospective", "candidate"):
            if self._election_started is None:
                self._election_started = time.monotonic()
        elif state in ("leader", "follower") and self._election_started is not None:
            self.metrics.election_latency_ms.record(
                (time.monotonic() - self._election_started) * 1000.0)
            self._election_started = None
        elif state not in ("prospective", "candidate"):
            pass

    # --- Raft messages ------------------------------------------------------------------------

    def _send(self, send: Send) -> None:
        msg = send.message
        if isinstance(msg, (m.BrokerRegistrationRequest, m.BrokerHeartbeatRequest,
                            m.BrokerRegistrationResponse, m.BrokerHeartbeatResponse)):
            self._send_broker(send)
        elif isinstance(msg, (m.VoteRequest, m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest,
                              m.FetchRequest, m.FetchSnapshotRequest)):
            self._spawn(self._rpc(send.dst, msg))
        else:
            self._answer_inbound(send)

    def _answer_inbound(self, send: Send) -> None:
        """The core's response to a pending request (matched by identity: `in_reply_to`)."""
        request = send.in_reply_to
        pending = self._inbound.pop(id(request), None) if request is not None else None
        if pending is not None and pending[0] is request and not pending[1].done():
            pending[1].set_result(send.message)
        else:
            log.debug("no pending request from %d for %s", send.dst,
                      type(send.message).__name__)

    async def _rpc(self, dst: int, msg: m.Request) -> None:
        api_key = translate.RAFT_REQUEST_KEYS[type(msg)]
        try:
            # Built at the version negotiated with the peer; none in common fails like a send
            # that never left (Peers logs why), and the core's timers retry it.
            answer = await self.peers.request(dst, translate.outbound_request(msg, self.cfg.listen))
        except WireError as exc:
            log.debug("%s to %d failed: %s", type(msg).__name__, dst, exc)
            return
        try:
            response = translate.response_from_kio(api_key, answer)
        except Exception as exc:  # a peer's answer we cannot read is the peer's fault
            log.warning("unreadable %s from %d: %s", type(answer).__name__, dst, exc)
            return
        if isinstance(response, m.VoteResponse) and isinstance(msg, m.VoteRequest):
            # Kafka's VoteResponse has no PreVote field: the round is known by the request.
            response = dataclasses.replace(response, pre_vote=msg.pre_vote)
        self._learn(dst, answer)
        if dst < 0:
            self._found_behind_bootstrap(dst, response)
        # Paired with its request, so that the core can ignore an answer to a fetch that a newer
        # one superseded (the connection matched them by correlation id).
        self._step_now(Receive(dst, response, msg))

    # --- brokers: BrokerRegistration and BrokerHeartbeat ------------------------------------

    def _send_broker(self, send: Send) -> None:
        """A broker message of the core: an answer to a pending request from a broker, or (on
        a broker) a request to the controller `send.dst`."""
        msg = send.message
        if isinstance(msg, (m.BrokerRegistrationRequest, m.BrokerHeartbeatRequest)):
            self._spawn(self._broker_rpc(send.dst, msg))
        else:
            self._answer_inbound(send)

    async def _broker_rpc(self, dst: int, msg: Any) -> None:
        api_key = translate.broker_api_key(msg)
        listener = self.cfg.listeners[0].name
        outbound = translate.broker_outbound(msg, listener, self.cfg.security_protocol(listener))
        try:
            answer = await self.peers.request(dst, outbound)
        except WireError as exc:
            log.debug("%s to %d failed: %s", type(msg).__name__, dst, exc)
            return
        try:
            response = translate.broker_response_from_kio(api_key, answer)
        except Exception as exc:  # a controller's answer we cannot read is the controller's fault
            log.warning("unreadable %s from %d: %s", type(answer).__name__, dst, exc)
            return
        self.step(Receive(dst, response, msg))

    async def _broker_request(self, req: Request) -> Any:
        """A broker's registration or heartbeat: into the core, answered with its response."""
        try:
            msg = translate.broker_request_from_kio(req.api_key, req.body)
        except translate.BadBrokerRequest as exc:
            log.debug("refusing %s: %s", apis.API_NAMES[req.api_key], exc)
            return translate.broker_refusal_to_kio(req.api_key, req.api_version,
                                                   m.ErrorCode.invalid_request)
        cluster_id = getattr(msg, "cluster_id", None)
        if cluster_id is not None and cluster_id != self.cluster_id:
            return translate.broker_refusal_to_kio(req.api_key, req.api_version,
                                                   m.ErrorCode.inconsistent_cluster_id)
        response = await self._core_answer(msg, msg.sender, self.cfg.request_timeout_ms / 1000.0)
        if response is _TIMED_OUT:
            log.debug("no answer to %s from broker %d", type(msg).__name__, msg.sender)
            return translate.broker_refusal_to_kio(req.api_key, req.api_version,
                                                   m.ErrorCode.request_timed_out)
        return translate.broker_response_to_kio(req.api_key, req.api_version, response)

    def _learn(self, src: int, body: Any) -> None:
        """Client addresses (what Metadata advertises) that a Raft message announces."""
        learned = translate.learned_endpoints(body)
        leader_ep = translate.leader_endpoint(body)
        if leader_ep is not None:
            learned[src] = leader_ep
        for node_id, ep in learned.items():
            if node_id != self.node_id and node_id in self.core.voters:
                self.learned[node_id] = ep

    def _learn_voters(self, voters: VoterSet) -> None:
        """Where each voter of a set in effect is reached: its controller listener's endpoint."""
        for voter in voters:
            ep = self.voter_endpoint(voter)
            if voter.id != self.node_id and ep is not None and self.peers.learn(voter.id, ep):
                log.debug("voter %d is at %s", voter.id, ep)

    def voter_endpoint(self, voter: Voter) -> Endpoint | None:
        """The voter's endpoint on the first controller listener (Kafka's RaftManager dials
        that one), else its first endpoint; None for a static voter (no endpoints)."""
        wanted = self.cfg.controller_listener_names[0]
        for ep in voter.endpoints:
            if ep.name == wanted:
                return Endpoint(ep.host, ep.port)
        return Endpoint(voter.endpoints[0].host, voter.endpoints[0].port) \
            if voter.endpoints else None

    def _found_behind_bootstrap(self, pseudo_id: int, response: m.Response) -> None:
        """A bootstrap server answered a Fetch without error: it is the leader it names (only a
        leader serves a Fetch), so that leader is reached at the bootstrap server's address."""
        if not isinstance(response, m.FetchResponse) or response.error != m.ErrorCode.none:
            return
        address = self.peers.address(pseudo_id)
        leader = response.leader_id
        if address is not None and leader >= 0 and leader != self.node_id and \
                self.peers.learn(leader, address):
            log.info("leader %d found at bootstrap server %s", leader, address)

    async def _raft_request(self, req: Request) -> Any:
        try:
            msg = translate.request_from_kio(req.api_key, req.body)
        except translate.NotOurPartition as exc:
            # Kafka's order: another cluster first, then a request that does not name exactly
            # our partition is INVALID_REQUEST, both as a top-level error.
            cluster_id = getattr(req.body, "cluster_id", None)
            code = m.ErrorCode.invalid_request if cluster_id in (None, self.cluster_id) \
                else m.ErrorCode.inconsistent_cluster_id
            answer = translate.refusal_to_kio(req.api_key, req.api_version, code)
            if answer is None:
                raise ProtocolError(f"{apis.API_NAMES.get(req.api_key)} v{req.api_version} "
                                    f"refused ({exc}) and it has no error field") from None
            log.debug("refusing %s: %s", apis.API_NAMES.get(req.api_key), exc)
            return answer
        if msg.cluster_id is not None and msg.cluster_id != self.cluster_id:
            return self._raft_error(req, msg, m.ErrorCode.inconsistent_cluster_id)
        src = msg.sender
        # Endpoints are learned once the request is known to be of this cluster.
        self._learn(src, req.body)
        if isinstance(msg, m.FetchRequest) and msg.max_wait_ms > self.cfg.request_timeout_ms:
            # Parked longer, the answer would reach a fetcher that gave up on it (its request
            # timeout); a forged MaxWaitMs of 24 days would hold the request that long.
            msg = dataclasses.replace(msg, max_wait_ms=self.cfg.request_timeout_ms)
        wait = self.cfg.request_timeout_ms / 1000.0
        if isinstance(msg, m.FetchRequest):
            wait += max(msg.max_wait_ms, 0) / 1000.0  # a negative one is refused, not waited
        response = await self._core_answer(msg, src, wait)
        if response is _TIMED_OUT:
            log.debug("no answer to %s from %d", type(msg).__name__, src)
            return None
        return translate.response_to_kio(req.api_key, req.api_version, response, self.node_id,
                                          self.cfg.client_address(self.node_id) or self.cfg.listen)

    async def _core_answer(self, msg: m.Message, src: int, wait_s: float) -> Any:
        """Step the request `msg` from `src` into the core and await its response (matched by
        identity, `_answer_inbound`), or `_TIMED_OUT` after `wait_s`. The future is awaited
        directly, with a timer to expire it, rather than through `asyncio.wait_for`: that costs
        a loop iteration and four more objects per request, and this is every Fetch's path."""
        fut: asyncio.Future[Any] = self._loop.create_future()
        key = id(msg)
        self._inbound[key] = (msg, fut)
        self.step(Receive(src, msg))
        expiry = self._loop.call_later(wait_s, _expire, fut)
        try:
            response = await fut
        finally:
            expiry.cancel()
        if response is _TIMED_OUT:
            pending = self._inbound.get(key)
            if pending is not None and pending[1] is fut:
                del self._inbound[key]
        return response

    def _raft_error(self, req: Request, msg: m.Request, code: m.ErrorCode) -> Any:
        response = m.error_response(msg, code, self.core.responder_leader(), self.core.epoch)
        return translate.response_to_kio(req.api_key, req.api_version, response, self.node_id,
                                         self.cfg.listen)

    # --- requests from the wire ---------------------------------------------------------------

    def dispatch(self, req: Request) -> Awaitable[Any]:
        """The request's answer to come (the listener's `Handler`): not a coroutine itself, so
        that a handler returning a future (Produce) costs no task."""
        if req.api_key in _BROKER_APIS:
            return self._broker_request(req)
        if req.api_key in _RAFT_APIS or (
            req.api_key == apis.FETCH and translate.fetch_replica_id(req.body) >= 0
        ):
            return self._raft_request(req)
        handler = self.client_api.handlers.get(req.api_key)
        if handler is None:
            nothing: asyncio.Future[Any] = self._loop.create_future()
            nothing.set_result(None)
            return nothing
        return handler(req)

    # --- what the client API needs (client_api.NodeApi) ---------------------------------------

    def leader_id(self) -> int | None:
        return self.core.leader_id

    def epoch(self) -> int:
        return int(self.core.epoch)

    def high_watermark(self) -> int:
        return int(self.core.high_watermark)

    def log_start_offset(self) -> int:
        return int(self.core.log_start_offset)

    def log_end_offset(self) -> int:
        return int(self.core.log_end_offset)

    def voter_ids(self) -> list[int]:
        return self.core.voters.sorted()

    def is_controller(self) -> bool:
        """`controller` is among this node's roles (it answers the controllers' APIs)."""
        return self.cfg.is_controller

    def broker_status(self) -> BrokerStatus | None:
        """This broker's lifecycle (None on a controller-only node)."""
        return self.core.broker_status()

    def brokers_view(self) -> dict[int, BrokerInfo]:
        """The registered brokers of this node's committed image."""
        return self.core.brokers_view()

    def voter_set(self) -> VoterSet:
        return self.core.voters

    def client_address(self, node_id: int) -> Endpoint | None:
        """client.voters, else what the node announced, else the address this node dials it
        at (controller.quorum.voters, or the voter set's endpoint)."""
        if node_id in self.cfg.client_voters or node_id == self.node_id:
            return self.cfg.client_address(node_id)
        learned = self.learned.get(node_id) or self.cfg.client_address(node_id)
        if learned is not None:
            return learned
        voter = self.core.voters.get(node_id)
        return None if voter is None else self.voter_endpoint(voter)

    def controller_listener(self) -> str:
        return self.cfg.controller_listener_names[0]

    def change_voters(self, make: Callable[[int], AddVoter | RemoveVoter | UpdateVoter]
                      ) -> asyncio.Future[VoterChangeReply]:
        """Step the voter change `make(request_id)` into the core; its `VoterChangeReply`
        resolves the future (the core always answers: on commit, on refusal, or when
        leadership is lost)."""
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self.step(make(request_id))
        return fut

    def describe_quorum(self) -> QuorumDescription:
        """The core's description, its monotonic timestamps turned into Unix milliseconds
        (what DescribeQuorum carries)."""
        d = self.core.describe_quorum()
        shift = int(time.time() * 1000) - _now_ms()

        def wall(r: ReplicaDescription) -> ReplicaDescription:
            return dataclasses.replace(
                r,
                last_fetch_timestamp=r.last_fetch_timestamp + shift
                if r.last_fetch_timestamp >= 0 else -1,
                last_caught_up_timestamp=r.last_caught_up_timestamp + shift
                if r.last_caught_up_timestamp >= 0 else -1)

        return dataclasses.replace(d, voters=tuple(wall(r) for r in d.voters),
                                   observers=tuple(wall(r) for r in d.observers))

    def append(self, payloads: tuple[bytes, ...]) -> asyncio.Future[AppendReply]:
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self.linger.add(request_id, payloads)
        return fut

    def _step_appends(self, batch: list[tuple[int, tuple[bytes, ...]]]) -> None:
        """One linger window's appends, stepped together: one Ready, one write, one flush."""
        now = _now_ms()
        for request_id, payloads in batch:
            self.core.step(ClientAppend(request_id, payloads), now)
        self._kick()

    def read(self, from_offset: int) -> asyncio.Future[ReadReply]:
        """Through the core: linearizable, or under `read.mode=leader` (the stale-leader-reads
        switch) the leader's committed log at once."""
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self.step(ClientRead(request_id, from_offset))
        return fut

    def read_image(self) -> asyncio.Future[ReadReply]:
        """The kv map at the high watermark, confirmed as a log read is (the `kv` workload)."""
        request_id = next(self._ids)
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._clients[request_id] = (fut, time.monotonic())
        self.step(ClientRead(request_id, 0, image=True))
        return fut

    def hw_changed(self) -> asyncio.Future[None]:
        if self._hw_waiters is None or self._hw_waiters.done():
            self._hw_waiters = self._loop.create_future()
        return self._hw_waiters

    def _answer(self, reply: ClientReply) -> None:
        entry = self._clients.pop(reply.request_id, None)
        if entry is None:
            return
        fut, started = entry
        if isinstance(reply, AppendReply) and reply.error == m.ErrorCode.none:
            self.metrics.commit_latency_ms.record((time.monotonic() - started) * 1000.0)
        if not fut.done():
            fut.set_result(reply)

    def _gauges(self) -> dict[str, float | str]:
        core = self.core
        snapshots = core.snapshot_ids
        return {
            "current-leader": -1 if core.leader_id is None else core.leader_id,
            "current-epoch": core.epoch,
            "current-vote": -1 if core.voted_id is None else core.voted_id,
            "current-state": core.state_name,
            "high-watermark": core.high_watermark,
            "log-end-offset": core.log_end_offset,
            "log-end-epoch": core.last_epoch,
            "log-start-offset": core.log_start_offset,
            "latest-snapshot-end-offset": snapshots[-1].end_offset if snapshots else -1,
            "latest-snapshot-epoch": snapshots[-1].epoch if snapshots else -1,
            "snapshot-count": len(snapshots),
            # how long the flush in flight has been waiting for the disk (0: none): a stalled
            # fsync shows here while it lasts, before it shows in log-flush-time-ms-max
            "log-flush-in-flight-ms": (time.monotonic() - self._flush_started) * 1000.0
            if self._flushes_asked else 0.0,
            **self._broker_gauges(),
        }

    def _broker_gauges(self) -> dict[str, float | str]:
        """Kafka's broker-side names where it has them (BrokerLifecycleManager's state, the
        broker epoch), and the count of unfenced brokers this node's image knows."""
        view = self.core.brokers_view()
        gauges: dict[str, float | str] = {
            "registered-broker-count": len(view),
            "fenced-broker-count": sum(1 for b in view.values() if b.fenced),
        }
        status = self.core.broker_status()
        if status is not None:
            gauges.update({
                "broker-state": status.state,
                "broker-epoch": status.broker_epoch,
                "broker-self-fenced": 1.0 if status.self_fenced else 0.0,
                "broker-contact-age-ms": -1 if status.contact_age_ms is None
                else status.contact_age_ms,
            })
        return gauges


# --- the process ----------------------------------------------------------------------------


async def serve(cfg: NodeConfig, stop: asyncio.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`), then resign and exit: the process exit code."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        host = NodeHost(cfg)
    except StorageError as exc:
        log.error("cannot open %s: %s", cfg.metadata_log_dir, exc)
        return 1
    try:
        await host.start()
    except OSError as exc:
        # the error names the address (the client port's or the metrics port's)
        log.error("cannot listen (client port %s, metrics port %s): %s", cfg.listen,
                  cfg.metrics_port or "none", exc)
        host.disk.close()
        return 1
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    fatal: asyncio.Future[Any] = host.fatal
    await asyncio.wait([stopper, fatal], return_when=asyncio.FIRST_COMPLETED)
    if host.fatal.done():
        log.error("stopping: %s", host.fatal.result())
        stopper.cancel()
        await host.stop(graceful=False)
        return 1
    log.info("stopping on request: resigning")
    await host.stop(graceful=True)
    log.info("stopped")
    return 0


def run_node(cfg: NodeConfig, event_loop: str = "auto") -> int:
    """The `kraft node` process: `serve` on the event loop `event_loop` names (event_loop.py);
    EventLoopUnavailable, before anything starts, when that loop cannot run here."""
    name, run = choose_event_loop(event_loop)
    tune_gc()
    log.info("event loop: %s", name)
    return run(serve(cfg))


GC_THRESHOLD = (20_000, 20, 20)
"""The collector's thresholds in a node process (CPython's default: 700, 10, 10)."""


def tune_gc() -> None:
    """Freezes what the process built to start and makes the young generation larger.

    Every request leaves reference cycles behind (futures and their callbacks, exceptions), so
    the collector runs, and with the default thresholds an older generation's collection walks
    every object alive: the modules and kio's classes, some 10^5 objects, several ms in which no
    request is read. Those pauses were the p99 (bench_node, 64 producers: 24-26 ms with them,
    10-11 ms without; 256: 55-57 against 29-32 ms) and, in bench_node, 5 to 15% of the
    throughput (bench_compare, whose client is heavier, showed no change beyond its noise). Frozen
    objects are never walked again (`gc.freeze`, as servers that fork do), and a larger first
    generation collects the same garbage less often. Garbage is still collected: cycles live a
    few hundred requests longer, and RSS stays within a few MB of the default's."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
