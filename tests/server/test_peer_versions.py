"""Node-to-node requests go out at the highest version the peer and the node share (ApiVersions on
every new connection, as Kafka's NetworkClient), lower versions carry the same Raft message, and a
request no common version can carry is not sent: the node says why, once in a while."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from reference_node.config import Endpoint, from_properties
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.server.node import NodeHost
from reference_node.server.peers import Peers
from reference_node.server.storage_adapter import format_directory
from reference_node.wire import apis
from reference_node.wire.aio import AsyncKafkaConnection
from reference_node.wire.apis import VersionRange
from reference_node.wire.codec import decode_request, decode_response, encode_request
from reference_node.wire.codec import encode_response as encode_kio_response
from reference_node.wire.errors import VersionMismatch
from testkit.cluster import CLUSTER_ID, free_ports

from .fake_voter import FakeVoter

ME = Endpoint("127.0.0.1", 9093)
OLD = {
    apis.API_VERSIONS: VersionRange(0, 2),
    apis.VOTE: VersionRange(0, 0),
    apis.BEGIN_QUORUM_EPOCH: VersionRange(0, 0),
    apis.END_QUORUM_EPOCH: VersionRange(0, 0),
    apis.FETCH: VersionRange(4, 11),
}
"""An older voter: ApiVersions below our v3 (KIP-511 retry), the KRaft RPCs before KIP-853 and
KIP-996, and Fetch before KIP-595's v12."""

VOTE = m.VoteRequest(CLUSTER_ID, 4, 1, 3, 17, pre_vote=False, voter_id=2)
PRE_VOTE = m.VoteRequest(CLUSTER_ID, 4, 1, 3, 17, pre_vote=True, voter_id=2)
BEGIN = m.BeginQuorumEpochRequest(CLUSTER_ID, 1, 4, voter_id=2)
END = m.EndQuorumEpochRequest(CLUSTER_ID, 1, 4, (3, 2))
FETCH = m.FetchRequest(CLUSTER_ID, 1, 4, 17, 3, 500)


# --- which versions can carry which request --------------------------------------------------


def test_versions_that_can_carry_each_request() -> None:
    assert translate.request_versions(VOTE) == apis.SUPPORTED_APIS[apis.VOTE]
    assert translate.request_versions(PRE_VOTE) == VersionRange(2, 2)
    assert translate.request_versions(BEGIN) == apis.SUPPORTED_APIS[apis.BEGIN_QUORUM_EPOCH]
    assert translate.request_versions(END) == apis.SUPPORTED_APIS[apis.END_QUORUM_EPOCH]
    assert translate.request_versions(FETCH) == VersionRange(12, 17)


@pytest.mark.parametrize("version", [0, 1])
def test_a_pre_vote_is_never_built_as_a_real_vote(version: int) -> None:
    """Vote below v2 has no PreVote field: building one would send a real vote."""
    with pytest.raises(ValueError, match="pre-vote"):
        translate.request_to_kio(PRE_VOTE, ME, version)


def test_a_raft_fetch_is_never_built_below_v12() -> None:
    with pytest.raises(ValueError, match="Fetch"):
        translate.request_to_kio(FETCH, ME, 11)


def _lower(msg: m.Request, version: int) -> m.Request:
    """What the receiver reads from `msg` sent at `version`: KIP-853's voter id exists from v1."""
    if isinstance(msg, m.VoteRequest | m.BeginQuorumEpochRequest) and version == 0:
        return dataclasses.replace(msg, voter_id=-1)
    return msg


@pytest.mark.parametrize("msg", [VOTE, PRE_VOTE, BEGIN, END, FETCH])
def test_requests_round_trip_at_every_version_that_carries_them(msg: m.Request) -> None:
    versions = translate.request_versions(msg)
    for version in range(versions.min, versions.max + 1):
        kio_msg = translate.request_to_kio(msg, ME, version)
        assert kio_msg.__version__ == version
        req = decode_request(encode_request(1, kio_msg, "t")[4:])
        assert req.api_version == version
        assert translate.request_from_kio(req.api_key, req.body) == _lower(msg, version)
        # KIP-853's leader endpoint rides along from v1 only.
        from_leader = isinstance(msg, m.BeginQuorumEpochRequest | m.EndQuorumEpochRequest)
        assert translate.leader_endpoint(req.body) == (ME if from_leader and version else None)


