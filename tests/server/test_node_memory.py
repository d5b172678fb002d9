"""A node keeps only its recent committed entries in memory (`RaftLog.release`): the older ones
are read back from its log on disk, and read the same as if they had stayed in memory."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

from reference_node.raft import replication
from reference_node.server import process
from reference_node.server.node import NodeHost
from testkit.cluster import single_voter

RECENT = 4


def test_entries_released_to_disk_read_back_the_same(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replication, "RECENT_ENTRIES", RECENT)
    cfg = single_voter(tmp_path)

    async def scenario() -> None:
        host = NodeHost(cfg)
        await host.start()
        try:
            while host.core.state_name != "leader":
                await asyncio.sleep(0.01)
            offsets = []
            for value in range(40):  # one at a time: each commits, is flushed, then released
                reply = await asyncio.wait_for(host.facade.append((str(value).encode(),)), 10)
                offsets.append(reply.offsets[0])
            in_memory = host.core.log_view.end_offset - stored_end(host)
            assert in_memory <= RECENT + 1, in_memory  # + the append not yet released
            read = await asyncio.wait_for(host.facade.read(0), 10)
            values = {e.offset: e.payload for e in read.records}
            assert [values[o] for o in offsets] == [str(v).encode() for v in range(40)]
        finally:
            await host.stop(graceful=False)

    asyncio.run(scenario())


def stored_end(host: NodeHost) -> int:
    """Where the core's in-memory entries begin (everything below is read from disk)."""
    return int(host.core.log_view._stored_end)  # type: ignore[attr-defined]


def test_a_node_process_serves_with_its_start_frozen_and_a_larger_young_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run_node` (the `kraft node` process) tunes the collector before it serves: the full
    collections that walked every object of the start were the p99 of a busy node."""
    seen: list[tuple[tuple[int, int, int], int]] = []

    def run(coro: Any) -> int:
        coro.close()  # not served: what matters is the collector it would be served with
        seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return 0

    threshold = gc.get_threshold()
    monkeypatch.setattr(process, "choose_event_loop", lambda choice: ("test", run))
    try:
        assert process.run_node(single_voter(tmp_path)) == 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
    [(tuned, frozen)] = seen
    assert tuned == process.GC_THRESHOLD != threshold
    assert frozen > 10_000  # the modules, kio's classes and all the start made
