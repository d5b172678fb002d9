"""`PeerRpc`: the requests the core sends to other nodes, their answers stepped back, and where
the other nodes are learned from.

A Raft request (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot, UpdateRaftVoter)
goes out through `Peers` on its own task; the answer is stepped back at once (`Pump.step_now`: a
follower's Fetch is on the commit path), paired with its request (`Receive.in_reply_to`), so that
the core can ignore an answer to a request a newer one superseded. A failed send is only logged:
the core's timers retry. A broker's BrokerRegistration and BrokerHeartbeat go to the controller
the core follows, a leader's ApiVersions to the replica it is about to add (at the endpoint the
AddRaftVoter names; a failed send is answered with an error); their answers are stepped back too.

Peers learn where each voter is from every voter set the core puts in effect (`Ready.voters`, the
controller listener's endpoint), before that Ready's messages go out. An observer that knows no
voter set finds the leader through the bootstrap servers (pseudo ids -2, -3, ...): a Fetch that a
bootstrap server answers without error was answered by the leader (only a leader serves one), so
the leader it names is there; one that is not the leader names the leader's id only, so the
observer tries them again after its fetch timeout. The client addresses the voters announce in
their messages are kept in `learned` (what Metadata advertises).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from reference_node.config import Endpoint, NodeConfig
from reference_node.raft import messages as m
from reference_node.raft.api import Receive
from reference_node.raft.voters import Voter, VoterEndpoint, VoterSet
from reference_node.server import translate
from reference_node.server.peers import Outbound, Peers
from reference_node.server.pump import Pump
from reference_node.server.supervisor import Supervisor
from reference_node.wire import apis
from reference_node.wire.aio import api_versions_request
from reference_node.wire.errors import WireError

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore

log = logging.getLogger(__name__)

RAFT_REQUESTS = (m.VoteRequest, m.BeginQuorumEpochRequest, m.EndQuorumEpochRequest,
                 m.FetchRequest, m.FetchSnapshotRequest, m.UpdateVoterRequest)
BROKER_REQUESTS = (m.BrokerRegistrationRequest, m.BrokerHeartbeatRequest)
REQUESTS = RAFT_REQUESTS + BROKER_REQUESTS + (m.ApiVersionsRequest,)
"""The core's messages that are requests to another node (the rest answer requests to us)."""


def voter_endpoint(voter: Voter, controller_listener: str) -> Endpoint | None:
    """The voter's endpoint on the first controller listener (Kafka's RaftManager dials that
    one), else its first endpoint; None for a static voter (no endpoints)."""
    for ep in voter.endpoints:
        if ep.name == controller_listener:
            return Endpoint(ep.host, ep.port)
    return Endpoint(voter.endpoints[0].host, voter.endpoints[0].port) \
        if voter.endpoints else None