@pytest.mark.parametrize("msg", [
    m.VoteResponse(m.ErrorCode.none, 1, 4, True),
    m.BeginQuorumEpochResponse(m.ErrorCode.fenced_leader_epoch, 3, 5),
    m.EndQuorumEpochResponse(m.ErrorCode.none, -1, 5),
    m.FetchResponse(m.ErrorCode.none, 1, 4, 6, 0, (), m.DivergingEpoch(2, 9)),
])
def test_responses_round_trip_at_every_version_we_send(msg: m.Response) -> None:
    api_key = translate.response_api_key(msg)
    ours = apis.SUPPORTED_APIS[api_key]
    low = translate.RAFT_FETCH_MIN_VERSION if api_key == apis.FETCH else ours.min
    for version in range(low, ours.max + 1):
        kio_msg = translate.response_to_kio(api_key, version, msg, 1, ME)
        _, body = decode_response(encode_kio_response(9, kio_msg)[4:],
                                  apis.response_class(api_key, version))
        assert translate.response_from_kio(api_key, body) == msg


# --- Peers against an older voter ------------------------------------------------------------


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "reference_node.server.peers" and r.levelno == logging.WARNING]


def test_peers_negotiate_with_an_older_voter(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        voter = FakeVoter(2, OLD)
        await voter.start()
        peers = Peers(1, {2: voter.endpoint}, 2000, 50)
        try:
            answer = await peers.request(2, translate.outbound_request(VOTE, ME))
            assert translate.response_from_kio(apis.VOTE, answer).vote_granted
            assert peers.versions(2) == OLD
            for msg in (BEGIN, END):
                answer = await peers.request(2, translate.outbound_request(msg, ME))
                assert translate.response_from_kio(translate.RAFT_REQUEST_KEYS[type(msg)],
                                                   answer).error == m.ErrorCode.none
            for _ in range(3):
                for msg in (PRE_VOTE, FETCH):
                    with pytest.raises(VersionMismatch) as info:
                        await peers.request(2, translate.outbound_request(msg, ME))
                    assert info.value.certainly_not_sent
            # The refusals left the connection alone: a real vote still goes out on it.
            await peers.request(2, translate.outbound_request(VOTE, ME))
        finally:
            await peers.close()
            await voter.close()
        assert voter.received(apis.VOTE) == [(0, _lower(VOTE, 0))] * 2
        assert voter.received(apis.BEGIN_QUORUM_EPOCH) == [(0, _lower(BEGIN, 0))]
        assert voter.received(apis.END_QUORUM_EPOCH) == [(0, END)]
        assert voter.received(apis.FETCH) == []
        # The only version it ever refused is our first ApiVersions (KIP-511 retry at v2).
        assert [(e.api_key, e.api_version) for e in voter.refused] == [(apis.API_VERSIONS, OUR_API_VERSIONS)]
        assert [r.api_version for r in voter.requests if r.api_key == apis.API_VERSIONS] == [2]

    caplog.set_level(logging.WARNING, logger="reference_node.server.peers")
    asyncio.run(scenario())
    warnings = _warnings(caplog)
    assert len(warnings) == 2, warnings  # three refusals each, one line each
    pre_vote, fetch = warnings
    for text in warnings:
        assert "voter 2 at 127.0.0.1:" in text and "not sent: no common version" in text
    assert "Vote (pre-vote)" in pre_vote and "ours 2..2, theirs 0..0" in pre_vote
    assert fetch.startswith("Fetch") and "ours 12..17, theirs 4..11" in fetch


def test_mismatch_warning_is_throttled_and_counts_what_it_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        voter = FakeVoter(2, OLD)
        await voter.start()
        peers = Peers(1, {2: voter.endpoint}, 2000, 50, mismatch_log_interval_s=0.5)
        try:
            for _ in range(3):
                with pytest.raises(VersionMismatch):
                    await peers.request(2, translate.outbound_request(FETCH, ME))
            await asyncio.sleep(0.6)
            with pytest.raises(VersionMismatch):
                await peers.request(2, translate.outbound_request(FETCH, ME))
        finally:
            await peers.close()
            await voter.close()

    caplog.set_level(logging.WARNING, logger="reference_node.server.peers")
    asyncio.run(scenario())
    warnings = _warnings(caplog)
    assert len(warnings) == 2, warnings
    assert "more since" not in warnings[0]
    assert "(2 more since the last warning)" in warnings[1]


# --- a real node with older voters ----------------------------------------------------------


def _node_config(tmp_path: Path, port: int, voters: dict[int, int], **extra: str) -> NodeHost:
    cfg = from_properties({
        "node.id": "1",
        "process.roles": "controller",
        "controller.quorum.voters": ",".join(f"{i}@127.0.0.1:{p}" for i, p in voters.items()),
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "metadata.log.dir": str(tmp_path / "data"),
        **extra,
    })
    format_directory(cfg, CLUSTER_ID)
    return NodeHost(cfg)


OUR_API_VERSIONS = apis.SUPPORTED_APIS[apis.API_VERSIONS].max
"""The ApiVersions version a node asks first (an older peer refuses it, KIP-511)."""


async def _until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_node_elected_with_an_older_voter_speaks_its_versions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Voter 2 is older (Vote/BeginQuorumEpoch/EndQuorumEpoch v0, no pre-vote), voter 3 current.
    The node pre-votes with 3 only, then asks 2 for a real vote at v0, leads, announces itself at
    v0 to 2 and v1 to 3, and resigns (EndQuorumEpoch) at each one's version."""
    async def scenario() -> None:
        port, port2, port3 = free_ports(3)
        old, new = FakeVoter(2, OLD, port2), FakeVoter(3, dict(apis.SUPPORTED_APIS), port3)
        await old.start()
        await new.start()
        host = _node_config(tmp_path, port, {1: port, 2: port2, 3: port3},
                            **{"controller.quorum.election.timeout.ms": "100"})
        await host.start()
        try:
            await _until(lambda: host.core.is_leader and bool(
                old.received(apis.BEGIN_QUORUM_EPOCH)) and bool(
                new.received(apis.BEGIN_QUORUM_EPOCH)))
            epoch = host.core.epoch
        finally:
            await host.stop(graceful=True)
            await old.close()
            await new.close()
        votes = old.received(apis.VOTE)
        assert votes and all(v == 0 for v, _ in votes)
        assert all(isinstance(msg, m.VoteRequest) and not msg.pre_vote for _, msg in votes)
        assert (0, m.VoteRequest(CLUSTER_ID, epoch, 1, 0, 0)) in votes
        assert old.received(apis.BEGIN_QUORUM_EPOCH)[0] == (
            0, m.BeginQuorumEpochRequest(CLUSTER_ID, 1, epoch))
        assert all(v == 0 for v, _ in old.received(apis.END_QUORUM_EPOCH))
        assert [(e.api_key, e.api_version) for e in old.refused] == [(apis.API_VERSIONS, OUR_API_VERSIONS)]
        new_votes = new.received(apis.VOTE)
        assert {v for v, _ in new_votes} == {2}
        assert any(isinstance(msg, m.VoteRequest) and msg.pre_vote for _, msg in new_votes)
        assert new.received(apis.BEGIN_QUORUM_EPOCH)[0] == (
            1, m.BeginQuorumEpochRequest(CLUSTER_ID, 1, epoch, voter_id=3))
        assert all(v == 1 for v, _ in new.received(apis.END_QUORUM_EPOCH))
        assert new.refused == []

    caplog.set_level(logging.WARNING, logger="reference_node.server.peers")
    asyncio.run(scenario())
    assert any("Vote (pre-vote) to voter 2" in w and "ours 2..2, theirs 0..0" in w
               for w in _warnings(caplog)), _warnings(caplog)


def test_follower_of_a_leader_without_a_common_fetch_sends_nothing_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """Voter 2 leads (it announces itself with BeginQuorumEpoch v0) but speaks Fetch only up to
    v11: the node's fetches fail before sending, again and again, with one warning."""
    async def scenario() -> None:
        port, port2, port3 = free_ports(3)
        leader = FakeVoter(2, OLD, port2)
        leader.leader_epoch = 5
        await leader.start()
        host = _node_config(tmp_path, port, {1: port, 2: port2, 3: port3}, **{
            "controller.quorum.election.timeout.ms": "10000",
            "controller.quorum.fetch.timeout.ms": "10000",
            "controller.quorum.request.timeout.ms": "100",
        })
        await host.start()
        try:
            async with await AsyncKafkaConnection.open("127.0.0.1", port, "fake-2", 5) as conn:
                await conn.handshake()
                begin = m.BeginQuorumEpochRequest(CLUSTER_ID, 2, 5, voter_id=1)
                version = conn.version_for(apis.BEGIN_QUORUM_EPOCH, OLD[apis.BEGIN_QUORUM_EPOCH])
                answer = await conn.request(translate.request_to_kio(begin, ME, version))
            assert translate.response_from_kio(apis.BEGIN_QUORUM_EPOCH, answer).error == \
                m.ErrorCode.none
            assert (host.core.leader_id, host.core.epoch) == (2, 5)
            await _until(lambda: _fetch_failures(caplog) >= 4)
        finally:
            await host.stop(graceful=False)
            await leader.close()
        assert leader.received(apis.FETCH) == []
        assert leader.refused == [leader.refused[0]]  # only the ApiVersions v3 retry

    caplog.set_level(logging.DEBUG, logger="reference_node.server")
    asyncio.run(scenario())
    warnings = _warnings(caplog)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("Fetch to voter 2 at 127.0.0.1:")
    assert "ours 12..17, theirs 4..11" in warnings[0]


def _fetch_failures(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.name == "reference_node.server.peer_rpc"
               and r.getMessage().startswith("FetchRequest to 2 failed"))


def test_node_answers_an_older_voters_requests_at_their_versions(tmp_path: Path) -> None:
    """The other direction: a voter that speaks v0 gets v0 answers the node decoded correctly."""
    async def scenario() -> None:
        port, port2, port3 = free_ports(3)
        host = _node_config(tmp_path, port, {1: port, 2: port2, 3: port3}, **{
            "controller.quorum.election.timeout.ms": "10000",
            "controller.quorum.fetch.timeout.ms": "10000",
        })
        await host.start()
        try:
            async with await AsyncKafkaConnection.open("127.0.0.1", port, "old-2", 5) as conn:
                assert await conn.handshake() == apis.SUPPORTED_APIS

                async def send_v0(msg: m.Request) -> m.Response:
                    answer = await conn.request(translate.request_to_kio(msg, ME, 0))
                    assert answer.__version__ == 0
                    return translate.response_from_kio(translate.RAFT_REQUEST_KEYS[type(msg)],
                                                       answer)

                assert await send_v0(m.VoteRequest(CLUSTER_ID, 3, 2, 0, 0)) == \
                    m.VoteResponse(m.ErrorCode.none, -1, 3, True)
                assert (host.core.epoch, host.core.voted_id) == (3, 2)
                assert await send_v0(m.BeginQuorumEpochRequest(CLUSTER_ID, 2, 3)) == \
                    m.BeginQuorumEpochResponse(m.ErrorCode.none, 2, 3)
                assert (host.core.leader_id, host.core.epoch) == (2, 3)
                # v0 carries the successors in PreferredSuccessors: the node, first, campaigns.
                assert await send_v0(m.EndQuorumEpochRequest(CLUSTER_ID, 2, 3, (1, 3))) == \
                    m.EndQuorumEpochResponse(m.ErrorCode.none, 2, 3)
        finally:
            await host.stop(graceful=False)

    asyncio.run(scenario())
