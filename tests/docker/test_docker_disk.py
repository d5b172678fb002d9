"""The disk nemeses' filesystem inside node containers: only a run that asks for it (ClusterSpec
option `fuse`) gets /dev/fuse and SYS_ADMIN; there `kraft faultfs` mounts over a data directory,
drops what was not fsynced on a power cut, repairs a corruption, and unmounts. Real containers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts.backend import Backend, ClusterSpec
from harness.backends.docker import DockerBackend
from harness.disk import Disks

pytestmark = pytest.mark.docker
PORTS = {"http": 8000}


class DataDir:
    """A target that keeps its data in `<node dir>/data`, with one kind of file."""

    def data_dir(self, backend: Backend, node: str) -> str:
        return f"{backend.node_dir(node)}/data"

    def data_files(self) -> dict[str, list[str]]:
        return {"segment": ["*.log"]}


def sh(backend: DockerBackend, node: str, script: str) -> str:
    return backend.exec(node, ["sh", "-c", script]).stdout


def test_fuse_only_when_asked_and_a_power_cut_in_a_container(
        node_image: str, tmp_path: Path, run_ids: Callable[[str], str]) -> None:
    plain = DockerBackend(image=node_image)
    fused = DockerBackend(image=node_image)
    try:
        plain.setup(ClusterSpec(run_id=run_ids("nofuse"), nodes=["n1"], ports=PORTS,
                                run_dir=tmp_path / "plain"))
        refused = plain.exec("n1", ["kraft", "faultfs", "check"], check=False)
        assert refused.exit_status == 69
        assert "no FUSE device" in refused.stdout + refused.stderr
        run_id = run_ids("fuse")
        fused.setup(ClusterSpec(run_id=run_id, nodes=["n1"], ports=PORTS,
                                run_dir=tmp_path / "fused", options={"fuse": "1"}))
        disks = Disks(fused, DataDir(), ["n1"], run_id)
        disks.mount_all()
        data = disks.data_dir("n1")
        sh(fused, "n1", f"printf synced > {data}/0.log && python3 -c \"import os; "
                        f"fd = os.open('{data}/0.log', os.O_RDWR); os.fsync(fd)\" && "
                        f"printf -- '-unsynced' >> {data}/0.log")
        assert sh(fused, "n1", f"cat {data}/0.log") == "synced-unsynced"
        lost = disks.lose_unsynced("n1", torn=False, seed=1)
        assert lost["dropped_bytes"] == len("-unsynced")
        assert sh(fused, "n1", f"cat {data}/0.log") == "synced"
        cut = disks.corrupt("n1", "segment", "truncate", seed=2)
        assert cut["file"] == "0.log" and cut["size_after"] < len("synced")
        assert disks.repair("n1")["repaired"] == ["0.log"]
        assert sh(fused, "n1", f"cat {data}/0.log") == "synced"
        assert disks.unmount_all() == []
        assert f" {data} " not in sh(fused, "n1", "cat /proc/mounts")
        # what stayed on the disk underneath: only what was fsynced
        assert sh(fused, "n1", f"cat {data}.backing/0.log") == "synced"
    finally:
        for backend in (plain, fused):
            with contextlib.suppress(Exception):
                backend.teardown()
