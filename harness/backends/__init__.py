"""Backends: where the nodes run (see base.py). `make(name)` builds one by name.

`auto` takes docker when an engine answers and the node image exists, and local otherwise; it
returns a note saying which it took and why.
"""

from __future__ import annotations

import importlib

from harness.backends.base import Backend

NAMES = ("local", "docker", "auto")


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
