"""A client of the KRaft quorum: find its leader, describe it, and change its voters (KIP-853).

What `kraft quorum` (`quorum_cli.py`, the output of kafka-metadata-quorum.sh) and the harness's
membership nemesis both call; plain functions, no command line.

Theory of operation. DescribeQuorum and the voter RPCs must reach the leader. `find_leader` tries
each bootstrap address in turn: the node that answers DescribeQuorum without error is the leader
(only the leader can describe the quorum), and a node that answers NOT_LEADER_OR_FOLLOWER naming
a leader sends us there (its address from the DescribeQuorum v2 node list, else from Metadata).
While some node answers but knows no leader (an election), it tries again until its deadline.

`add_voter` and `remove_voter` then send AddRaftVoter / RemoveRaftVoter to the leader found, as
Kafka's admin client does, and do not retry: the leader answers once the new voter set has
committed (NONE), or with Kafka's error, raised as `VoterChangeError` (REQUEST_TIMED_OUT: another
change is uncommitted, or the new voter did not catch up in time; DUPLICATE_VOTER;
VOTER_NOT_FOUND, also for the last voter; UNSUPPORTED_VERSION: a static quorum, kraft.version 0;
NOT_LEADER_OR_FOLLOWER: leadership moved, the change may still commit under the next leader).
No leader found is a `QuorumError`, a `WireError` whose request was certainly not sent; a
`WireError` on the change request itself leaves its outcome unknown (`certainly_not_sent` says).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from ssl import SSLContext
from typing import Any

from kio.schema.errors import ErrorCode

from reference_node.raft.voters import ZERO_UUID_TEXT
from reference_node.raft.voters import kafka_uuid as kafka_uuid
from reference_node.raft.voters import parse_kafka_uuid as parse_kafka_uuid
from reference_node.wire import (
    ADD_RAFT_VOTER,
    DESCRIBE_QUORUM,
    METADATA,
    METADATA_PARTITION,
    METADATA_TOPIC,
    REMOVE_RAFT_VOTER,
    KafkaClient,
    WireError,
)
from reference_node.wire.requests import (
    Listener,
    add_raft_voter_request,
    describe_quorum_request,
    metadata_request,
    remove_raft_voter_request,
)

ZERO_UUID = ZERO_UUID_TEXT
RETRY_BACKOFF_S = 0.25
"""Between attempts of a voter change the node found as leader refused as not the leader."""
DESCRIBE_TIMEOUT_S = 10.0
"""How long `add_voter` / `remove_voter` look for the leader at most (within their timeout)."""
REPLY_GRACE_S = 20.0
"""How long past the leader's own wait (TimeoutMs) a voter change's answer may take: the commit,
and more than the node's own grace (`client_api.VOTER_CHANGE_GRACE_S`), so that a slow change is
answered REQUEST_TIMED_OUT by the leader rather than cut off here."""
_BACKOFF = 0.2


class QuorumError(WireError):
    """No node described the quorum (none reachable, none knows a leader, or an answer we cannot
    use); the message says why, node by node. Nothing was sent that could change the quorum."""

    def __init__(self, message: str) -> None:
        super().__init__(message, certainly_not_sent=True)


class VoterChangeError(Exception):
    """The leader refused a voter change, or could not tell it done: Kafka's error `code`, its
    `name` (e.g. VOTER_NOT_FOUND) and the leader's one-line `message`."""

    def __init__(self, code: int, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.code = code
        self.name = name
        self.message = message


# -- DescribeQuorum, as Kafka's QuorumInfo


@dataclass(frozen=True, slots=True)
class Replica:
    replica_id: int
    directory_id: str  # Kafka's Uuid text; ZERO_UUID: unknown
    log_end_offset: int
    last_fetch_timestamp: int  # -1: unknown
    last_caught_up_timestamp: int  # -1: unknown


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """The parts of a DescribeQuorum response the tools read (Kafka's QuorumInfo)."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: list[Replica]
    observers: list[Replica]
    endpoints: dict[int, list[str]] = field(default_factory=dict)
    """The voters' endpoints (DescribeQuorum v2 Nodes), as NAME://HOST:PORT."""


@dataclass(frozen=True, slots=True)
class Leader:
    """The leader as `find_leader` met it: where it answered, and what it said."""

    address: tuple[str, int]
    cluster_id: str | None
    info: QuorumInfo


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """`HOST:PORT[,HOST:PORT...]`; ValueError naming the bad entry."""
    addresses = [parse_address(a) for a in text.split(",") if a.strip()]
    if not addresses:
        raise ValueError("no HOST:PORT given")
    return addresses


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad address {text!r}: expected HOST:PORT")
    return host.strip("[]"), int(port)


def quorum_info(partition: Any, nodes: tuple[Any, ...] = ()) -> QuorumInfo:
    endpoints = {
        int(node.node_id): [_endpoint(listener) for listener in node.listeners] for node in nodes
    }
    return QuorumInfo(
        leader_id=int(partition.leader_id),
        leader_epoch=int(partition.leader_epoch),
        high_watermark=int(partition.high_watermark),
        voters=[_replica(s) for s in partition.current_voters],
        observers=[_replica(s) for s in partition.observers],
        endpoints=endpoints,
    )


def _replica(state: Any) -> Replica:
    return Replica(
        replica_id=int(state.replica_id),
        directory_id=kafka_uuid(getattr(state, "replica_directory_id", None)),
        log_end_offset=int(state.log_end_offset),
        last_fetch_timestamp=int(getattr(state, "last_fetch_timestamp", -1)),
        last_caught_up_timestamp=int(getattr(state, "last_caught_up_timestamp", -1)),
    )


def _endpoint(listener: Any) -> str:
    host = f"[{listener.host}]" if ":" in listener.host else listener.host
    return f"{listener.name}://{host}:{listener.port}"


# -- finding the leader


def describe(bootstrap: list[tuple[str, int]], timeout: float,
             ssl: SSLContext | None = None) -> tuple[str | None, QuorumInfo]:
    """The cluster id (from Metadata; None if unknown) and the leader's DescribeQuorum."""
    leader = find_leader(bootstrap, timeout, ssl)
    return leader.cluster_id, leader.info


def find_leader(bootstrap: list[tuple[str, int]], timeout: float,
                ssl: SSLContext | None = None) -> Leader:
    """The leader, found from `bootstrap` (over TLS with `ssl`); QuorumError (with the reasons)
    when no node could describe the quorum within `timeout`."""
    deadline = time.monotonic() + timeout
    reasons: list[str] = []
    while True:
        retriable = False
        queue = list(bootstrap)
        tried: set[tuple[str, int]] = set()
        while queue and time.monotonic() < deadline:
            address = queue.pop(0)
            if address in tried:
                continue
            tried.add(address)
            try:
                return _describe_at(address, deadline, ssl)
            except _Redirect as redirect:
                reasons.append(str(redirect))
                retriable = True
                if redirect.leader is not None and redirect.leader not in tried:
                    queue.insert(0, redirect.leader)
            except WireError as exc:
                reasons.append(str(exc))
        if not retriable or time.monotonic() + _BACKOFF >= deadline:
            raise QuorumError("; ".join(reasons[-len(bootstrap) - 2:]) or "no address to try")
        time.sleep(_BACKOFF)


class _Redirect(QuorumError):
    """A node that is not the leader; `leader` is the leader's address when known."""

    def __init__(self, message: str, leader: tuple[str, int] | None) -> None:
        super().__init__(message)
        self.leader = leader


def _describe_at(address: tuple[str, int], deadline: float, ssl: SSLContext | None) -> Leader:
    remaining = max(0.1, deadline - time.monotonic())
    with KafkaClient(*address, client_id="kraft-quorum", timeout=remaining, ssl=ssl) as client:
        response = client.call(DESCRIBE_QUORUM, describe_quorum_request)
        partition = _partition(response)
        error = partition.error_code
        if error == ErrorCode.none:
            info = quorum_info(partition, tuple(getattr(response, "nodes", ())))
            try:
                cluster_id, _ = _cluster_id_and_brokers(client)
            except WireError:
                cluster_id = None
            return Leader(address, cluster_id, info)
        message = f"{client.address}: {error.name}"
        if error != ErrorCode.not_leader_or_follower:
            raise QuorumError(message)
        leader = int(partition.leader_id)
        found = _leader_address(client, response, leader) if leader >= 0 else None
        raise _Redirect(message + (f" (leader {leader})" if leader >= 0 else ""), found)


def _partition(response: Any) -> Any:
    top = getattr(response, "error_code", ErrorCode.none)
    if top != ErrorCode.none:
        raise QuorumError(f"DescribeQuorum failed: {top.name}")
    for topic in response.topics:
        for partition in topic.partitions:
            if (topic.topic_name == METADATA_TOPIC
                    and partition.partition_index == METADATA_PARTITION):
                return partition
    raise QuorumError(f"no {METADATA_TOPIC}-{METADATA_PARTITION} in the DescribeQuorum response")


def _cluster_id_and_brokers(client: KafkaClient) -> tuple[str | None, dict[int, tuple[str, int]]]:
    response = client.call(METADATA, lambda v: metadata_request(v, []))
    brokers = {int(b.node_id): (b.host, int(b.port)) for b in response.brokers}
    return getattr(response, "cluster_id", None), brokers


def _leader_address(client: KafkaClient, response: Any, leader: int) -> tuple[str, int] | None:
    for node in getattr(response, "nodes", ()):
        if int(node.node_id) == leader and node.listeners:
            return node.listeners[0].host, int(node.listeners[0].port)
    try:
        _, brokers = _cluster_id_and_brokers(client)
    except WireError:
        return None
    return brokers.get(leader)


# -- voter changes


def add_voter(bootstrap: str, voter_id: int, directory_id: uuid.UUID,
              endpoints: Sequence[Listener], timeout_s: float = 30.0,
              ssl: SSLContext | None = None) -> None:
    """AddRaftVoter: replica (`voter_id`, `directory_id`), reachable at `endpoints` ((listener
    name, host, port), the controller listener's among them), becomes a voter once it has caught
    up with the leader. Returns once the new voter set has committed; VoterChangeError for the
    leader's refusal, QuorumError when no leader was found, a WireError on the way."""
    deadline = time.monotonic() + timeout_s

    def attempt() -> None:
        leader = find_leader(parse_bootstrap(bootstrap),
                             min(max(deadline - time.monotonic(), 0.1), DESCRIBE_TIMEOUT_S), ssl)
        wait_ms = max(int((deadline - time.monotonic()) * 1000), 0)
        _change(leader, ADD_RAFT_VOTER, lambda v: add_raft_voter_request(
            v, voter_id, directory_id, list(endpoints), timeout_ms=wait_ms), wait_ms / 1000.0,
            ssl)

    _until_a_leader_answers(attempt, deadline)


def remove_voter(bootstrap: str, voter_id: int, directory_id: uuid.UUID,
                 timeout_s: float = 30.0, ssl: SSLContext | None = None) -> None:
    """RemoveRaftVoter: replica (`voter_id`, `directory_id`) stops voting. Returns once the new
    voter set has committed; errors as `add_voter`."""
    deadline = time.monotonic() + timeout_s

    def attempt() -> None:
        leader = find_leader(parse_bootstrap(bootstrap),
                             min(max(deadline - time.monotonic(), 0.1), DESCRIBE_TIMEOUT_S), ssl)
        _change(leader, REMOVE_RAFT_VOTER,
                lambda v: remove_raft_voter_request(v, voter_id, directory_id), 0.0, ssl)

    _until_a_leader_answers(attempt, deadline)


def _until_a_leader_answers(attempt: Any, deadline: float) -> None:
    """Run `attempt` again while the node found as leader says it no longer is (the leadership
    moved between DescribeQuorum and the change, e.g. a leader that removed itself resigned),
    as Kafka's admin client retries NOT_LEADER_OR_FOLLOWER, until `deadline`."""
    while True:
        try:
            attempt()
            return
        except VoterChangeError as exc:
            retriable = exc.code == ErrorCode.not_leader_or_follower.value
            if not retriable or time.monotonic() + RETRY_BACKOFF_S >= deadline:
                raise
        time.sleep(RETRY_BACKOFF_S)


def _change(leader: Leader, api_key: int, build: Any, wait_s: float,
            ssl: SSLContext | None) -> None:
    """Send the change to the leader; VoterChangeError unless it answers NONE."""
    with KafkaClient(*leader.address, client_id="kraft-quorum", timeout=wait_s + REPLY_GRACE_S,
                     ssl=ssl) as client:
        response = client.call(api_key, build)
    code = response.error_code
    if code != ErrorCode.none:
        raise VoterChangeError(int(code.value), code.name.upper(), response.error_message or "")
