"""A fault-injecting FUSE filesystem under a node's data directory, like Jepsen's lazyfs.

Theory of operation. `kraft faultfs mount BACKING MOUNTPOINT --control SOCK` serves BACKING at
MOUNTPOINT. Metadata (create, mkdir, rename, unlink, ...) goes straight to BACKING and is
durable at once; file data written is kept in the filesystem's memory, as a page cache keeps
it, and reaches the backing file only when that file is fsynced. A process that crashes loses
nothing; a power cut (`lose-unsynced`) loses what was not fsynced, or keeps a torn prefix of it.
Reads and sizes show the unsynced data merged over the backing files. Details and consequences
(rename without fsync leaves an empty file, as ext4 with noauto_da_alloc): `nemesis.faultfs.fs`.

The control socket takes one JSON object per line and answers one per line:

- `{"op":"ping"}` -> `{"ok":true}`
- `{"op":"stall","seconds":S}`: fsync, fdatasync and directory fsync block for S seconds from
  now (or until heal); reads go on, and so do writes, but for writes to a file whose own fsync
  is blocked: the kernel holds that file's inode lock through a FUSE fsync (ext4 would not). `{"op":"slow","ms":M}`: every fsync takes at
  least M ms (0: off). `{"op":"heal"}`: both off, blocked fsyncs go on.
- `{"op":"lose-unsynced","torn":bool,"seed":int}` -> `{"files":{rel:{"dropped":n,"kept":n}},
  "dropped_bytes":n,"kept_bytes":n}`: with torn, each file keeps a random prefix of its unsynced
  writes (the last one cut at a random byte), drawn from random.Random(seed).
- `{"op":"corrupt","globs":[...],"mode":"bitflip"|"truncate","seed":int}` -> `{"file":rel|null,
  "mode":..,"size_before":n,"size_after":n,"flipped":[[byte,bit],...]}` (`nemesis.faultfs.corrupt`).
- `{"op":"repair"}` -> `{"repaired":[rel...],"not_repaired":[rel...]}`: every corruption since
  the last repair undone (bits flipped back, the cut tail written back), newest first.
- `{"op":"status"}` -> `{"unsynced_bytes","unsynced_files","fsyncs","fsyncs_stalled",
  "stall_remaining","slow_ms"}`. Anything wrong -> `{"error":"..."}`; the filesystem lives on.

Modules: `state` (the pure model of one file's unsynced data), `gate` (stall and slow),
`corrupt` (damage to plain files), `control` (the socket), `fs` (the FUSE operations), `host`
(can this host mount, the mount table, unmount), `cli` (`kraft faultfs`).

Why mfusepy: a pure-Python ctypes binding over libfuse3, so the node's Docker image needs only
Debian's `fuse3` (with libfuse3-3) and a plain wheel, no compiler. pyfuse3, the other libfuse3
binding, needs Cython, libfuse3-dev and trio to build. mfusepy tries libfuse 2 first; this
package makes it load libfuse3 (FUSE_LIBRARY_NAME=fuse3, unless FUSE_LIBRARY_NAME or
FUSE_LIBRARY_PATH is set). Nothing here imports mfusepy at import time but `fs`, so the harness
can import this package on a machine without FUSE.
"""

from __future__ import annotations

from .control import request
from .host import FSNAME_PREFIX, check_usable, mounts, sweep, unmount

__all__ = ["FSNAME_PREFIX", "check_usable", "mounts", "request", "sweep", "unmount"]
