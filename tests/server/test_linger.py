"""`controller.quorum.append.linger.ms`: appends of one window reach the core together."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from reference_node.server.linger import AppendLinger
from reference_node.storage.batch import parse_header
from reference_node.wire import PRODUCE, KafkaClient
from reference_node.wire.records import build_append_batch
from reference_node.wire.requests import produce_request
from testkit.cluster import Cluster

Batch = list[tuple[int, tuple[bytes, ...]]]



def test_zero_linger_submits_each_append_at_once() -> None:
    async def run() -> list[Batch]:
        batches: list[Batch] = []
        linger = AppendLinger(0, batches.append)
        linger.add(1, (b"a",))
        linger.add(2, (b"b",))
        return batches

    assert asyncio.run(run()) == [[(1, (b"a",))], [(2, (b"b",))]]


def test_appends_of_one_window_are_submitted_together_in_order() -> None:
    async def run() -> tuple[list[Batch], int]:
        batches: list[Batch] = []
        linger = AppendLinger(20, batches.append)
        linger.add(1, (b"a",))
        linger.add(2, (b"b", b"c"))
        waiting = linger.lingering
        assert batches == []  # nothing reaches the core before the window closes
        for _ in range(200):
            await asyncio.sleep(0.01)
            if batches:
                break
        return batches, waiting

    batches, waiting = asyncio.run(run())
    assert waiting == 2
    assert batches == [[(1, (b"a",)), (2, (b"b", b"c"))]]


def test_a_full_batch_is_submitted_without_waiting() -> None:
    async def run() -> list[Batch]:
        batches: list[Batch] = []
        linger = AppendLinger(60_000, batches.append, max_batch_bytes=10)
        linger.add(1, (b"12345",))
        assert batches == []
        linger.add(2, (b"67890",))  # 10 bytes: full
        linger.close()
        return batches

    assert asyncio.run(run()) == [[(1, (b"12345",)), (2, (b"67890",))]]


def test_negative_linger_is_refused() -> None:
    with pytest.raises(ValueError, match="linger"):
        AppendLinger(-1, lambda batch: None)


@pytest.mark.slow
def test_a_node_writes_one_linger_window_as_one_batch(tmp_path: Path) -> None:
    """Two produces 0.3 s apart, inside one 1.5 s linger window of a running node: one record
    batch on disk holds both (without the linger they are two batches, one fsync each)."""
    with Cluster(tmp_path, size=1, extra={"controller.quorum.append.linger.ms": "1500"}) as c:
        c.start()
        c.wait_leader(timeout=30.0)

        def produce(value: int) -> int:
            with KafkaClient("127.0.0.1", c.ports[1], timeout=10.0) as client:
                resp = client.call(PRODUCE, lambda v: produce_request(
                    v, build_append_batch([value]), timeout_ms=10_000))
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == 0
            return int(part.base_offset)

        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(produce, 101)
            time.sleep(0.3)
            second = pool.submit(produce, 102)
            offsets = sorted([first.result(timeout=20), second.result(timeout=20)])
    data = b"".join(p.read_bytes() for p in sorted(
        (c.data_dir(1) / "__cluster_metadata-0").glob("*.log")))
    batches = []
    pos = 0
    while pos < len(data):
        header = parse_header(data, pos)
        batches.append((header.base_offset, header.last_offset))
        pos += header.size
    assert offsets[1] == offsets[0] + 1
    assert (offsets[0], offsets[1]) in batches, batches
