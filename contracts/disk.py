"""The disk levers: what the disk nemeses (`nemesis.disk`) pull on a node's data directory.

The harness implements them (`harness.disk.Disks`, over `kraft faultfs`, the fault-injecting
filesystem it mounts under each node's data before the node first starts) and hands them to the
faults as `nemesis.base.Env.disk`; neither side knows the other, only this protocol.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class CanFaultDisk(Protocol):
    """The disk levers (implemented by the runner over `kraft faultfs` on each node's host)."""

    def stall(self, node: str) -> dict[str, Any]:
        """Block fsync on `node`'s disk until `heal`."""

    def heal(self, node: str) -> dict[str, Any]:
        """End a stall: blocked fsyncs go on. Idempotent."""

    def status(self, node: str) -> dict[str, Any]: ...

    def lose_unsynced(self, node: str, torn: bool, seed: int) -> dict[str, Any]:
        """Drop what `node`'s disk holds unsynced (a torn prefix of it kept when `torn`)."""

    def corrupt(self, node: str, kind: str, mode: str, seed: int) -> dict[str, Any]:
        """Damage the newest file of `kind` on `node`'s disk (`mode`: bitflip or truncate)."""

    def repair(self, node: str) -> dict[str, Any]:
        """Undo every corruption of `node`'s disk since the last repair."""

    def file_kinds(self) -> list[str]:
        """The kinds of file the target names for `corrupt`."""
