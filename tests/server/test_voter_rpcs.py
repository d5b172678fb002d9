"""KIP-853's voter RPCs on real node processes: each bad AddRaftVoter / RemoveRaftVoter /
UpdateRaftVoter gets Kafka's error and changes nothing (the leader's DescribeQuorum is the same
before and after: voters, directory ids, log end).

The quorum is dynamic: node 1 formatted `--standalone` (the one voter), nodes 2 and 3 formatted
`--no-initial-controllers` and started with `controller.quorum.bootstrap.servers`, so they are
observers that found the leader through node 1."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from reference_node.properties import render
from reference_node.storage.meta import MetaProperties
from reference_node.wire import (
    ADD_RAFT_VOTER,
    API_VERSIONS,
    DESCRIBE_QUORUM,
    REMOVE_RAFT_VOTER,
    UPDATE_RAFT_VOTER,
    KafkaClient,
)
from reference_node.wire.requests import (
    add_raft_voter_request,
    describe_quorum_request,
    remove_raft_voter_request,
    update_raft_voter_request,
)
from testkit.cluster import CLUSTER_ID, Cluster, free_ports

LISTENER = "CONTROLLER"
FAST = {"controller.quorum.fetch.timeout.ms": "1000",
        "controller.quorum.election.timeout.ms": "500"}


class DynamicCluster(Cluster):
    """`testkit.cluster.Cluster`'s processes, formatted for a dynamic quorum (KIP-853): node 1
    `--standalone`, the others `--no-initial-controllers`, every node with node 1 as its
    bootstrap server and no `controller.quorum.voters`."""

    def __init__(self, root: Path, size: int = 3, extra: dict[str, str] | None = None) -> None:
        # Cluster.__init__ would format a static quorum; only its process handling is reused.
        self.root = root
        self.ids = list(range(1, size + 1))
        self.ports = dict(zip(self.ids, free_ports(size), strict=True))
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.tls = None
        self.ssl = None
        formats = []
        for i in self.ids:
            props = {
                "node.id": str(i),
                "process.roles": "controller",
                "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.ports[1]}",
                "listeners": f"{LISTENER}://127.0.0.1:{self.ports[i]}",
                "metadata.log.dir": str(self.data_dir(i)),
                **(extra or {}),
            }
            self.config(i).write_text(render(props))
            flag = "--standalone" if i == 1 else "--no-initial-controllers"
            formats.append(subprocess.Popen(
                [sys.executable, "-m", "harness.cli", "node", "format", "--config",
                 str(self.config(i)), "--cluster-id", CLUSTER_ID, flag],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        for proc in formats:
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0, out.decode()

    def directory_id(self, i: int) -> uuid.UUID:
        directory_id = MetaProperties.load(self.data_dir(i)).directory_uuid
        assert directory_id is not None
        return directory_id

    def caught_up(self, observers: list[int], timeout: float = 15.0) -> Any:
        """The leader's DescribeQuorum once every one of `observers` has fetched to its end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            part = self.describe(1)
            if part is not None and int(part.error_code) == 0:
                end = next(v.log_end_offset for v in part.current_voters if v.replica_id == 1)
                seen = {o.replica_id: o.log_end_offset for o in part.observers}
                if all(seen.get(o) == end for o in observers):
                    return part
            time.sleep(0.05)
        raise TimeoutError(f"observers {observers} did not catch up; logs in {self.root}")


def call(port: int, api_key: int, build: Callable[[int], Any], timeout: float = 10.0) -> Any:
    with KafkaClient("127.0.0.1", port, timeout=timeout) as client:
        return client.call(api_key, build)


def state(cluster: DynamicCluster) -> tuple[Any, ...]:
    """What a refused change must leave as it was: the leader, its epoch, its log end, and the
    voters with their directory ids."""
    part = cluster.describe(1)
    assert part is not None and int(part.error_code) == 0
    voters = sorted((v.replica_id, v.replica_directory_id) for v in part.current_voters)
    end = next(v.log_end_offset for v in part.current_voters if v.replica_id == 1)
    return int(part.leader_id), int(part.leader_epoch), int(end), voters


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DynamicCluster]:
    cluster = DynamicCluster(tmp_path_factory.mktemp("voters"), extra=FAST)
    try:
        cluster.start()
        assert cluster.wait_leader(timeout=20.0) == 1
        cluster.caught_up([2, 3])
        yield cluster
    finally:
        cluster.stop_all()


def add(cluster: DynamicCluster, voter_id: int, directory_id: uuid.UUID | None,
        listeners: list[tuple[str, str, int]] | None = None, timeout_ms: int = 500,
        port: int | None = None, cluster_id: str | None = None) -> Any:
    if listeners is None:
        listeners = [(LISTENER, "127.0.0.1", cluster.ports.get(voter_id, 1))]
    return call(port or cluster.ports[1], ADD_RAFT_VOTER, lambda v: add_raft_voter_request(
        v, voter_id, directory_id, listeners, timeout_ms=timeout_ms, cluster_id=cluster_id))


