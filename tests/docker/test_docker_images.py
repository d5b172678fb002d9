"""The images: cached by their inputs, the project runnable inside, clear errors when tools lack."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from harness import images
from harness.commands import images as images_cli


@pytest.mark.docker
@pytest.mark.slow
def test_second_build_is_a_cached_lookup(node_image: str, capsys: pytest.CaptureFixture[str]
                                         ) -> None:
    started = time.monotonic()
    assert images_cli.main(["build"]) == 0
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    # Another engineer may have edited the project meanwhile; then the node layer is rebuilt.
    if out.strip() == node_image:
        assert "is cached" in err
        assert elapsed < 10, f"a cached build took {elapsed:.1f}s"
    assert out.strip().startswith(f"{images.NODE_REPO}:")


@pytest.mark.docker
@pytest.mark.slow
def test_node_image_runs_the_project(node_image: str) -> None:
    client = images.docker_client()
    try:
        image = client.images.get(node_image)
        assert image.labels.get(images.PROJECT_LABEL) == "1"
        output = client.containers.run(
            node_image, entrypoint=["sh", "-c"], remove=True,
            command=["kraft --help && python3 -c 'import sys; assert sys.version_info >= (3, 11)' "
                     "&& /opt/kraft/bin/python -c 'import kio, reference_node' && echo fine"])
        text = output.decode()
        assert "usage: kraft COMMAND" in text
        assert text.strip().endswith("fine")
    finally:
        client.close()


def test_missing_debootstrap_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(images.shutil, "which", lambda name: None)
    fake_client: Any = object()
    with pytest.raises(images.ImageError, match="apt-get install debootstrap"):
        images._build_debootstrap_base(fake_client, "bookworm", images.DEFAULT_MIRROR,
                                       "kraft-jepsen/base:x", {}, lambda line: None)


def test_missing_engine_says_how_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(images.ImageError, match="no Docker engine answers at unix:///nonexistent"):
        images.docker_client()


def test_mirror_is_read_from_both_apt_formats() -> None:
    one_line = "deb [arch=amd64] http://mirror.example/debian bookworm main\n" \
               "deb http://security.example/debian-security bookworm-security main\n"
    assert next(images._apt_entries(one_line, deb822=False)) == (
        "http://mirror.example/debian", ["bookworm"])
    deb822 = ("Types: deb\n# a comment\nURIs: http://deb.example/debian\n"
              "Suites: bookworm bookworm-updates\nComponents: main\n\n"
              "Types: deb\nURIs: http://deb.example/debian-security\n"
              "Suites: bookworm-security\n")
    entries = list(images._apt_entries(deb822, deb822=True))
    assert entries[0] == ("http://deb.example/debian", ["bookworm", "bookworm-updates"])
    assert entries[1][1] == ["bookworm-security"]


def test_input_hashes_follow_the_inputs(tmp_path: Path) -> None:
    pins = images.node_pins()
    assert "kio" in dict(pins)
    base = images.BuildOptions()
    first = images.base_hash(base, "http://a/debian")
    assert first == images.base_hash(base, "http://a/debian")
    assert first != images.base_hash(base, "http://b/debian")
    assert first != images.base_hash(images.BuildOptions(release="trixie"), "http://a/debian")
    assert images.node_hash("base:1", pins) != images.node_hash("base:2", pins)
