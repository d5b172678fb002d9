"""KIP-630 on real nodes: snapshots in Kafka's layout on every node, the log start moving, a
follower that the leader snapshotted past catching up with FetchSnapshot, a restart from a
snapshot, the `kv` workload over the wire, and FetchSnapshot requests no follower sends.

Thresholds are tiny so that a few hundred records give many snapshots: a snapshot every ~2000
bytes of applied records, the log start following each snapshot at once (retention 0), 256-byte
FetchSnapshot chunks, 4 KiB segments (so retention deletes files).
"""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.raft.image import Image, encode_cas, encode_write
from reference_node.server import translate
from reference_node.server.client_api import IMAGE_TOPIC
from reference_node.storage.log import MetadataLog
from reference_node.storage.snapshot import SnapshotFiles, decode_snapshot
from reference_node.wire import FETCH, LIST_OFFSETS, PRODUCE, KafkaClient
from reference_node.wire.apis import response_class
from reference_node.wire.codec import decode_response, encode_request
from reference_node.wire.records import build_append_batch, build_batch, parse_batches
from reference_node.wire.requests import (
    EARLIEST_TIMESTAMP,
    fetch_request,
    list_offsets_request,
    produce_request,
)
from testkit.cluster import CLUSTER_ID, Cluster

pytestmark = pytest.mark.slow

ErrorCode = m.ErrorCode
SNAPSHOTS = {
    "metadata.log.max.record.bytes.between.snapshots": "2000",
    "metadata.max.retention.bytes": "0",
    "controller.quorum.fetch.snapshot.max.bytes": "256",
    "metadata.log.segment.bytes": "4096",
}
KAFKA_NAME = re.compile(r"^\d{20}-\d{10}\.checkpoint$")
PARTITION = Path("__cluster_metadata-0")


# --- talking to the cluster -------------------------------------------------------------------


def client(cluster: Cluster, i: int) -> KafkaClient:
    return KafkaClient("127.0.0.1", cluster.ports[i], timeout=10.0)


def produce(cluster: Cluster, values: list[bytes]) -> Any:
    """Produce one batch until a leader acknowledges it; the partition's response."""
    deadline = time.monotonic() + 30
    while True:
        leader = cluster.wait_leader(timeout=30)
        with client(cluster, leader) as c:
            resp = c.call(PRODUCE, lambda v: produce_request(v, build_batch(0, -1, values)))
        part = resp.responses[0].partition_responses[0]
        if part.error_code == ErrorCode.none:
            return part
        assert time.monotonic() < deadline, part
        time.sleep(0.2)


def append_many(cluster: Cluster, first: int, count: int, per_batch: int = 10) -> None:
    for base in range(first, first + count, per_batch):
        produce(cluster, [str(v).encode() for v in range(base, min(base + per_batch,
                                                                    first + count))])


def describe(cluster: Cluster, i: int) -> Any:
    part = cluster.describe(i, timeout=5.0)
    assert part is not None, f"node {i} does not answer DescribeQuorum"
    return part


def log_start(cluster: Cluster, i: int) -> int:
    with client(cluster, i) as c:
        resp = c.call(LIST_OFFSETS, lambda v: list_offsets_request(v, EARLIEST_TIMESTAMP))
    part = resp.topics[0].partitions[0]
    assert part.error_code == ErrorCode.none, part
    return int(part.offset)


def read_image(cluster: Cluster) -> tuple[int, dict[Any, Any]]:
    """The kv image as a consumer Fetch of `__kv_image` from the leader reads it (again while a
    young leader refuses): (high watermark, map)."""
    deadline = time.monotonic() + 30
    while True:
        with client(cluster, cluster.wait_leader(timeout=30)) as c:
            resp = c.call(FETCH, lambda v: fetch_request(v, 0, topic=IMAGE_TOPIC))
        part = resp.responses[0].partitions[0]
        if part.error_code == ErrorCode.none:
            break
        assert time.monotonic() < deadline, part
        time.sleep(0.2)
    kv = {json.loads(k): json.loads(v) for b in parse_batches(part.records)
          for _, k, v in b.records if k is not None and v is not None}
    return int(part.high_watermark), kv


def events(cluster: Cluster, i: int, kind: str) -> list[dict[str, Any]]:
    return [e for e in cluster.events(i) if e["type"] == kind]


