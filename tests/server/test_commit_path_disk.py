"""The node's disk thread (`storage_adapter.Disk`): one job per Ready's log changes and flush,
group commit on the thread, queue order kept with the other jobs, and a failure that stops every
later flush report (never a flush reported over a write that failed)."""

from __future__ import annotations

import asyncio
import functools
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reference_node.config import from_properties
from reference_node.raft import api
from reference_node.raft.messages import Entry, EntryKind
from reference_node.server.storage_adapter import Disk, DiskQueue
from reference_node.storage import format_storage
from reference_node.storage.errors import StorageError

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def open_disk(tmp_path: Path) -> Disk:
    format_storage(tmp_path, CLUSTER, 1)
    return Disk(from_properties({
        "node.id": "1", "controller.quorum.voters": "1@localhost:9093",
        "listeners": "CONTROLLER://localhost:9093", "metadata.log.dir": str(tmp_path),
    }))


def entries(start: int, count: int, epoch: int = 1) -> list[Entry]:
    return [Entry(o, epoch, EntryKind.DATA, str(o).encode()) for o in range(start, start + count)]


class Recorder:
    """What the disk thread did, in order, with the log's flush held at a gate when asked."""

    def __init__(self, disk: Disk, monkeypatch: pytest.MonkeyPatch) -> None:
        self.steps: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.in_flush = threading.Event()
        log: Any = disk._storage.log
        self._watch(monkeypatch, log, "append", lambda r: f"append {r[0][0].offset}")
        self._watch(monkeypatch, log, "truncate_to", lambda r: f"truncate {r[0]}")
        flush = log.flush

        def gated_flush() -> int:
            self.in_flush.set()
            self.gate.wait(10)
            end = int(flush())
            self.steps.append(f"flush {end}")
            return end

        monkeypatch.setattr(log, "flush", gated_flush)
        quorum: Any = disk._storage.quorum_state
        self._watch(monkeypatch, quorum, "write", lambda _r: "quorum-state")

    def _watch(self, monkeypatch: pytest.MonkeyPatch, target: Any, name: str,
               describe: Callable[[tuple[Any, ...]], str]) -> None:
        real = getattr(target, name)

        def watched(*args: Any) -> Any:
            result = real(*args)
            self.steps.append(describe(args))
            return result

        monkeypatch.setattr(target, name, watched)


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


def test_writes_queued_during_a_flush_share_the_next_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = open_disk(tmp_path)
    rec = Recorder(disk, monkeypatch)
    flushed: list[tuple[int, int]] = []
    failed: list[BaseException] = []

    async def scenario() -> None:
        disk.report_to(lambda end, asked, _took: flushed.append((end, asked)), failed.append)
        rec.gate.clear()
        disk.write_log(None, None, entries(0, 2), True)
        await until(rec.in_flush.is_set)
        disk.write_log(None, None, entries(2, 3), True)
        disk.write_log(None, None, entries(5, 1), True)
        await asyncio.sleep(0.05)
        assert flushed == []  # nothing reported while the first flush waits for the disk
        rec.gate.set()
        await until(lambda: sum(asked for _, asked in flushed) == 3)
        # one flush for the first write, one more for the two queued behind it
        assert flushed == [(2, 1), (6, 2)]
        assert rec.steps == ["append 0", "flush 2", "append 2", "append 5", "flush 6"]

    try:
        asyncio.run(scenario())
    finally:
        disk.close()
    assert not failed


def test_a_write_without_flush_is_not_reported_and_a_later_flush_covers_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk = open_disk(tmp_path)
    rec = Recorder(disk, monkeypatch)
    flushed: list[tuple[int, int]] = []
    failed: list[BaseException] = []

    async def scenario() -> None:
        disk.report_to(lambda end, asked, _took: flushed.append((end, asked)), failed.append)
        disk.write_log(None, None, entries(0, 10), False)
        await until(lambda: rec.steps == ["append 0"])
        await asyncio.sleep(0.05)
        assert flushed == []
        # the truncation and the appends of epoch 2 follow the earlier appends, in order
        disk.write_log(None, 5, entries(5, 3, epoch=2), True)
        await until(lambda: bool(flushed))
        assert flushed == [(8, 1)]
        assert rec.steps == ["append 0", "truncate 5", "append 5", "flush 8"]

    try:
        asyncio.run(scenario())
        records = disk._storage.log.read(0, max_records=100)
        assert [(r.offset, r.epoch) for r in records] == \
            [(o, 1) for o in range(5)] + [(o, 2) for o in range(5, 8)]
    finally:
        disk.close()
    assert not failed


def test_other_jobs_keep_their_place_between_log_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write queued after another job is not pulled ahead of it into an earlier flush."""
    disk = open_disk(tmp_path)
    rec = Recorder(disk, monkeypatch)
    failed: list[BaseException] = []

    async def scenario() -> None:
        disk.report_to(lambda *_: None, failed.append)
        rec.gate.clear()
        disk.write_log(None, None, entries(0, 1), True)
        await until(rec.in_flush.is_set)
        state = disk.write_quorum_state(api.QuorumState(1, 1, 1), (1,))
        disk.write_log(None, None, entries(1, 1), True)
        rec.gate.set()
        await state
        await until(lambda: len(rec.steps) == 5)
        assert rec.steps == ["append 0", "flush 1", "quorum-state", "append 1", "flush 2"]

    try:
        asyncio.run(scenario())
    finally:
        disk.close()
    assert not failed


def test_a_failed_write_stops_every_later_flush_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Never a flush reported over a write that failed: the host would count entries durable
    that are not on disk."""
    disk = open_disk(tmp_path)
    Recorder(disk, monkeypatch)
    flushed: list[tuple[int, int]] = []
    failed: list[BaseException] = []

    async def scenario() -> None:
        disk.report_to(lambda end, asked, _took: flushed.append((end, asked)), failed.append)
        disk.write_log(None, None, entries(0, 2), False)
        disk.write_log(None, None, entries(7, 1), True)  # a gap: the log refuses it
        disk.write_log(None, None, entries(2, 1), True)
        await until(lambda: bool(failed))
        with pytest.raises(StorageError):
            await disk.flush()

    try:
        asyncio.run(scenario())
    finally:
        disk.close()
    assert len(failed) == 1 and isinstance(failed[0], ValueError)
    assert flushed == []


def test_the_disk_queue_loses_no_wake_up() -> None:
    """The loop puts while the thread goes to sleep: every job arrives, in order."""
    jobs = DiskQueue()
    got: list[Any] = []

    def consume() -> None:
        while (job := jobs.get()) is not None:
            assert callable(job)
            job()

    thread = threading.Thread(target=consume)
    thread.start()
    rng = random.Random(7)
    count = 20_000
    for i in range(count):
        jobs.put(functools.partial(got.append, i))
        if rng.random() < 0.01:
            time.sleep(rng.random() / 5000)  # let the thread catch up and sleep
    jobs.put(None)
    thread.join(30)
    jobs.close()
    assert not thread.is_alive()
    assert got == list(range(count))
