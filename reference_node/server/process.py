"""The `kraft node` process: `run_node` picks the event loop, tunes the collector and `serve`s a
`NodeHost` until SIGTERM/SIGINT (a graceful stop: resign first) or until the node cannot go on
(its disk failed, or its core halted on a broken quorum's request: it stops at once); the exit
code says which.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from typing import Any

from reference_node.config import NodeConfig
from reference_node.server.event_loop import choose as choose_event_loop
from reference_node.server.node import NodeHost
from reference_node.storage.errors import StorageError

log = logging.getLogger(__name__)


async def serve(cfg: NodeConfig, stop: asyncio.Event | None = None) -> int:
    """Run until SIGTERM/SIGINT (or `stop`), then resign and exit: the process exit code."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        host = NodeHost(cfg)
    except StorageError as exc:
        log.error("cannot open %s: %s", cfg.metadata_log_dir, exc)
        return 1
    try:
        await host.start()
    except OSError as exc:
        # the error names the address (the client port's or the metrics port's)
        log.error("cannot listen (client port %s, metrics port %s): %s", cfg.listen,
                  cfg.metrics_port or "none", exc)
        host.disk.close()
        return 1
    stopper: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    fatal: asyncio.Future[Any] = host.fatal
    await asyncio.wait([stopper, fatal], return_when=asyncio.FIRST_COMPLETED)
    if host.fatal.done():
        log.error("stopping: %s", host.fatal.result())
        stopper.cancel()
        await host.stop(graceful=False)
        return 1
    log.info("stopping on request: resigning")
    await host.stop(graceful=True)
    log.info("stopped")
    return 0


def run_node(cfg: NodeConfig, event_loop: str = "auto") -> int:
    """The `kraft node` process: `serve` on the event loop `event_loop` names (event_loop.py);
    EventLoopUnavailable, before anything starts, when that loop cannot run here."""
    name, run = choose_event_loop(event_loop)
    tune_gc()
    log.info("event loop: %s", name)
    return run(serve(cfg))


GC_THRESHOLD = (20_000, 20, 20)
"""The collector's thresholds in a node process (CPython's default: 700, 10, 10)."""


def tune_gc() -> None:
    """Freezes what the process built to start and makes the young generation larger.

    Every request leaves reference cycles behind (futures and their callbacks, exceptions), so
    the collector runs, and with the default thresholds an older generation's collection walks
    every object alive: the modules and kio's classes, some 10^5 objects, several ms in which no
    request is read. Those pauses were the p99 (bench_node, 64 producers: 24-26 ms with them,
    10-11 ms without; 256: 55-57 against 29-32 ms) and, in bench_node, 5 to 15% of the
    throughput (bench_compare, whose client is heavier, showed no change beyond its noise). Frozen
    objects are never walked again (`gc.freeze`, as servers that fork do), and a larger first
    generation collects the same garbage less often. Garbage is still collected: cycles live a
    few hundred requests longer, and RSS stays within a few MB of the default's."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)