def remove(cluster: DynamicCluster, voter_id: int, directory_id: uuid.UUID | None) -> Any:
    return call(cluster.ports[1], REMOVE_RAFT_VOTER,
                lambda v: remove_raft_voter_request(v, voter_id, directory_id))


def test_api_versions_lists_the_voter_rpcs(quorum: DynamicCluster) -> None:
    with KafkaClient("127.0.0.1", quorum.ports[1]) as client:
        theirs = client.api_versions()
    assert {ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, UPDATE_RAFT_VOTER} <= set(theirs)
    assert API_VERSIONS in theirs


def test_describe_quorum_v2_names_directories_and_voter_endpoints(quorum: DynamicCluster
                                                                  ) -> None:
    with KafkaClient("127.0.0.1", quorum.ports[1]) as client:
        response = client.call(DESCRIBE_QUORUM, describe_quorum_request)
    part = response.topics[0].partitions[0]
    assert [(v.replica_id, v.replica_directory_id) for v in part.current_voters] == [
        (1, quorum.directory_id(1))]
    # The observers' directory ids come from their Fetch requests (v17's ReplicaDirectoryId).
    assert sorted((o.replica_id, o.replica_directory_id) for o in part.observers) == [
        (2, quorum.directory_id(2)), (3, quorum.directory_id(3))]
    assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners])
            for n in response.nodes] == [(1, [(LISTENER, "127.0.0.1", quorum.ports[1])])]


@pytest.mark.parametrize(("case", "expected"), [
    ("negative id", ErrorCode.invalid_request),
    ("no directory id", ErrorCode.invalid_request),
    ("no listeners", ErrorCode.invalid_request),
    ("no controller listener", ErrorCode.invalid_request),
    ("other cluster", ErrorCode.inconsistent_cluster_id),
    ("not the leader", ErrorCode.not_leader_or_follower),
    ("a voter already", ErrorCode.duplicate_voter),
])
def test_bad_add_gets_kafkas_error_and_changes_nothing(quorum: DynamicCluster, case: str,
                                                       expected: ErrorCode) -> None:
    before = state(quorum)
    two = quorum.directory_id(2)
    response = {
        "negative id": lambda: add(quorum, -5, two),
        "no directory id": lambda: add(quorum, 2, None),
        "no listeners": lambda: add(quorum, 2, two, listeners=[]),
        "no controller listener": lambda: add(
            quorum, 2, two, listeners=[("PLAINTEXT", "127.0.0.1", quorum.ports[2])]),
        "other cluster": lambda: add(quorum, 2, two, cluster_id="another-cluster-id-0000"),
        "not the leader": lambda: add(quorum, 2, two, port=quorum.ports[3]),
        "a voter already": lambda: add(quorum, 1, quorum.directory_id(1)),
    }[case]()
    assert response.error_code == expected, response
    assert response.error_message  # one line saying why
    assert state(quorum) == before


def test_adding_an_unknown_replica_times_out_and_changes_nothing(quorum: DynamicCluster) -> None:
    before = state(quorum)
    response = add(quorum, 9, uuid.uuid4(), [(LISTENER, "127.0.0.1", 1)], timeout_ms=300)
    assert response.error_code == ErrorCode.request_timed_out, response
    assert "did not answer ApiVersions" in response.error_message
    assert state(quorum) == before


def test_adding_a_known_replica_under_another_directory_times_out(quorum: DynamicCluster
                                                                  ) -> None:
    """Observer 2 is caught up, but a replica of id 2 with another directory never fetched: it
    is not the replica that is caught up (a re-formatted disk would be exactly this)."""
    before = state(quorum)
    response = add(quorum, 2, uuid.uuid4(), timeout_ms=300)
    assert response.error_code == ErrorCode.request_timed_out, response
    assert state(quorum) == before


def test_removing_a_voter_under_another_directory_is_voter_not_found(quorum: DynamicCluster
                                                                     ) -> None:
    before = state(quorum)
    response = remove(quorum, 1, uuid.uuid4())
    assert response.error_code == ErrorCode.voter_not_found, response
    assert state(quorum) == before


def test_removing_the_last_voter_is_voter_not_found(quorum: DynamicCluster) -> None:
    before = state(quorum)
    response = remove(quorum, 1, quorum.directory_id(1))
    assert response.error_code == ErrorCode.voter_not_found, response
    assert "last voter" in response.error_message
    assert state(quorum) == before


