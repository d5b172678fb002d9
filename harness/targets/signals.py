"""The process levers every target's DB pulls the same way: signals to the node's daemon through
the backend (`contracts.backend.Backend.signal`), whatever program it runs, and the wait for a
started daemon to listen, which names the error line of one that died instead.

A graceful stop resumes a paused process first (a SIGSTOPped one never handles SIGTERM), gives it
STOP_GRACE seconds, then kills it; teardown does that for every node at once, so that the nodes
stop side by side rather than one grace period after another.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Callable

from contracts.backend import Backend, BackendError

STOP_GRACE = 10.0  # seconds a node has to exit after SIGTERM before SIGKILL


class SignalledProcess:
    """`stop`, `teardown`, `kill`, `pause` and `resume` of `contracts.target.DB` (and `CanKill`,
    `CanPause`) for a DB whose node is one daemon of the backend."""

    def stop(self, backend: Backend, node: str) -> None:
        self.teardown(backend, [node])

    def teardown(self, backend: Backend, nodes: list[str]) -> None:
        for node in nodes:
            backend.signal(node, signal.SIGCONT)
            backend.signal(node, signal.SIGTERM)
        for node in nodes:
            if backend.wait_exit(node, STOP_GRACE) is None:
                backend.signal(node, signal.SIGKILL)
                backend.wait_exit(node, STOP_GRACE)

    def kill(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGKILL)
        backend.wait_exit(node, STOP_GRACE)

    def pause(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGSTOP)

    def resume(self, backend: Backend, node: str) -> None:
        backend.signal(node, signal.SIGCONT)


def await_listening(backend: Backend, node: str, port: str, timeout: float, program: str,
                    log: str, last_words: Callable[[], str], deadline: float | None = None) -> None:
    """Wait until `port` of the started `node` accepts a connection (by `deadline`, else
    `timeout` from now). A daemon that exits first is a BackendError with `last_words()` (its
    log's last error, as `: <line>`) and where its log is collected (`nodes/<node>/<log>`)."""
    deadline = time.monotonic() + timeout if deadline is None else deadline
    address = backend.client_address(node, port)
    foreign = False  # the port accepted, but for another program (`Backend.serves`)
    while time.monotonic() < deadline:
        if not backend.is_running(node):
            raise BackendError(f"{node}: {program} exited at start{last_words()} "
                               f"(see nodes/{node}/{log})")
        with contextlib.suppress(OSError):
            socket.create_connection(address, timeout=1).close()
            # Checked after the connection, so that a daemon that binds late is seen.
            if backend.serves(node, port):
                return
            foreign = True
        time.sleep(0.1)
    if foreign:
        raise BackendError(f"{node}: {address[0]}:{address[1]} is held by another program, not "
                           f"{program}, after {timeout:g}s (see nodes/{node}/{log})")
    raise BackendError(f"{node}: not listening on {address} after {timeout:g}s")


def last_error_line(backend: Backend, node: str, log_path: str,
                    is_error: Callable[[str], bool]) -> str:
    """The last line of the node's log tail that `is_error` picks (why it would not start), as
    `: <message>`, or "" when there is none to read."""
    try:
        tail = backend.exec(node, ["tail", "-n", "20", log_path], check=False, timeout=10).stdout
    except BackendError:
        return ""
    errors = [line for line in tail.splitlines() if is_error(line)]
    return f": {errors[-1].split('] ', 1)[-1][:600]}" if errors else ""
