"""Nothing of a run survives it: teardown, an interrupted setup, the sweeps of leftovers.

`sweep(everything=True)` (for `kraft clean --all`) removes everything the project labelled on the
engine, including runs of other users of a shared engine; its test runs only when no other run is
up, and otherwise is skipped with that reason. Plain `sweep()` (`kraft clean`) leaves live runs
alone: a run under way is not disturbed by a `kraft clean` beside it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contracts.backend import BackendError, ClusterSpec
from harness import images
from harness.backends import docker as backend_module
from harness.backends.docker import LABEL, OWNER_LABEL, RUN_LABEL, DockerBackend

ClusterFactory = Callable[[int], DockerBackend]
RunIds = Callable[[str], str]
PORTS = {"http": 8000}

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture
def client(node_image: str) -> Any:
    client = images.docker_client()
    yield client
    client.close()


def labelled(client: Any, run_id: str) -> list[str]:
    flt = {"label": f"{RUN_LABEL}={run_id}"}
    return ([f"container {c.name}" for c in client.containers.list(all=True, filters=flt)]
            + [f"network {n.name}" for n in client.networks.list(filters=flt)])


def test_teardown_removes_containers_network_and_keys(cluster_factory: ClusterFactory,
                                                      client: Any) -> None:
    backend = cluster_factory(2)
    spec = backend._spec
    assert spec is not None
    key_dir = backend._key_dir
    assert key_dir is not None and (key_dir / "id_ed25519").exists()
    names = labelled(client, spec.run_id)
    assert len(names) == 3, names
    for container in client.containers.list(filters={"label": f"{RUN_LABEL}={spec.run_id}"}):
        host = container.attrs["HostConfig"]
        assert host["Init"] is True
        assert host["CapAdd"] == ["NET_ADMIN"]
        assert host["Privileged"] is False
        assert container.labels[LABEL] == "1"
    backend.spawn("n1", ["sleep", "600"], "sleep.log")

    backend.teardown()
    assert labelled(client, spec.run_id) == []
    assert not key_dir.exists()
    backend.teardown()  # idempotent


def test_interrupted_setup_leaves_nothing(node_image: str, client: Any, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch, run_ids: RunIds
                                          ) -> None:
    def interrupted(self: DockerBackend, node: str, timeout: float = 30.0) -> None:
        raise KeyboardInterrupt  # as a Ctrl-C half-way through setup

    monkeypatch.setattr(DockerBackend, "_read_host_key", interrupted)
    run_id = run_ids("ctrlc")
    backend = DockerBackend(image=node_image)
    with pytest.raises(KeyboardInterrupt):
        backend.setup(ClusterSpec(run_id=run_id, nodes=["n1", "n2"], ports=PORTS,
                                  run_dir=tmp_path))
    assert labelled(client, run_id) == []
    assert "setup failed" in (tmp_path / "backend.log").read_text()


def test_bad_image_is_a_backend_error_and_leaves_nothing(client: Any, tmp_path: Path,
                                                         run_ids: RunIds) -> None:
    run_id = run_ids("badimage")
    backend = DockerBackend(image="kraft-jepsen/no-such-image:0")
    with pytest.raises(BackendError, match="no-such-image"):
        backend.setup(ClusterSpec(run_id=run_id, nodes=["n1"], ports=PORTS, run_dir=tmp_path))
    assert labelled(client, run_id) == []


def dead_owner() -> str:
    """An owner label naming a harness process of this host that has ended."""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return f"{os.uname().nodename}:{pid}:gone"


def test_setup_sweeps_what_dead_runs_left_but_not_live_runs(
        node_image: str, client: Any, cluster_factory: ClusterFactory, run_ids: RunIds) -> None:
    orphan_run, live_run, foreign = run_ids("orphan"), run_ids("live"), run_ids("x")
    made = []
    for run_id, owner in ((orphan_run, dead_owner()), (live_run, backend_module._owner())):
        labels = {LABEL: "1", RUN_LABEL: run_id, OWNER_LABEL: owner}
        made.append(client.networks.create(f"kj-{run_id}", labels=labels))
        made.append(client.containers.create(node_image, name=f"kj-{run_id}", labels=labels))
    # not the project's: no label, so never touched, whatever its name says
    made.append(client.containers.create(node_image, name=f"kraft-jepsen-{foreign}"))
    try:
        backend = cluster_factory(1)
        assert labelled(client, orphan_run) == []
        assert len(labelled(client, live_run)) == 2
        client.containers.get(f"kraft-jepsen-{foreign}")  # still there
        backend.teardown()
    finally:
        for thing in made:
            with contextlib.suppress(Exception):  # the sweep under test may have removed it
                thing.remove(force=True) if hasattr(thing, "exec_run") else thing.remove()


def test_sweep_of_everything_removes_everything_labelled(cluster_factory: ClusterFactory, client: Any) -> None:
    backend = cluster_factory(2)
    spec = backend._spec
    assert spec is not None
    others = [name for name in (
        [c.name for c in client.containers.list(all=True, filters={"label": f"{LABEL}=1"})])
        if spec.run_id not in str(name)]
    if others:
        backend.teardown()
        pytest.skip(f"other runs are up on this engine ({', '.join(others[:3])}...); "
                    "sweep(everything=True) would remove them too")
    backend.spawn("n2", ["sleep", "600"], "sleep.log")
    backend.signal("n2", signal.SIGSTOP)  # a paused node is swept like any other
    assert backend_module.sweep() == []  # this run's harness (this process) is alive
    removed = backend_module.sweep(everything=True)
    assert any(f"-{'n1'}" in line for line in removed), removed
    assert labelled(client, spec.run_id) == []
    assert client.containers.list(all=True, filters={"label": f"{LABEL}=1"}) == []
    assert client.networks.list(filters={"label": f"{LABEL}=1"}) == []
    backend.teardown()  # after a sweep, teardown still succeeds


def test_kraft_clean_during_a_live_run_leaves_it_alone(node_image: str, client: Any,
                                                       tmp_path: Path) -> None:
    """A `kraft test` under way, a `kraft clean` beside it: the run goes on to its verdict."""
    run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "docker", "--nemesis", "none",
         "--time-limit", "10", "--rate", "20", "--results-dir", str(tmp_path / "results")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        owner = f"{OWNER_LABEL}={backend_module._owner(run.pid)}"
        deadline = time.monotonic() + 180
        names: list[str] = []
        while len(names) < 3 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            names = [c.name for c in client.containers.list(filters={"label": owner})]
        assert len(names) == 3, f"the run's containers never came up: {names}"
        clean = subprocess.run([sys.executable, "-m", "harness.cli", "clean"],
                               capture_output=True, text=True, timeout=300)
        assert clean.returncode == 0, clean.stdout + clean.stderr
        assert not any(name in clean.stdout for name in names), clean.stdout
        assert len(client.containers.list(filters={"label": owner})) == 3
        out, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.send_signal(signal.SIGINT)  # its own cleanup removes what it made
            run.communicate(timeout=300)
    assert run.returncode == 0, out
    assert "verdict: VALID" in out
