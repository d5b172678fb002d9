"""`kraft clean`'s docker sweep takes only what dead harnesses left, on a fake engine (no Docker
needed): a live run's containers, network and keys stay, unless `--all`."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from harness import images
from harness.backends import docker


class Thing:
    """A container or network of the fake engine, with the labels the backend gives them."""

    def __init__(self, engine: Engine, kind: str, name: str, labels: dict[str, str]) -> None:
        self.engine, self.kind, self.name, self.labels = engine, kind, name, labels
        self.attrs = {"Labels": labels}

    def remove(self, **_options: Any) -> None:
        self.engine.things.remove(self)


class Listing:
    def __init__(self, engine: Engine, kind: str) -> None:
        self.engine, self.kind = engine, kind

    def list(self, all: bool = False, filters: dict[str, str] | None = None) -> list[Thing]:
        key, _, value = (filters or {}).get("label", "").partition("=")
        return [t for t in self.engine.things
                if t.kind == self.kind and (not key or t.labels.get(key) == value)]


class Engine:
    def __init__(self) -> None:
        self.things: list[Thing] = []
        self.containers = Listing(self, "container")
        self.networks = Listing(self, "network")

    def run(self, run_id: str, owner: str) -> None:
        labels = {docker.LABEL: "1", docker.RUN_LABEL: run_id, docker.OWNER_LABEL: owner}
        self.things += [Thing(self, "container", f"{run_id}-n1", labels),
                        Thing(self, "network", run_id, labels)]

    def names(self) -> set[str]:
        return {t.name for t in self.things}

    def close(self) -> None:
        pass


def dead_owner() -> str:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return f"{socket.gethostname()}:{pid}:gone"


def test_sweep_takes_orphans_only_and_all_takes_everything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    monkeypatch.setattr(images, "docker_client", lambda: engine)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the key directories live here
    engine.run("live", docker._owner())  # this process: a harness that is alive
    engine.run("dead", dead_owner())
    engine.run("elsewhere", "another-host:1:123")  # alive or not, this host cannot tell
    engine.run("unowned", "")
    for run, owner in (("live", docker._owner()), ("dead", dead_owner())):
        keys = tmp_path / f"{docker.KEY_DIR_PREFIX}{run}-x"
        keys.mkdir()
        (keys / "owner").write_text(owner)

    removed = docker.sweep()
    assert engine.names() == {"live", "live-n1", "elsewhere", "elsewhere-n1", "unowned",
                              "unowned-n1"}
    assert sorted(removed) == sorted(["container dead-n1", "network dead",
                                      f"key directory {tmp_path}/{docker.KEY_DIR_PREFIX}dead-x"])
    assert (tmp_path / f"{docker.KEY_DIR_PREFIX}live-x").is_dir()

    docker.sweep(everything=True)
    assert engine.names() == set()
    assert not list(tmp_path.glob(f"{docker.KEY_DIR_PREFIX}*"))
