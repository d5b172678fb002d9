"""`NodeHost`: one `RaftCore` on asyncio, composed of one part per job.

- `pump.Pump` steps every input into the core, on the loop with the host's clock, and carries
  out each `Ready` in the order it prescribes (the quorum state durable first), through:
- `disk_jobs.DiskJobs`: the log's writes and flushes, and the snapshot jobs, on the disk thread;
- `routing.Routing`: requests from the wire to the core or the client API, and the core's
  messages to peers or to the pending requests they answer;
- `peer_rpc.PeerRpc`: the core's requests to other nodes, and where those nodes are;
- `client_facade.ClientFacade`: what the client API (`client_api.ClientApi`) asks of the node;
- `core_events.CoreEvents`: events.jsonl, logs and election latency; `gauges`: the metrics.
`process` runs a NodeHost as the `kraft node` process.

The core is built from the disk (the quorum state, the log, the latest valid snapshot) and from
the configuration (the static voters if any, this replica's directory id, the bootstrap servers, a
broker's identity). Who is a voter is the core's to say, never the configuration's.

Details (what the core is built from): docs/internals/node.md#node
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time

from reference_node.config import NodeConfig
from reference_node.raft.api import Shutdown
from reference_node.raft.config import RaftConfig
from reference_node.raft.lifecycle import BrokerIdentity, new_incarnation
from reference_node.raft.voters import VoterEndpoint
from reference_node.server.client_api import ClientApi
from reference_node.server.client_facade import ClientFacade
from reference_node.server.core_events import CoreEvents
from reference_node.server.disk_jobs import DiskJobs
from reference_node.server.events import EventsWriter
from reference_node.server.gauges import node_gauges
from reference_node.server.listener import ConnectionLimits, Listener
from reference_node.server.metrics import Metrics, serve_metrics
from reference_node.server.peer_rpc import PeerRpc
from reference_node.server.peers import Peers
from reference_node.server.pump import Outputs, Pump, now_ms
from reference_node.server.routing import Routing
from reference_node.server.storage_adapter import Disk
from reference_node.server.supervisor import Supervisor

log = logging.getLogger(__name__)

TICK_S = 0.01
"""How often a graceful stop looks whether the core may go."""
_DRAIN_S = 1.0
"""At most this long past the shutdown timeout for the last Readies to be carried out."""


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
        controller_listener=(cfg.controller_listener_names[0]
                             if cfg.controller_listener_names else None),
        unsafe=cfg.unsafe,
    )


def announced_endpoints(cfg: NodeConfig) -> tuple[VoterEndpoint, ...]:
    """Where this node says, as a voter, it is reached (Kafka's local listeners, which a voter
    sends in UpdateRaftVoter when the voter set names it otherwise): the controller listeners
    among `advertised.listeners`, and only those. A bound address (`listeners`) is not announced:
    peers may reach the node another way (a proxy, another name), and a voter that rewrote its
    entry with its bind address would cut them off."""
    return tuple(
        VoterEndpoint(listener.name, listener.endpoint.host, listener.endpoint.port)
        for listener in cfg.advertised_listeners
        if listener.name in cfg.controller_listener_names
        and listener.endpoint.host not in ("", "0.0.0.0", "::") and listener.endpoint.port > 0
    )


def broker_identity(cfg: NodeConfig, now_unix_ms: int, rng: random.Random) -> BrokerIdentity | None:
    """This process's identity as a broker (None unless `broker` is among its roles): a new
    incarnation at every start, and the client endpoint it advertises."""
    if not cfg.is_broker:
        return None
    ep = cfg.advertised
    return BrokerIdentity(new_incarnation(now_unix_ms, rng), ep.host, ep.port)


class NodeHost:
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
            random.Random(), now_ms(), quorum_state=state, log=entries,
            log_start_offset=self.disk.log_start_offset, log_start_epoch=start.log_start_epoch,
            image=start.image, snapshots=start.snapshot_ids,
            snapshot_store=self.disk.snapshot_reader,
            directory_id=self.disk.directory_id, bootstrap=bootstrap,
            broker=broker_identity(cfg, int(time.time() * 1000), random.Random()),
            endpoints=announced_endpoints(cfg),
        )
        if start.image is not None:
            log.info("loaded snapshot %d-%d (%d keys, %d records); log [%d, %d)",
                     start.image.end_offset, start.image.epoch, len(start.image.kv),
                     start.image.records, self.disk.log_start_offset, self.core.log_end_offset)
        self.supervisor = Supervisor(self._loop)
        self.fatal = self.supervisor.fatal
        self.metrics = Metrics(cfg.node_id, self.gauges)
        routes = {i: e for i, e in {**cfg.voters, **cfg.routes}.items() if i != cfg.node_id}
        routes.update(zip(bootstrap, cfg.bootstrap_servers, strict=True))
        self.peers = Peers(cfg.node_id, routes, cfg.request_timeout_ms, cfg.retry_backoff_ms,
                           ssl=cfg.peer_ssl())
        self.pump = Pump(self.core, self.disk, self.supervisor, self._loop)
        self.peer_rpc = PeerRpc(cfg, self.core, self.peers, self.pump, self.supervisor)
        self.peer_rpc.learn_voters(self.core.voters)
        self.facade = ClientFacade(cfg, self.core, self.cluster_id, self.pump, self.peer_rpc,
                                   self.metrics, self._loop)
        self.client_api = ClientApi(self.facade)
        self.routing = Routing(cfg, self.core, self.cluster_id, self.pump, self.peer_rpc,
                               self.client_api.handlers, self._loop)
        self.listener = Listener(self.routing.dispatch, ConnectionLimits(
            cfg.socket_request_max_bytes, cfg.queued_max_request_bytes,
            cfg.connections_max_idle_ms))
        self.disk_jobs = DiskJobs(cfg, self.disk, self.core, self.metrics, self.pump,
                                  self.supervisor)
        self.pump.connect(Outputs(
            write_log=self.disk_jobs.write_log,
            write_snapshot=self.disk_jobs.write_snapshot,
            keep_snapshot=self.disk_jobs.keep_snapshot,
            delete_before=self.disk_jobs.delete_before,
            learn_voters=self.peer_rpc.learn_voters,
            send=self.routing.send,
            answer=self.facade.answer,
            event=CoreEvents(self.events, self.metrics, self.facade.hw_moved).handle,
        ))
        self.port = 0

    def gauges(self) -> dict[str, float | str]:
        """What the metrics endpoint reads when scraped."""
        return node_gauges(self.core, self.disk_jobs.flush_in_flight_ms())

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
        self.pump.start()

    async def stop(self, graceful: bool = True) -> None:
        """Close everything; data stays durable. Graceful: step `Shutdown` first and keep serving
        (ticks, peers' answers and requests) until the core may go (`RaftCore.shutdown_complete`:
        it knows the next leader, having resent EndQuorumEpoch and voted for it) or
        `shutdown.timeout.ms` has passed; then let the last output out."""
        # Appends still lingering reach the core now: refused (certainly not appended) rather
        # than left unanswered.
        self.facade.linger.drain()
        if graceful:
            self.pump.step(Shutdown())
            deadline = time.monotonic() + self.cfg.shutdown_timeout_ms / 1000.0
            while not self.core.shutdown_complete and time.monotonic() < deadline:
                await asyncio.sleep(TICK_S)
            if not self.core.shutdown_complete:
                log.warning("graceful shutdown timed out after %d ms (state %s)",
                            self.cfg.shutdown_timeout_ms, self.core.state_name)
            await self._let_output_out(deadline + _DRAIN_S)
        self.facade.linger.close()
        self.pump.cancel_timer()
        self.disk_jobs.cancel_delayed()
        await self.listener.close()
        if self._metrics_server is not None:
            self._metrics_server.close()
        self.pump.halt()
        await self.supervisor.cancel_all()
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
        while self.pump.busy() and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        await asyncio.sleep(TICK_S)
