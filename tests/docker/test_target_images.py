"""A target's image layer: its Debian packages on the node image, built only when a run needs it.

The docker tests build the layer of a tiny package (`less`), with the real engine and mirror; a
first build takes about a minute (apt-get update), later ones are lookups while the project is
unchanged. The quick tests check the tag's inputs and the refusals without an engine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts.backend import ClusterSpec
from harness import images, targets
from harness.backends.docker import DockerBackend
from harness.commands import images as images_cli

TINY = ("less",)


def test_the_layer_tag_follows_the_node_and_the_packages_only() -> None:
    tag = images.target_hash("kraft-jepsen/node:1", ("etcd-server",))
    assert tag == images.target_hash("kraft-jepsen/node:1", ("etcd-server",))
    # the order and repeats of the packages do not matter; the set and the node do
    assert images.target_hash("n:1", ("bb", "aa")) == images.target_hash("n:1", ("aa", "bb", "aa"))
    assert tag != images.target_hash("kraft-jepsen/node:2", ("etcd-server",))
    assert tag != images.target_hash("kraft-jepsen/node:1", ("nats-server",))
    assert tag != images.target_hash("kraft-jepsen/node:1", ("etcd-server", "less"))
    assert images.target_repo(("nats-server", "etcd-server")) == \
        "kraft-jepsen/node-etcd-server-nats-server"
    assert images.target_repo(("g++",)) == "kraft-jepsen/node-g"


def test_a_name_debian_would_refuse_is_never_put_in_the_build() -> None:
    for bad in ("less; rm -rf /", "Less", "-y", "a"):
        with pytest.raises(images.ImageError, match="not a Debian package name"):
            images.target_packages((bad,))


def test_images_build_refuses_an_unknown_target_in_one_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert images_cli.main(["build", "--target", "no-such-target"]) == images_cli.EXIT_USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and "unknown target 'no-such-target'" in err


@pytest.fixture(scope="module")
def tiny_layer(node_image: str) -> str:
    return images.ensure_target_image(TINY, progress=lambda line: print(f"[images] {line}"))


@pytest.fixture
def client() -> Iterator[Any]:
    engine = images.docker_client()
    yield engine
    engine.close()


@pytest.mark.docker
@pytest.mark.slow
def test_the_layer_holds_the_packages_and_starts_nothing_but_sshd(tiny_layer: str,
                                                                  client: Any) -> None:
    assert tiny_layer.startswith("kraft-jepsen/node-less:")
    image = client.images.get(tiny_layer)
    assert image.labels[images.PROJECT_LABEL] == "1"
    assert image.labels[images.INPUTS_LABEL] == tiny_layer.rsplit(":", 1)[1]
    assert image.labels[images.PACKAGES_LABEL] == "less"
    output = client.containers.run(tiny_layer, entrypoint=["sh", "-c"], remove=True, command=[
        "which less && /usr/sbin/policy-rc.d start; echo policy=$? && ls /var/lib/apt/lists"])
    assert output.decode().split() == ["/usr/bin/less", "policy=101"]  # and no apt lists
    # as a node starts it: the entrypoint runs sshd and nothing else
    container = client.containers.run(tiny_layer, detach=True, init=True)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the entrypoint made its host key and exec'ed sshd
            code, listing = container.exec_run(["ps", "-eo", "comm="])
            running = set(listing.decode().split()) - {"ps"}
            if (code == 0 and "sshd" in running) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert sorted(running) == ["docker-init", "sshd"]
    finally:
        container.remove(force=True)


@pytest.mark.docker
@pytest.mark.slow
def test_a_second_build_is_a_lookup_and_the_cli_prints_the_layer(
        tiny_layer: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    class Packaged:
        def image_packages(self) -> tuple[str, ...]:
            return TINY

    monkeypatch.setattr(targets, "get", lambda name: Packaged())
    assert images_cli.main(["build", "--target", "tiny"]) == 0
    out, err = capsys.readouterr()
    # another engineer may have edited the project meanwhile: then both layers are rebuilt
    if "node image" in err and "is cached" in err.split("target tiny")[0]:
        assert out.strip() == tiny_layer
        assert f"target layer {tiny_layer} (less) is cached" in err
    assert out.strip().startswith("kraft-jepsen/node-less:")


@pytest.mark.docker
@pytest.mark.slow
def test_the_backend_runs_nodes_in_the_layer_its_spec_asks_for(
        tiny_layer: str, tmp_path: Path, run_ids: Callable[[str], str]) -> None:
    backend = DockerBackend()  # no image given: the spec's packages choose it
    try:
        backend.setup(ClusterSpec(run_id=run_ids("layer"), nodes=["n1"], ports={"p": 1},
                                  run_dir=tmp_path, options={"packages": "less"}))
        assert backend.exec("n1", ["which", "less"]).stdout.strip() == "/usr/bin/less"
        assert "image kraft-jepsen/node-less:" in (tmp_path / "backend.log").read_text()
    finally:
        backend.teardown()
