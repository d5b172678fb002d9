"""A target's cluster on the local backend, for tests that drive a target's DB and clients
directly (without `kraft test`): set up, handed over, and torn down however the test ends."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from contracts.backend import ClusterSpec
from contracts.target import DB, Target
from harness.backends.local import LocalBackend
from nemesis.base import Env

D = TypeVar("D", bound=DB)


@contextlib.contextmanager
def deployed(target: Target, db_type: type[D], nodes: list[str], run_id: str, run_dir: Path,
             node_config: Mapping[str, str] | None = None,
             backend: LocalBackend | None = None) -> Iterator[tuple[LocalBackend, D]]:
    """`target`'s nodes running on a local backend of their own (`backend`, else a new
    LocalBackend), as the runner deploys them; the DB is checked to be a `db_type`, so that a
    test may use its own levers."""
    backend = LocalBackend() if backend is None else backend
    db = target.db()
    assert isinstance(db, db_type), f"{type(target).__name__}.db() made a {type(db).__name__}"
    backend.setup(ClusterSpec(run_id, nodes, target.ports, run_dir))
    try:
        db.setup(backend, nodes, dict(node_config or {}))
        yield backend, db
    finally:
        db.teardown(backend, nodes)
        backend.teardown()


def wait_for_leader(env: Env, timeout: float = 30.0) -> str:
    """The node that the deployment's DB says leads, once one does (AssertionError if none
    within `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (leader := env.leader()) is not None:
            return leader
        time.sleep(0.2)
    raise AssertionError(f"no leader within {timeout:.0f} s")