def test_bad_remove_and_update_get_kafkas_errors(quorum: DynamicCluster) -> None:
    before = state(quorum)
    assert remove(quorum, -1, quorum.directory_id(1)).error_code == ErrorCode.invalid_request
    assert remove(quorum, 1, None).error_code == ErrorCode.invalid_request
    epoch = before[1]
    me = [(LISTENER, "127.0.0.1", quorum.ports[1])]
    stale = call(quorum.ports[1], UPDATE_RAFT_VOTER, lambda v: update_raft_voter_request(
        v, 1, quorum.directory_id(1), me, current_leader_epoch=epoch - 1))
    assert stale.error_code == ErrorCode.fenced_leader_epoch
    assert (stale.current_leader.leader_id, stale.current_leader.leader_epoch) == (1, epoch)
    bad_range = call(quorum.ports[1], UPDATE_RAFT_VOTER, lambda v: update_raft_voter_request(
        v, 1, quorum.directory_id(1), me, current_leader_epoch=epoch, kraft_versions=(1, 0)))
    assert bad_range.error_code == ErrorCode.invalid_request
    assert state(quorum) == before


def test_an_add_of_a_replica_that_cannot_be_reached_is_refused_at_once(quorum: DynamicCluster
                                                                       ) -> None:
    """Kafka's AddVoterHandler asks the replica's ApiVersions first: when the request cannot be
    sent (nothing listens there), the add gets REQUEST_TIMED_OUT at once, not after the
    request's timeout, and nothing changes."""
    before = state(quorum)
    started = time.monotonic()
    response = add(quorum, 9, uuid.uuid4(), [(LISTENER, "127.0.0.1", 1)], timeout_ms=3000)
    assert time.monotonic() - started < 2.0, "refused at once, not after its own timeout"
    assert response.error_code == ErrorCode.request_timed_out, response
    assert "NETWORK_EXCEPTION" in response.error_message.upper()
    assert state(quorum) == before


def test_adding_a_replica_that_stopped_fetching_times_out(quorum: DynamicCluster) -> None:
    """Observer 3 was caught up, then stopped: it does not answer the leader's ApiVersions, and
    the leader does not add it. (Last in this module: node 3 stays down.)"""
    before = state(quorum)
    quorum.kill(3)
    time.sleep(1.2)  # past controller.quorum.fetch.timeout.ms
    response = add(quorum, 3, quorum.directory_id(3), timeout_ms=500)
    assert response.error_code == ErrorCode.request_timed_out, response
    assert state(quorum) == before


def test_a_voter_announces_its_advertised_endpoint_itself(tmp_path: Path) -> None:
    """KIP-853 end to end: node 2 is added under the name `localhost` (the leader's ApiVersions
    reaches it there), but advertises its controller listener as 127.0.0.1; as a voter following
    node 1 it sends UpdateRaftVoter on its own (Kafka's pollFollowerAsVoter, after 3 x the fetch
    timeout), and the voter set names it as it advertises itself."""
    cluster = DynamicCluster(tmp_path, size=2, extra=FAST)
    port = cluster.ports[2]
    config = cluster.config(2)
    config.write_text(config.read_text() + f"advertised.listeners={LISTENER}://127.0.0.1:{port}\n")
    try:
        cluster.start()
        assert cluster.wait_leader(timeout=20.0) == 1
        cluster.caught_up([2])
        added = add(cluster, 2, cluster.directory_id(2), [(LISTENER, "localhost", port)],
                    timeout_ms=5000)
        assert added.error_code == ErrorCode.none, added
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            with KafkaClient("127.0.0.1", cluster.ports[1]) as client:
                nodes = client.call(DESCRIBE_QUORUM, describe_quorum_request).nodes
            named = {n.node_id: [(x.host, x.port) for x in n.listeners] for n in nodes}
            if named.get(2) == [("127.0.0.1", port)]:
                break
            time.sleep(0.2)
        assert named.get(2) == [("127.0.0.1", port)], named
    finally:
        cluster.stop_all()


def test_a_static_quorum_refuses_voter_changes(tmp_path: Path) -> None:
    """kraft.version 0 (controller.quorum.voters, no bootstrap checkpoint): voters never
    change, and each change says so with UNSUPPORTED_VERSION."""
    with Cluster(tmp_path, size=1, extra=FAST) as cluster:
        cluster.start()
        cluster.wait_leader(timeout=20.0)
        port = cluster.ports[1]
        added = call(port, ADD_RAFT_VOTER, lambda v: add_raft_voter_request(
            v, 2, uuid.uuid4(), [(LISTENER, "127.0.0.1", free_ports(1)[0])], timeout_ms=300))
        removed = call(port, REMOVE_RAFT_VOTER,
                       lambda v: remove_raft_voter_request(v, 1, uuid.uuid4()))
        part = cluster.describe(1)
    assert added.error_code == ErrorCode.unsupported_version, added
    assert "kraft.version" in added.error_message
    assert removed.error_code == ErrorCode.unsupported_version, removed
    assert part is not None and [v.replica_id for v in part.current_voters] == [1]
