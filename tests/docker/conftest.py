"""Fixtures for the docker backend's tests: a real engine, the real node image, real containers.

Every test here is skipped, with the reason, when no Docker engine answers or the images cannot
be built on this machine (no debootstrap, not root). The image is built once per session (cached
by its inputs afterwards); a 3-node cluster is shared by the tests of a module that only read it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from contracts.backend import ClusterSpec
from harness import images
from harness.backends.docker import DockerBackend, engine_available

PORTS = {"http": 8000, "probe": 8001, "udp": 9999}


@pytest.fixture(scope="session")
def node_image() -> str:
    if not engine_available():
        pytest.skip("no Docker engine answers (start one, or set DOCKER_HOST)")
    try:
        return images.ensure_images(progress=lambda line: print(f"[images] {line}"))
    except images.ImageError as exc:
        if "debootstrap" in str(exc) or "root" in str(exc):
            pytest.skip(f"cannot build the node image here: {exc}")
        raise


def new_run_id(prefix: str) -> str:
    return f"test-{prefix}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


ClusterFactory = Callable[[int], DockerBackend]


@pytest.fixture
def run_ids() -> Callable[[str], str]:
    """Fresh run ids, unique across concurrent test sessions on one engine."""
    return new_run_id


@pytest.fixture
def ports() -> dict[str, int]:
    return dict(PORTS)


@pytest.fixture
def cluster_factory(node_image: str, tmp_path: Path) -> Iterator[ClusterFactory]:
    """Makes clusters of n nodes for one test, and tears down whatever the test left up."""
    made: list[DockerBackend] = []

    def make(nodes: int) -> DockerBackend:
        backend = DockerBackend(image=node_image)
        made.append(backend)
        backend.setup(ClusterSpec(run_id=new_run_id("own"),
                                  nodes=[f"n{i}" for i in range(1, nodes + 1)],
                                  ports=PORTS, run_dir=tmp_path / f"run{len(made)}"))
        return backend

    try:
        yield make
    finally:
        for backend in made:
            backend.teardown()


@pytest.fixture(scope="module")
def cluster(node_image: str, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[DockerBackend]:
    backend = DockerBackend(image=node_image)
    try:
        backend.setup(ClusterSpec(run_id=new_run_id("shared"), nodes=["n1", "n2", "n3"],
                                  ports=PORTS, run_dir=tmp_path_factory.mktemp("run")))
        yield backend
    finally:
        backend.teardown()
