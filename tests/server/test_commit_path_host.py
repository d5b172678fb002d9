"""The commit path of a live node (`NodeHost`): an append is acknowledged, and its high watermark
written to events.jsonl, only once the fsync that covers it has ended; the `skip-flush` switch is
the one way to break that. A Raft request the core leaves unanswered expires without a trace."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reference_node.config import NodeConfig
from reference_node.raft import messages as m
from reference_node.raft.api import TRUNCATION_BELOW_HIGH_WATERMARK, Fatal
from reference_node.server import routing
from reference_node.server.node import NodeHost
from testkit.cluster import single_voter


def high_watermarks(cfg: NodeConfig) -> list[int]:
    lines = (cfg.metadata_log_dir / "events.jsonl").read_text().splitlines()
    return [e["hw"] for e in map(json.loads, lines) if e["type"] == "high-watermark"]


async def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def hold_flushes(host: NodeHost, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event,
                                                                           list[int]]:
    """From now on the log's fsync waits for the returned gate; the ends it synced."""
    gate = threading.Event()
    synced: list[int] = []
    log: Any = host.disk._storage.log
    real = log.flush

    def held() -> int:
        gate.wait(10)
        end = int(real())
        synced.append(end)
        return end

    monkeypatch.setattr(log, "flush", held)
    return gate, synced


def append_while_the_fsync_is_held(cfg: NodeConfig, monkeypatch: pytest.MonkeyPatch
                                   ) -> dict[str, Any]:
    """What a single voter did with an append while its fsync was held, and after."""
    seen: dict[str, Any] = {}

    async def scenario() -> None:
        host = NodeHost(cfg)
        await host.start()
        gate = threading.Event()
        try:
            await until(lambda: host.core.state_name == "leader")
            await asyncio.wait_for(host.facade.append((b"first",)), 10)  # the epoch's start commits
            gate, synced = hold_flushes(host, monkeypatch)
            reply = host.facade.append((b"x",))
            await asyncio.sleep(0.3)
            seen["acked_while_held"] = reply.done()
            seen["hw_while_held"] = max(high_watermarks(cfg))
            seen["flush_in_flight_ms"] = host.gauges()["log-flush-in-flight-ms"]
            gate.set()
            answer = await asyncio.wait_for(reply, 10)
            await until(lambda: bool(synced))
            seen["offset"] = answer.offsets[0]
            seen["error"] = answer.error
            seen["synced"] = synced[0]
            await until(lambda: max(high_watermarks(cfg)) > answer.offsets[0])
        finally:
            gate.set()
            await host.stop(graceful=False)

    asyncio.run(scenario())
    return seen


def test_an_append_is_acknowledged_only_after_the_fsync_that_covers_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = append_while_the_fsync_is_held(single_voter(tmp_path), monkeypatch)
    assert seen["error"] == m.ErrorCode.none
    assert not seen["acked_while_held"]
    assert seen["hw_while_held"] <= seen["offset"]  # no high watermark over it in events.jsonl
    assert float(seen["flush_in_flight_ms"]) > 0  # the held fsync shows while it lasts
    assert seen["synced"] > seen["offset"]


def test_skip_flush_acknowledges_before_the_fsync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The defect the switch stands for (KAFKA-10533), and the proof that the test above would
    see an early acknowledgement."""
    seen = append_while_the_fsync_is_held(single_voter(tmp_path, unsafe="skip-flush"),
                                          monkeypatch)
    assert seen["error"] == m.ErrorCode.none
    assert seen["acked_while_held"]
    assert seen["hw_while_held"] > seen["offset"]


def test_a_raft_request_the_core_leaves_unanswered_expires_and_is_forgotten(
        tmp_path: Path) -> None:
    cfg = single_voter(tmp_path)

    async def scenario() -> tuple[Any, int]:
        host = NodeHost(cfg)
        await host.start()
        try:
            await until(lambda: host.core.state_name == "leader")
            await asyncio.wait_for(host.facade.append((b"first",)), 10)
            # An observer's fetch at the log end: the leader parks it for max_wait_ms.
            fetch = m.FetchRequest(host.cluster_id, 5, host.core.epoch,
                                   host.core.log_end_offset, host.core.last_epoch, 5_000)
            answer = await host.routing._core_answer(fetch, 5, 0.05)
            return answer, len(host.routing._inbound)
        finally:
            await host.stop(graceful=False)

    answer, pending = asyncio.run(scenario())
    assert answer is routing.TIMED_OUT
    assert pending == 0


def test_nothing_goes_out_after_a_quorum_state_that_could_not_be_made_durable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pump stops at a Ready whose quorum state failed to write: the election it started
    (the vote for itself) is not durable, so no later Ready (leadership, its first entry) may
    be carried out."""
    cfg = single_voter(tmp_path)

    async def scenario() -> tuple[BaseException, list[str], int]:
        host = NodeHost(cfg)

        def failing_write(*_args: Any) -> asyncio.Future[None]:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            future.set_exception(OSError("injected: quorum-state write failed"))
            return future

        monkeypatch.setattr(host.disk, "write_quorum_state", failing_write)
        carried: list[Any] = []
        carry_out = host.pump._carry_out

        def recorded(ready: Any) -> None:
            carried.append(ready)
            carry_out(ready)

        monkeypatch.setattr(host.pump, "_carry_out", recorded)
        await host.start()
        try:
            fatal = await asyncio.wait_for(host.fatal, 10)
            carried.clear()
            host.facade.append((b"x",))  # a later input, and its Ready
            await asyncio.sleep(0.3)  # time for any later Ready to be (wrongly) carried out
            assert carried == []
            lines = (cfg.metadata_log_dir / "events.jsonl").read_text().splitlines()
            states = [e["state"] for e in map(json.loads, lines) if e["type"] == "state"]
            stored: Any = host.disk._storage.log
            return fatal, states, int(stored.end_offset)
        finally:
            await host.stop(graceful=False)

    fatal, states, log_end = asyncio.run(scenario())
    assert "injected" in str(fatal)
    assert "leader" not in states
    assert log_end == 0  # no entry of the new epoch was written either


def test_a_core_that_halts_stops_the_node_with_its_named_error(tmp_path: Path) -> None:
    """`Ready.fatal` (issue 41: a leader asked for a truncation below the high watermark): the
    pump carries out that Ready (its `fatal` event reaches events.jsonl), then nothing more, and
    the node's `fatal` resolves with the core's named error (process.serve logs it, exits 1)."""
    cfg = single_voter(tmp_path)

    async def scenario() -> tuple[BaseException, list[dict[str, Any]], bool]:
        host = NodeHost(cfg)
        await host.start()
        try:
            await until(lambda: host.core.state_name == "leader")
            host.core.halt(Fatal(TRUNCATION_BELOW_HIGH_WATERMARK, "injected by the test"))
            host.pump.kick()
            fatal = await asyncio.wait_for(host.fatal, 10)
            reply = host.facade.append((b"x",))  # stepped into nothing: the core halted
            await asyncio.sleep(0.3)
            lines = (cfg.metadata_log_dir / "events.jsonl").read_text().splitlines()
            return fatal, [e for e in map(json.loads, lines) if e["type"] == "fatal"], reply.done()
        finally:
            await host.stop(graceful=False)

    fatal, events, answered = asyncio.run(scenario())
    assert str(fatal) == "truncation-below-high-watermark: injected by the test"
    assert [(e["name"], e["detail"]) for e in events] == [
        ("truncation-below-high-watermark", "injected by the test")]
    assert not answered