def wait_for(what: str, check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def raft_call(port: int, msg: m.Request) -> Any:
    request = translate.request_to_kio(msg, Endpoint("127.0.0.1", 1))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(encode_request(3, request, "forger"))
        got = b""
        while len(got) < 4 or len(got) < 4 + int.from_bytes(got[:4], "big"):
            chunk = sock.recv(65536)
            assert chunk, "the node closed the connection instead of answering"
            got += chunk
    _, body = decode_response(got[4:], response_class(request.__api_key__, request.__version__))
    return translate.response_from_kio(request.__api_key__, body)


# --- reading a stopped node's files ----------------------------------------------------------


def final_image(data_dir: Path) -> Image:
    """What a node's files hold: its latest valid snapshot's image, then every committed-or-not
    record of its log after it applied (the nodes are stopped once they agree)."""
    partition = data_dir / PARTITION
    loaded = SnapshotFiles(partition, read_only=True).latest_valid().snapshot
    image = loaded[1] if loaded is not None else Image()
    log = MetadataLog.open(partition, read_only=True)
    try:
        assert log.start_offset <= image.end_offset <= log.end_offset
        for record in log.records(image.end_offset):
            image.apply(translate.stored_to_entry(record))
    finally:
        log.close()
    return image


def checkpoints(cluster: Cluster, i: int) -> list[Path]:
    return sorted((cluster.data_dir(i) / PARTITION).glob("*.checkpoint"))


# --- the tests --------------------------------------------------------------------------------


def test_a_follower_left_behind_installs_the_leaders_snapshot_and_a_restart_loads_one(
        tmp_path: Path) -> None:
    with Cluster(tmp_path, extra=SNAPSHOTS) as cluster:
        cluster.start()
        leader = cluster.wait_leader(timeout=30)
        append_many(cluster, 0, 200)
        leader = cluster.wait_leader(timeout=30)
        # every node snapshots its own image, in Kafka's layout and names
        for i in cluster.ids:
            wait_for(f"a snapshot on node {i}", lambda i=i: checkpoints(cluster, i))
            assert all(KAFKA_NAME.match(p.name) for p in checkpoints(cluster, i))
            assert not list((cluster.data_dir(i) / PARTITION).glob("*.part"))
        start = wait_for("the log start to move", lambda: log_start(cluster, leader))
        assert any(e["offset"] == start for e in events(cluster, leader, "log-start"))

        # a follower stops; the leader snapshots, and moves its log start, past its log end
        follower = next(i for i in cluster.ids if i != leader)
        described = describe(cluster, leader)
        cluster.kill(follower)
        behind = max(int(v.log_end_offset) for v in described.current_voters
                     if int(v.replica_id) == follower)
        n = 200
        while log_start(cluster, leader) <= behind:
            append_many(cluster, n, 50)
            n += 50
        cluster.start(follower)
        installs = wait_for("the follower to install a snapshot",
                            lambda: events(cluster, follower, "snapshot-install"))
        chunks = events(cluster, follower, "fetch-snapshot")
        assert installs[0]["leader"] == leader and installs[0]["end_offset"] > behind
        assert len(chunks) > 1, "256-byte chunks: a snapshot takes several FetchSnapshots"
        assert chunks[-1]["position"] + 256 >= chunks[-1]["size"]

        # it catches up, and every node holds the same state
        produce(cluster, [b"last"])
        hw = describe(cluster, leader).high_watermark
        wait_for("the follower to catch up", lambda: any(
            e["hw"] >= hw for e in events(cluster, follower, "high-watermark")))
        # snapshots of one id are the same file on every node
        by_name: dict[str, set[bytes]] = {}
        for i in cluster.ids:
            for path in checkpoints(cluster, i):
                by_name.setdefault(path.name, set()).add(path.read_bytes())
        assert all(len(contents) == 1 for contents in by_name.values())
        cluster.stop_all()
        images = {i: final_image(cluster.data_dir(i)) for i in cluster.ids}
        assert images[follower] == images[leader]
        assert images[leader].records >= n + 1  # a retried produce may have landed twice

        # a restart loads the latest snapshot and replays the log after it
        cluster.start()
        new_leader = cluster.wait_leader(timeout=30)
        for i in cluster.ids:
            wait_for(f"node {i} to say it loaded a snapshot",
                     lambda i=i: "loaded snapshot" in (tmp_path / f"node{i}.log").read_text())
        assert log_start(cluster, new_leader) > 0
        assert "Traceback" not in "".join((tmp_path / f"node{i}.log").read_text()
                                          for i in cluster.ids)


def test_kv_over_the_wire_reads_below_the_log_start_and_forged_fetch_snapshots(
        tmp_path: Path) -> None:
    with Cluster(tmp_path, size=1, extra=SNAPSHOTS) as cluster:
        cluster.start()
        assert cluster.wait_leader(timeout=30) == 1
        port = cluster.ports[1]
        # kv: a write, a cas that matches and one that does not, a read of the image
        assert produce(cluster, [encode_write("x", 1)]).error_message is None
        assert produce(cluster, [encode_cas("x", 1, 2)]).error_message == "swapped"
        assert produce(cluster, [encode_cas("x", 1, 3)]).error_message == "not-swapped"
        produce(cluster, [encode_write(7, {"deep": [1]})])
        hw, kv = read_image(cluster)
        assert kv == {"x": 2, 7: {"deep": [1]}}
        assert hw == describe(cluster, 1).high_watermark

        # enough records for snapshots and a moved log start
        append_many(cluster, 0, 100)
        start = wait_for("the log start to move", lambda: log_start(cluster, 1))
        with client(cluster, 1) as c:
            below = c.call(FETCH, lambda v: fetch_request(v, 0)).responses[0].partitions[0]
            at = c.call(FETCH, lambda v: fetch_request(v, start)).responses[0].partitions[0]
        assert (below.error_code, below.log_start_offset) == (ErrorCode.offset_out_of_range, start)
        assert at.error_code == ErrorCode.none and int(at.log_start_offset) == start
        # the image survived the snapshots: the kv map is whole
        assert read_image(cluster)[1] == {"x": 2, 7: {"deep": [1]}}

        # FetchSnapshot as only a forger sends it: errors, never a failure
        latest = events(cluster, 1, "snapshot")[-1]
        epoch = describe(cluster, 1).leader_epoch
        sid = m.SnapshotId(latest["end_offset"], latest["epoch"])
        size = (cluster.data_dir(1) / PARTITION / f"{sid.end_offset:020d}-{sid.epoch:010d}"
                ".checkpoint").stat().st_size

        def ask(snapshot_id: m.SnapshotId, position: int, max_bytes: int) -> Any:
            return raft_call(port, m.FetchSnapshotRequest(CLUSTER_ID, 9, epoch, snapshot_id,
                                                          position, max_bytes))

        good = ask(sid, 0, 100)
        assert (good.error, good.size, good.position, len(good.data)) == (
            ErrorCode.none, size, 0, 100)
        data = good.data
        while len(data) < size:  # a chunk is at most the leader's 256 bytes, whatever one asks
            chunk = ask(sid, len(data), 1 << 20)
            assert chunk.error == ErrorCode.none and 0 < len(chunk.data) <= 256, chunk
            data += chunk.data
        assert decode_snapshot(data, sid).snapshot_id == sid
        cases = [
            (ask(m.SnapshotId(sid.end_offset + 1, sid.epoch), 0, 100), ErrorCode.snapshot_not_found),
            (ask(m.SnapshotId(sid.end_offset, sid.epoch + 5), 0, 100), ErrorCode.snapshot_not_found),
            (ask(sid, size, 100), ErrorCode.position_out_of_range),
            (ask(sid, 2**62, 100), ErrorCode.position_out_of_range),
            (ask(sid, -1, 100), ErrorCode.position_out_of_range),  # as Kafka answers it
            (ask(sid, 0, -1), ErrorCode.invalid_request),
        ]
        for answer, code in cases:
            assert answer.error == code, answer
        wrong_cluster = raft_call(port, m.FetchSnapshotRequest(
            "WrongClusterIdAAAAAAAA", 9, epoch, sid, 0, 100))
        assert wrong_cluster.error == ErrorCode.inconsistent_cluster_id
        # still up, still leading in its epoch, still serving
        assert cluster.procs[1].poll() is None
        assert describe(cluster, 1).leader_epoch == epoch
        with client(cluster, 1) as c:
            ok = c.call(PRODUCE, lambda v: produce_request(v, build_append_batch([999])))
        assert ok.responses[0].partition_responses[0].error_code == ErrorCode.none
        assert "Traceback" not in (tmp_path / "node1.log").read_text()
