"""A 3-node cluster on SSL controller listeners with required client certificates (real processes).

The cluster elects and commits through a client holding a certificate of the cluster's CA. Anyone
else who can reach the ports, speaking plaintext, TLS without a certificate, or TLS with a
certificate of another CA (one made to look like a node's), is refused before a request is read:
no produce, no fetch, and no Vote or replica Fetch sent as a peer would send it, while the same
requests with the cluster's certificate are answered. The forged votes carry an epoch far above the
cluster's, so that a node which had read one would show it.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from harness.targets.reference_tls import CertificateAuthority
from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.wire import KafkaClient, WireError, tls
from reference_node.wire.records import build_append_batch, read_values
from reference_node.wire.requests import fetch_request, produce_request
from testkit.cluster import CLUSTER_ID, Cluster

pytestmark = pytest.mark.slow

FORGED_EPOCH_JUMP = 1000  # far beyond what elections reach during the test
REFUSED_VALUE = 666_666
OUTSIDERS = ("plaintext", "tls-without-certificate", "certificate-of-another-ca")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("tls-cluster"), 3, tls=True) as c:
        c.start()
        c.wait_leader(timeout=30)
        yield c


@pytest.fixture(scope="module")
def outsiders(tmp_path_factory: pytest.TempPathFactory, cluster: Cluster) -> dict[str, Any]:
    """How each kind of outsider dials: None is plaintext. All trust the cluster's CA, so that
    only the node's check of *their* side can refuse them."""
    assert cluster.tls is not None
    root = tmp_path_factory.mktemp("outsider")
    (root / "node2.pem").write_bytes(CertificateAuthority("impostor CA").issue(
        "node2", ["127.0.0.1"]))
    trust = str(cluster.tls.dir / "ca.pem")
    return {
        "plaintext": None,
        "tls-without-certificate": tls.client_context(tls.TlsSettings(truststore=trust)),
        "certificate-of-another-ca": tls.client_context(
            tls.TlsSettings(keystore=str(root / "node2.pem"), truststore=trust)),
    }


def _call(cluster: Cluster, node: int, message: Any, context: ssl.SSLContext | None) -> Any:
    with KafkaClient("127.0.0.1", cluster.ports[node], timeout=5.0, ssl=context) as client:
        return client.request(message)


def _leader_and_epoch(cluster: Cluster) -> tuple[int, int]:
    leader = cluster.wait_leader(timeout=30)
    part = cluster.describe(leader)
    assert part is not None
    return leader, int(part.leader_epoch)


def _produce(cluster: Cluster, node: int, value: int, context: ssl.SSLContext | None) -> Any:
    return _call(cluster, node, produce_request(9, build_append_batch([value])), context)


def _read_all(cluster: Cluster, leader: int) -> list[tuple[int, int]]:
    body = _call(cluster, leader, fetch_request(12, 0, max_bytes=1 << 20), cluster.ssl)
    part = body.responses[0].partitions[0]
    assert part.error_code == ErrorCode.none
    return [(o, v) for o, v in read_values(part.records) if o < part.high_watermark]


def _peer_requests(peer: int, epoch: int) -> tuple[m.VoteRequest, m.FetchRequest]:
    """A Vote in the name of voter `peer` that would win any other node over (a later epoch, a
    longer log), and a replica Fetch in its name."""
    vote = m.VoteRequest(CLUSTER_ID, epoch + FORGED_EPOCH_JUMP, peer, epoch, 10**9)
    fetch = m.FetchRequest(CLUSTER_ID, peer, epoch, 0, 0, max_wait_ms=0)
    return vote, fetch


def _follower(cluster: Cluster, leader: int) -> int:
    return next(i for i in cluster.ids if i != leader)


def test_a_tls_cluster_elects_and_commits_through_a_certified_client(cluster: Cluster) -> None:
    leader, _ = _leader_and_epoch(cluster)
    answer = _produce(cluster, leader, 4242, cluster.ssl)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none
    # committed: below the high watermark, on the leader's log as clients read it
    assert (int(part.base_offset), 4242) in _read_all(cluster, leader)


@pytest.mark.parametrize("who", OUTSIDERS)
def test_a_client_without_a_valid_certificate_cannot_produce_or_fetch(
        cluster: Cluster, outsiders: dict[str, Any], who: str) -> None:
    leader, _ = _leader_and_epoch(cluster)
    context = outsiders[who]
    with pytest.raises(WireError):
        _produce(cluster, leader, REFUSED_VALUE, context)
    with pytest.raises(WireError):
        _call(cluster, leader, fetch_request(12, 0), context)
    assert REFUSED_VALUE not in [v for _, v in _read_all(cluster, leader)]


@pytest.mark.parametrize("who", OUTSIDERS)
def test_a_peer_without_a_valid_certificate_cannot_vote_or_fetch(
        cluster: Cluster, outsiders: dict[str, Any], who: str) -> None:
    leader, epoch = _leader_and_epoch(cluster)
    peer = _follower(cluster, leader)
    vote, fetch = _peer_requests(peer, epoch)
    me = Endpoint("127.0.0.1", cluster.ports[peer])
    for node in (i for i in cluster.ids if i != peer):
        with pytest.raises(WireError):
            _call(cluster, node, translate.request_to_kio(vote, me), outsiders[who])
    with pytest.raises(WireError):
        _call(cluster, leader, translate.request_to_kio(fetch, me), outsiders[who])
    # no node read the forged vote: none jumped to its epoch or voted in it
    for node in cluster.ids:
        part = cluster.describe(node)
        assert part is not None and int(part.leader_epoch) < epoch + FORGED_EPOCH_JUMP
        assert all(e.get("epoch", 0) < epoch + FORGED_EPOCH_JUMP for e in cluster.events(node))


def test_the_same_peer_requests_with_the_clusters_certificate_are_answered(
        cluster: Cluster) -> None:
    """The control: the refused requests were well-formed (a Vote at the current epoch changes
    nothing, and is answered)."""
    leader, epoch = _leader_and_epoch(cluster)
    peer = _follower(cluster, leader)
    _, fetch = _peer_requests(peer, epoch)
    current_vote = m.VoteRequest(CLUSTER_ID, epoch, peer, 0, 0)
    me = Endpoint("127.0.0.1", cluster.ports[peer])
    answer = _call(cluster, leader, translate.request_to_kio(current_vote, me), cluster.ssl)
    part = answer.topics[0].partitions[0]
    assert part.error_code == ErrorCode.none and not part.vote_granted
    answer = _call(cluster, leader, translate.request_to_kio(fetch, me), cluster.ssl)
    assert answer.responses[0].partitions[0].error_code == ErrorCode.none


def test_kraft_quorum_reads_the_tls_cluster_with_a_command_config(cluster: Cluster,
                                                                  tmp_path: Path) -> None:
    from reference_node import quorum_cli

    assert cluster.tls is not None
    plain = quorum_cli.main(["--bootstrap-controller", cluster.bootstrap, "--timeout", "3",
                             "describe", "--status"])
    assert plain == quorum_cli.EXIT_FAILED
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                      f"ssl.truststore.location={cluster.tls.dir / 'ca.pem'}\n"
                      f"ssl.keystore.type=PEM\nssl.keystore.location={cluster.tls.dir}/client.pem\n")
    assert quorum_cli.main(["--bootstrap-controller", cluster.bootstrap, "--command-config",
                            str(config), "describe", "--status"]) == quorum_cli.EXIT_OK