class PeerRpc:
    def __init__(self, cfg: NodeConfig, core: RaftCore, peers: Peers, pump: Pump,
                 supervisor: Supervisor) -> None:
        self._cfg = cfg
        self._node_id = cfg.node_id
        self._core = core
        self._peers = peers
        self._pump = pump
        self._supervisor = supervisor
        self.learned: dict[int, Endpoint] = {}
        """The client addresses the voters announced (what Metadata advertises)."""

    def request(self, dst: int, msg: Any) -> None:
        """Send the core's request `msg` (one of `REQUESTS`) to `dst` on its own task."""
        if isinstance(msg, BROKER_REQUESTS):
            self._supervisor.spawn(self._broker_rpc(dst, msg))
        elif isinstance(msg, m.ApiVersionsRequest):
            self._supervisor.spawn(self._api_versions(dst, msg))
        else:
            self._supervisor.spawn(self._rpc(dst, msg))

    async def _rpc(self, dst: int, msg: m.Request) -> None:
        api_key = translate.RAFT_REQUEST_KEYS[type(msg)]
        try:
            # Built at the version negotiated with the peer; none in common fails like a send
            # that never left (Peers logs why), and the core's timers retry it.
            answer = await self._peers.request(dst,
                                               translate.outbound_request(msg, self._cfg.listen))
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
        self.learn(dst, answer)
        if dst < 0:
            self._found_behind_bootstrap(dst, response)
        # Paired with its request, so that the core can ignore an answer to a fetch that a newer
        # one superseded (the connection matched them by correlation id).
        self._pump.step_now(Receive(dst, response, msg))

    async def _broker_rpc(self, dst: int, msg: Any) -> None:
        api_key = translate.broker_api_key(msg)
        listener = self._cfg.listeners[0].name
        outbound = translate.broker_outbound(msg, listener,
                                             self._cfg.security_protocol(listener))
        try:
            answer = await self._peers.request(dst, outbound)
        except WireError as exc:
            log.debug("%s to %d failed: %s", type(msg).__name__, dst, exc)
            return
        try:
            response = translate.broker_response_from_kio(api_key, answer)
        except Exception as exc:  # a controller's answer we cannot read is the controller's fault
            log.warning("unreadable %s from %d: %s", type(answer).__name__, dst, exc)
            return
        self._pump.step(Receive(dst, response, msg))

    async def _api_versions(self, dst: int, msg: m.ApiVersionsRequest) -> None:
        """The leader's ApiVersions to a replica it is about to add (KIP-853), at the endpoint
        the AddRaftVoter named for the controller listener; its `kraft.version` levels (the
        SupportedFeatures of v3+) are stepped back. A failed send is answered as Kafka's
        NetworkClient answers a disconnection: with an error (the add is refused at once)."""
        listener = self._cfg.controller_listener_names[0]
        ep = voter_endpoint(Voter(dst, None, tuple(VoterEndpoint(*x) for x in msg.listeners)),
                            listener)
        if ep is not None and dst != self._node_id:
            self._peers.learn(dst, ep)
        outbound = Outbound(apis.API_VERSIONS, apis.SUPPORTED_APIS[apis.API_VERSIONS],
                            api_versions_request, "ApiVersions")
        response: m.ApiVersionsResponse
        try:
            answer = await self._peers.request(dst, outbound)
        except WireError as exc:
            log.info("ApiVersions to %d (a voter to add) failed: %s", dst, exc)
            response = m.ApiVersionsResponse(m.ErrorCode.network_exception)
        else:
            levels = next(((int(f.min_version), int(f.max_version))
                           for f in getattr(answer, "supported_features", None) or ()
                           if f.name == apis.KRAFT_VERSION_FEATURE), None)
            response = m.ApiVersionsResponse(m.ErrorCode(answer.error_code), levels)
        self._pump.step(Receive(dst, response, msg))

    # --- where the other nodes are ------------------------------------------------------------

    def learn(self, src: int, body: Any) -> None:
        """Client addresses (what Metadata advertises) that a Raft message announces."""
        learned = translate.learned_endpoints(body)
        leader_ep = translate.leader_endpoint(body)
        if leader_ep is not None:
            learned[src] = leader_ep
        for node_id, ep in learned.items():
            if node_id != self._node_id and node_id in self._core.voters:
                self.learned[node_id] = ep

    def learn_voters(self, voters: VoterSet) -> None:
        """Where each voter of a set in effect is reached: its controller listener's endpoint."""
        listener = self._cfg.controller_listener_names[0]
        for voter in voters:
            ep = voter_endpoint(voter, listener)
            if voter.id != self._node_id and ep is not None and self._peers.learn(voter.id, ep):
                log.debug("voter %d is at %s", voter.id, ep)

    def _found_behind_bootstrap(self, pseudo_id: int, response: m.Response) -> None:
        """A bootstrap server answered a Fetch without error: it is the leader it names (only a
        leader serves a Fetch), so that leader is reached at the bootstrap server's address."""
        if not isinstance(response, m.FetchResponse) or response.error != m.ErrorCode.none:
            return
        address = self._peers.address(pseudo_id)
        leader = response.leader_id
        if address is not None and leader >= 0 and leader != self._node_id and \
                self._peers.learn(leader, address):
            log.info("leader %d found at bootstrap server %s", leader, address)
