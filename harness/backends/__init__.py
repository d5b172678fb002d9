"""Backends: where the nodes run (the interface is `contracts/backend.py`). `make(name)` builds
one by name; `sweep_all()` removes what any backend's earlier runs left behind, whose harness is
gone (`kraft clean`; `--all` removes live runs too).

`auto` takes docker when an engine answers and the node image exists, and local otherwise; it
returns a note saying which it took and why.
"""

from __future__ import annotations

import importlib

from contracts.backend import Backend

NAMES = ("local", "docker", "auto")
# the modules whose `sweep()` `sweep_all` calls; docker's needs its optional dependencies
SWEEPERS = ("harness.backends.local", "harness.backends.docker")


def make(name: str) -> tuple[Backend, str]:
    if name == "local":
        from harness.backends.local import LocalBackend
        return LocalBackend(), "backend: local"
    if name == "docker":
        return _docker(), "backend: docker"
    if name == "auto":
        why = _docker_unusable()
        if why is None:
            return _docker(), "backend auto: docker (an engine answers and the node image exists)"
        from harness.backends.local import LocalBackend
        return LocalBackend(), f"backend auto: local ({why})"
    raise KeyError(f"unknown backend {name!r}; one of: {', '.join(NAMES)}")


def _docker() -> Backend:
    module = importlib.import_module("harness.backends.docker")
    factory = getattr(module, "DockerBackend", None)
    if factory is None:
        raise ImportError("harness.backends.docker has no DockerBackend")
    backend: Backend = factory()
    return backend


def _docker_unusable() -> str | None:
    try:
        from harness import images
        from harness.backends import docker
    except ImportError as exc:
        return f"docker backend unavailable: {exc}"
    try:
        if not docker.engine_available():
            return "no Docker engine answers"
        if not images.image_available():
            return "the node image is not built (kraft images build)"
    except Exception as exc:
        return f"docker check failed: {exc}"
    return None


def sweep_all(everything: bool = False) -> list[str]:
    """Remove what every backend's runs left behind (for `kraft clean`): the runs whose harness
    is gone, or with `everything` all runs, live ones too. Returns what was removed."""
    removed: list[str] = []
    for module_name in SWEEPERS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        sweep = getattr(module, "sweep", None)
        if sweep is not None:
            removed.extend(sweep(everything))
    # The disk nemeses' filesystems: a local run's are unmounted with its directory (pids.py),
    # a docker run's go with its containers. Never every kraft-faultfs mount of the host: a
    # test's, or a run under another KRAFT_LOCAL_DIR, is not ours (`kraft faultfs sweep` is).
    return removed
