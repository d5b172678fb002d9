"""The process levers every target's DB pulls the same way: signals to the node's daemon through
the backend (`contracts.backend.Backend.signal`), whatever program it runs.

A graceful stop resumes a paused process first (a SIGSTOPped one never handles SIGTERM), gives it
STOP_GRACE seconds, then kills it; teardown does that for every node at once, so that the nodes
stop side by side rather than one grace period after another.
"""

from __future__ import annotations

import signal

from contracts.backend import Backend

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
