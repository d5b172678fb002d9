"""A forged Raft request cannot brick a cluster (issue 20).

Anyone who reaches the port and reads the cluster id from DescribeQuorum could send the followers
a well-formed Vote in epoch 2**31 - 1: they granted it, persisted that epoch, failed about 2 s
later on an int32 overflow (their next Vote) and at every restart. Now they refuse it
(INVALID_REQUEST), keep their epoch, stay up and restart clean; a node that already holds such an
epoch refuses to start with one line naming the file and the fix.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.wire import FETCH, PRODUCE, KafkaClient
from reference_node.wire.apis import response_class
from reference_node.wire.codec import decode_response, encode_request
from reference_node.wire.records import build_append_batch, read_values
from reference_node.wire.requests import fetch_request, produce_request
from testkit.cluster import CLUSTER_ID, Cluster

pytestmark = pytest.mark.slow

TOP = 2**31 - 1
QUORUM_STATE = Path("__cluster_metadata-0") / "quorum-state"
SLACK = 3
"""Epochs a real election may add meanwhile on a loaded machine (the forged one adds 2**31)."""


def call(port: int, msg: m.Request) -> Any:
    request = translate.request_to_kio(msg, Endpoint("127.0.0.1", 1))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(encode_request(3, request, "forger"))
        got = b""
        while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "big"):
            chunk = sock.recv(65536)
            assert chunk, "the node closed the connection instead of answering"
            got += chunk
    _, body = decode_response(got[4:], response_class(request.__api_key__, request.__version__))
    return body


def produce(cluster: Cluster, values: list[int]) -> None:
    """Until acknowledged (a young cluster may change leaders), as a client retries."""
    deadline = time.monotonic() + 30
    while True:
        port = cluster.ports[cluster.wait_leader(timeout=30)]
        with KafkaClient("127.0.0.1", port, timeout=10.0) as c:
            resp = c.call(PRODUCE, lambda v: produce_request(v, build_append_batch(values)))
        if resp.responses[0].partition_responses[0].error_code == 0:
            return
        assert time.monotonic() < deadline, resp
        time.sleep(0.2)


def values(port: int) -> list[int]:
    with KafkaClient("127.0.0.1", port, timeout=10.0) as c:
        resp = c.call(FETCH, lambda v: fetch_request(v, 0, max_bytes=8 << 20))
    return [v for _, v in read_values(resp.responses[0].partitions[0].records) if v is not None]


def stored_epoch(cluster: Cluster, i: int) -> int:
    return int(json.loads((cluster.data_dir(i) / QUORUM_STATE).read_text())["leaderEpoch"])


def test_forged_top_epoch_is_refused_and_the_cluster_lives_on(tmp_path: Path) -> None:
    with Cluster(tmp_path) as cluster:
        cluster.start()
        leader = cluster.wait_leader(timeout=30)
        produce(cluster, list(range(20)))
        leader = cluster.wait_leader(timeout=30)
        epoch = cluster.describe(leader, timeout=5.0).leader_epoch
        followers = [i for i in cluster.ids if i != leader]
        forged = [
            m.VoteRequest(CLUSTER_ID, TOP, leader, TOP, 10**9, False, -1),  # as filed
            m.VoteRequest(CLUSTER_ID, TOP, leader, TOP - 1, 10**9, False, -1),
            m.VoteRequest(CLUSTER_ID, TOP, followers[0], 0, 10**9, False, -1),
            m.BeginQuorumEpochRequest(CLUSTER_ID, leader, TOP, -1),
        ]
        for i in followers:
            for msg in forged:
                part = call(cluster.ports[i], msg).topics[0].partitions[0]
                assert part.error_code == m.ErrorCode.invalid_request, (i, msg)
                assert not getattr(part, "vote_granted", False)
                assert epoch <= part.leader_epoch <= epoch + SLACK
        # past an election timeout (the old nodes died about 2 s after granting)
        time.sleep(3.0)
        for i in cluster.ids:
            assert cluster.procs[i].poll() is None, f"node {i} died; see {cluster.root}"
            described = cluster.describe(i, timeout=5.0)
            assert described is not None and epoch <= described.leader_epoch <= epoch + SLACK
            assert epoch <= stored_epoch(cluster, i) <= epoch + SLACK
        # each follower restarts clean, and nothing acknowledged is lost
        for i in followers:
            assert cluster.terminate(i) == 0
            cluster.start(i)
        produce(cluster, [20])
        acknowledged = set(range(21))  # an unacknowledged retry may add a duplicate, no more
        assert acknowledged <= set(values(cluster.ports[cluster.wait_leader(timeout=30)]))


def test_a_node_holding_an_unusable_epoch_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, size=1)
    path = cluster.data_dir(1) / QUORUM_STATE
    path.write_text(json.dumps({"leaderId": -1, "leaderEpoch": TOP, "votedId": 1,
                                "appliedOffset": 0, "currentVoters": [{"voterId": 1}],
                                "data_version": 1}))
    out = subprocess.run([sys.executable, "-m", "harness.cli", "node", "--config",
                          str(cluster.config(1))], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    lines = [line for line in (out.stdout + out.stderr).splitlines() if "ERROR" in line]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert str(path) in lines[0] and f"leaderEpoch {TOP}" in lines[0]
    assert "leader-epoch-checkpoint" in lines[0]  # the fix
