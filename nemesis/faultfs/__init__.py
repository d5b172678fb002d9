"""A fault-injecting FUSE filesystem under a node's data directory, like Jepsen's lazyfs.

Theory of operation. `kraft faultfs mount BACKING MOUNTPOINT --control SOCK` serves BACKING at
MOUNTPOINT. Metadata (create, mkdir, rename, unlink, ...) goes straight to BACKING and is
durable at once; file data written is kept in the filesystem's memory, as a page cache keeps
it, and reaches the backing file only when that file is fsynced. A process that crashes loses
nothing; a power cut (`lose-unsynced`) loses what was not fsynced, or keeps a torn prefix of it.
Reads and sizes show the unsynced data merged over the backing files. Details and consequences
(rename without fsync leaves an empty file, as ext4 with noauto_da_alloc): `nemesis.faultfs.fs`.

The control socket takes one JSON object per line (`ping`, `stall`, `slow`, `heal`,
`lose-unsynced`, `corrupt`, `repair`, `status`) and answers one per line; its protocol, and why the
binding is mfusepy (no compiler needed; only `fs` imports it): docs/internals/faultfs.md#faultfs

Modules: `state` (the pure model of one file's unsynced data), `gate` (stall and slow),
`corrupt` (damage to plain files), `control` (the socket), `fs` (the FUSE operations), `host`
(can this host mount, the mount table, unmount), `cli` (`kraft faultfs`).
"""

from __future__ import annotations

from .control import request
from .host import FSNAME_PREFIX, check_usable, mounts, sweep, unmount

__all__ = ["FSNAME_PREFIX", "check_usable", "mounts", "request", "sweep", "unmount"]
