"""Which event loop runs a `kraft node` process: uvloop when it is installed, else asyncio's own.

The node is written against asyncio's API only; uvloop (libuv under that API, a dependency of
the project) runs the same code with cheaper wake-ups, reads and callbacks. On the 2-core guests
of bench/README.md it gave 12% more writes/s at 64 clients (bench_compare's ref-producer, five
alternated pairs: median 21,865 against 19,500) and 7% at 256; at one producer, bench_node saw no
difference beyond its noise. The standard loop stays the fallback (`--event-loop asyncio`, or
uvloop not installed), and the in-process hosts of the tests keep whatever loop their test runs.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

EVENT_LOOPS = ("auto", "uvloop", "asyncio")
"""`kraft node --event-loop`: auto is uvloop when it can be imported, else asyncio."""

Runner = Callable[[Coroutine[Any, Any, int]], int]


class EventLoopUnavailable(RuntimeError):
    """The event loop asked for cannot run here."""


def choose(choice: str) -> tuple[str, Runner]:
    """The loop `choice` names and the function that runs a coroutine on a new one of it."""
    if choice not in EVENT_LOOPS:
        raise EventLoopUnavailable(f"unknown event loop {choice!r}: choose one of "
                                   f"{', '.join(EVENT_LOOPS)}")
    import asyncio  # here: `kraft node --help` imports this module for EVENT_LOOPS alone

    if choice == "asyncio":
        return "asyncio", asyncio.run
    try:
        import uvloop
    except ImportError as exc:
        if choice == "auto":
            return "asyncio", asyncio.run
        raise EventLoopUnavailable(
            f"--event-loop uvloop: the module uvloop cannot be imported ({exc}); install it "
            f"(pip install uvloop) or run with --event-loop asyncio") from exc
    return "uvloop", uvloop.run
