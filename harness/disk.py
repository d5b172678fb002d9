"""The disks of a run with disk faults: a fault-injecting filesystem under each node's data.

Theory of operation. When a disk nemesis (`nemesis.disk`) is chosen, the runner mounts the
project's FUSE filesystem (`nemesis.faultfs`, `kraft faultfs`) over each node's data directory
(the target says where: `contracts.target.HasDataDir`) after the backend made the hosts and
before the target formats and starts anything, so that every byte the node ever writes goes
through it. The real files live beside it, in `<data dir>.backing`. Everything goes through the
backend's `exec` (`kraft faultfs ...` on the node's host), so the same code drives a local mount
and one inside a container reached over SSH. The filesystem keeps what was written but not
fsynced in its own memory, as a kernel's page cache does: a killed process loses nothing, and
`lose_unsynced` is what a power cut then takes away.

Each filesystem answers on a control socket with a short path (unix socket paths are limited to
108 bytes) named after the run, and is named `kraft-faultfs:<run id>` in the mount table, so that
`kraft clean` finds what a run left mounted. `unmount_all` runs after the target's data was
collected and before the backend removes the hosts; a filesystem that stopped answering during
the run (`dead`) makes the run fail (exit 3): its verdict would say nothing about the target.
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from contracts.backend import Backend, BackendError
from contracts.target import HasDataDir

FSNAME_PREFIX = "kraft-faultfs"
MOUNT_TIMEOUT = 30.0
CTL_TIMEOUT = 30.0
# fsync stalls end by themselves after this long, should the harness never heal them
STALL_CAP = 120.0


class Disks:
    """The fault filesystems of a run's nodes, and the levers the disk nemeses pull."""

    def __init__(self, backend: Backend, target_db: HasDataDir, nodes: list[str],
                 run_id: str) -> None:
        self.backend = backend
        self.db = target_db
        self.nodes = list(nodes)
        self.run_id = run_id
        self.mounted: list[str] = []
        tag = hashlib.sha1(run_id.encode()).hexdigest()[:10]
        self._sockets = {node: f"/tmp/kfs-{tag}-{node}.sock" for node in self.nodes}

    def data_dir(self, node: str) -> str:
        return self.db.data_dir(self.backend, node)

    def backing_dir(self, node: str) -> str:
        return self.data_dir(node) + ".backing"

    def socket(self, node: str) -> str:
        return self._sockets[node]

    # -- lifecycle ---------------------------------------------------------------------------

    def mount_all(self) -> None:
        """Mount every node's filesystem (in parallel); BackendError names the first that
        failed, and whatever did mount is unmounted again by `unmount_all`."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            for future in [pool.submit(self._mount, node) for node in self.nodes]:
                future.result()

    def _mount(self, node: str) -> None:
        log = self.log_path(node)
        result = self.backend.exec(
            node, ["kraft", "faultfs", "mount", self.backing_dir(node), self.data_dir(node),
                   "--control", self.socket(node), "--fsname", f"{FSNAME_PREFIX}:{self.run_id}",
                   "--daemon", "--log", log],
            check=False, timeout=MOUNT_TIMEOUT)
        if result.exit_status != 0:
            why = (result.stderr or result.stdout).strip().splitlines()
            raise BackendError(f"{node}: the fault filesystem did not mount over "
                               f"{self.data_dir(node)}: {why[-1] if why else 'no message'} "
                               f"(exit {result.exit_status}; see nodes/{node}/faultfs.log)")
        self.mounted.append(node)

    def unmount_all(self) -> list[str]:
        """Unmount every filesystem this run mounted; returns the problems met (a filesystem
        that would not go), never raises."""
        problems: list[str] = []
        for node in list(self.mounted):
            try:
                self.backend.exec(node, ["kraft", "faultfs", "unmount", self.data_dir(node)],
                                  timeout=MOUNT_TIMEOUT)
                self.mounted.remove(node)
            except Exception as exc:
                problems.append(f"{node}: unmount of {self.data_dir(node)} failed: {exc}")
        return problems

    def collect(self, node: str, into: Path) -> None:
        """Copy the filesystem's log (`faultfs.log`: every control command and its answer) into
        the node's results directory."""
        self.backend.fetch(node, self.log_path(node), into)

    def log_path(self, node: str) -> str:
        return f"{self.backend.node_dir(node)}/faultfs.log"

    def dead(self) -> list[str]:
        """The nodes whose filesystem no longer answers (crashed or unmounted underneath)."""
        gone = []
        for node in self.mounted:
            try:
                self.control(node, "ping")
            except BackendError:
                gone.append(node)
        return gone

    # -- faults --------------------------------------------------------------------------------

    def control(self, node: str, op: str, *args: str) -> dict[str, Any]:
        """One control command on `node`'s filesystem; its JSON answer. BackendError when the
        filesystem does not answer or refuses."""
        result = self.backend.exec(node, ["kraft", "faultfs", "ctl", self.socket(node), op,
                                          *args], check=False, timeout=CTL_TIMEOUT)
        if result.exit_status != 0:
            why = (result.stderr or result.stdout).strip()
            raise BackendError(f"{node}: the fault filesystem did not do {op!r}: "
                               f"{why or f'exit {result.exit_status}'}")
        try:
            answer = json.loads(result.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            raise BackendError(f"{node}: the fault filesystem answered {op!r} with "
                               f"{result.stdout!r}") from exc
        if not isinstance(answer, dict) or "error" in answer:
            raise BackendError(f"{node}: the fault filesystem refused {op!r}: {answer}")
        return answer

    def stall(self, node: str, seconds: float = STALL_CAP) -> dict[str, Any]:
        return self.control(node, "stall", f"{seconds:g}")

    def heal(self, node: str) -> dict[str, Any]:
        return self.control(node, "heal")

    def status(self, node: str) -> dict[str, Any]:
        return self.control(node, "status")

    def lose_unsynced(self, node: str, torn: bool, seed: int) -> dict[str, Any]:
        return self.control(node, "lose-unsynced", *(["--torn"] if torn else []),
                            "--seed", str(seed))

    def corrupt(self, node: str, kind: str, mode: str, seed: int) -> dict[str, Any]:
        """Damage the newest file of `kind`, or, when the node has none (no snapshot yet), of
        the next kind the target names that it has."""
        files = self.db.data_files()
        if kind not in files:
            raise BackendError(f"the target names no {kind!r} files to corrupt")
        globs = [*files[kind], *(g for k, gs in files.items() if k != kind for g in gs)]
        return self.control(node, "corrupt", *[a for g in globs for a in ("--glob", g)],
                            "--mode", mode, "--seed", str(seed))

    def repair(self, node: str) -> dict[str, Any]:
        return self.control(node, "repair")

    def file_kinds(self) -> list[str]:
        return list(self.db.data_files())


def unusable(backend: Backend, db: object) -> str | None:
    """Why the disk nemeses cannot run with this backend and target (None: they can), checked
    before anything is deployed."""
    if not isinstance(db, HasDataDir):
        return "the target does not say where its data lives (contracts.target.HasDataDir)"
    if backend.name == "docker":
        # the filesystem runs inside the node containers, from the node image; the host only
        # lends them its FUSE device
        if not os.path.exists("/dev/fuse"):
            return ("this host has no /dev/fuse to give the node containers "
                    "(modprobe fuse, or apt-get install fuse3)")
        return None
    from nemesis.faultfs import check_usable

    return check_usable()
