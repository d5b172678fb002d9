"""`DiskJobs`: what a Ready asks of the disk thread, and what the core hears back.

Flushes run on the disk thread, in queue order behind the appends they cover; the loop keeps
serving meanwhile, and hears of a Ready's disk job only when its flush ends or it failed, not once
per job. Log writes queued while a flush runs are applied after it and covered by one more flush
(group commit, storage_adapter.Disk). A flush's end offset is stepped into the core as
`LogFlushed`, which is what lets the leader count its own log toward the high watermark and answer
producers, and a follower fetch again.

KIP-630 snapshots go to the disk thread in the order `Ready` prescribes, behind the appends and
truncations before them: `log_reset` (an installed snapshot: the log restarts empty at it, part of
the log's job) before the truncation and the appends, then `snapshot_write` (encode and write
durably, then `SnapshotWritten` is stepped), `snapshot_received` (decode, check and write durably,
then `SnapshotLoaded` or `SnapshotRefused`), and `delete_before` (retention) last. Under the
`delete-before-snapshot` switch the snapshot write waits `DELETE_BEFORE_SNAPSHOT_DELAY_S` off the
disk thread while the deletion goes ahead, so that a crash in between leaves a log start no
snapshot covers (the defect the switch stands for). A disk job that fails stops the node.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from reference_node.config import NodeConfig
from reference_node.raft import messages as m
from reference_node.raft.api import (
    LogFlushed,
    Ready,
    SnapshotLoaded,
    SnapshotRefused,
    SnapshotWrite,
    SnapshotWritten,
)
from reference_node.raft.config import Unsafe
from reference_node.server.metrics import Metrics
from reference_node.server.pump import Pump
from reference_node.server.storage_adapter import Disk
from reference_node.server.supervisor import FatalError, Supervisor
from reference_node.storage.snapshot import SnapshotError

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore

log = logging.getLogger(__name__)

# a log flush slower than this is logged: a stalled or failing disk (Kafka's LogFlushStats)
SLOW_FLUSH_S = 1.0
DELETE_BEFORE_SNAPSHOT_DELAY_S = 2.0
"""Under `delete-before-snapshot`: how long the snapshot write waits after the log below it is
deleted (long enough for a nemesis's kill to land in between)."""


class DiskJobs:
    def __init__(self, cfg: NodeConfig, disk: Disk, core: RaftCore, metrics: Metrics, pump: Pump,
                 supervisor: Supervisor) -> None:
        self._cfg = cfg
        self._disk = disk
        self._core = core
        self._metrics = metrics
        self._pump = pump
        self._supervisor = supervisor
        self._flushes_asked = 0
        """Flushes asked of the disk thread (`Ready.flush`) and not yet answered."""
        self._flush_started = 0.0
        self._delayed_writes: set[asyncio.TimerHandle] = set()
        disk.report_to(self._flushed, self._disk_failed)

    def flush_in_flight_ms(self) -> float:
        """How long the flush in flight has been waiting for the disk (0: none)."""
        return (time.monotonic() - self._flush_started) * 1000.0 if self._flushes_asked else 0.0

    def cancel_delayed(self) -> None:
        """Forget the snapshot writes the `delete-before-snapshot` switch holds back."""
        for handle in self._delayed_writes:
            handle.cancel()

    # --- the log ------------------------------------------------------------------------------

    def write_log(self, ready: Ready) -> None:
        """The Ready's reset, truncation, appends and flush: one job for the disk thread, which
        nobody awaits; `_flushed` hears when its flush ends, `_disk_failed` if anything fails."""
        if ready.flush:
            if not self._flushes_asked:
                self._flush_started = time.monotonic()
            self._flushes_asked += 1
        self._disk.write_log(ready.log_reset, ready.truncate_to, ready.entries, ready.flush)
        if ready.entries:
            window = self._metrics.append_records if self._core.is_leader else \
                self._metrics.fetch_records
            window.record(float(sum(1 for e in ready.entries if not e.is_control)))

    def _flushed(self, end_offset: int, asked: int, took: float) -> None:
        """A flush ended on the disk thread: `asked` flush requests are answered, and every
        entry below `end_offset` is durable."""
        self._flushes_asked -= asked
        # the next flush's wait for the disk starts now (the gauge of a flush in flight)
        self._flush_started = time.monotonic()
        self._metrics.log_flush_time_ms.record(took * 1000.0)
        if took > SLOW_FLUSH_S:
            # what an operator sees of a stalled disk: nothing is acknowledged meanwhile
            log.warning("slow disk: a log flush took %.1f s", took)
        self._pump.step_now(LogFlushed(min(end_offset, self._core.log_end_offset)))

    def _disk_failed(self, exc: BaseException) -> None:
        log.error("disk write failed: %r", exc)
        self._supervisor.die(FatalError(f"disk write failed: {exc}"))

    # --- snapshots (KIP-630) -----------------------------------------------------------------

    def write_snapshot(self, write: SnapshotWrite) -> None:
        if Unsafe.DELETE_BEFORE_SNAPSHOT in self._cfg.unsafe:
            # The defect: the log below goes now (this Ready's delete_before), the snapshot that
            # covers it only later.
            def later() -> None:
                self._delayed_writes.discard(handle)
                self._start_snapshot_write(write)

            handle = asyncio.get_running_loop().call_later(DELETE_BEFORE_SNAPSHOT_DELAY_S, later)
            self._delayed_writes.add(handle)
            return
        self._start_snapshot_write(write)

    def _start_snapshot_write(self, write: SnapshotWrite) -> None:
        started = time.monotonic()
        sid = write.snapshot_id

        def done(fut: asyncio.Future[None]) -> None:
            if fut.cancelled():
                return
            if fut.exception() is not None:
                log.error("snapshot %d-%d: write failed: %r", sid.end_offset, sid.epoch,
                          fut.exception())
                self._supervisor.die(FatalError(f"snapshot write failed: {fut.exception()}"))
                return
            log.info("snapshot %d-%d written in %.3f s (%d keys, %d records)", sid.end_offset,
                     sid.epoch, time.monotonic() - started, len(write.image.kv),
                     write.image.records)
            self._pump.step(SnapshotWritten(sid))

        self._disk.write_snapshot(write).add_done_callback(done)

    def keep_snapshot(self, sid: m.SnapshotId, data: bytes) -> None:
        """A downloaded snapshot: checked and written on the disk thread, then reported."""

        def done(fut: asyncio.Future[Any]) -> None:
            if fut.cancelled():
                return
            exc = fut.exception()
            if isinstance(exc, SnapshotError):
                log.warning("snapshot %d-%d from the leader refused: %s", sid.end_offset,
                            sid.epoch, exc)
                self._pump.step(SnapshotRefused(sid, str(exc)))
            elif exc is not None:
                log.error("snapshot %d-%d: write failed: %r", sid.end_offset, sid.epoch, exc)
                self._supervisor.die(FatalError(f"snapshot write failed: {exc}"))
            else:
                self._pump.step(SnapshotLoaded(sid, fut.result()))

        self._disk.receive_snapshot(sid, data).add_done_callback(done)

    def delete_before(self, snapshot_id: m.SnapshotId) -> None:
        """Retention: the log and the snapshots below `snapshot_id` go."""
        def done(f: asyncio.Future[Any]) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.error("disk write failed: %r", f.exception())
                self._supervisor.die(FatalError(f"disk write failed: {f.exception()}"))

        self._disk.delete_before(snapshot_id).add_done_callback(done)
