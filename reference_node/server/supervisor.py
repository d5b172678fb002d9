"""`Supervisor`: the node's background tasks, and the one way the node stops on its own.

A task the host spawns (a request to a peer, a Ready waiting for its fsync) is kept until it
ends; one that fails stops the node, as does a disk job that failed (`die`): `fatal` resolves
with the cause, and `process.serve` stops the node on it rather than serve a wrong log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class FatalError(Exception):
    """The node cannot go on (its disk failed, or its core halted: `Ready.fatal`): it stops
    rather than serve a wrong log."""


class Supervisor:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()
        self.fatal: asyncio.Future[BaseException] = loop.create_future()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("internal task failed: %r", exc, exc_info=exc)
            self.die(exc)

    def die(self, exc: BaseException) -> None:
        if not self.fatal.done():
            self.fatal.set_result(exc)

    async def cancel_all(self) -> None:
        """Cancel every task still running, and wait for each to end."""
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
