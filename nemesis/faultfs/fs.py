"""The filesystem: a passthrough of a backing directory whose file data is durable only once
fsynced, served over libfuse3 through mfusepy. Imports mfusepy (and so loads libfuse3).

Theory of operation. Every metadata operation goes straight to the backing directory and is
durable at once, as if the journal of an ext4 had committed it. File data is not: a write lands in
a `FileState` (`nemesis.faultfs.state`) held in this process, and reaches the backing file only
when the file is fsynced or fdatasynced, never on close. Reads and getattr show the unsynced state
merged over the backing file, so a process that crashes and reopens its files finds everything it
wrote, as the kernel's page cache would keep it; `lose_unsynced` is the power cut that takes what
was not fsynced away, `corrupt` damages what the disk stores.

States are keyed by the backing file's inode, not by its path, so a rename moves nothing. The
result behaves as ext4 with `noauto_da_alloc`: a file written and renamed without fsync is empty
after a power cut. Kernel caching is off, and libfuse runs multithreaded so that stalled fsyncs
block no one else. Details: docs/internals/faultfs.md#fs
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import logging
import os
import random
import signal
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import corrupt as damage
from .control import ControlServer
from .gate import FsyncGate, Interrupted
from .host import use_libfuse3
from .state import FileState, Op, Pread, apply_plan

use_libfuse3()
import mfusepy  # noqa: E402  (after the library is chosen)

log = logging.getLogger("faultfs")

Key = tuple[int, int]
# What a backing descriptor must not inherit from the caller's open: durability and append
# position are this filesystem's business, truncation is unsynced data.
_STRIPPED_FLAGS = (os.O_TRUNC | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_ACCMODE
                   | getattr(os, "O_DIRECT", 0) | os.O_SYNC | os.O_DSYNC | os.O_NOCTTY)
_AT_FDCWD = -100


@dataclass(slots=True)
class Tracked:
    """A file with a state: the state, a descriptor of its own on the backing inode, and the
    path it was last seen at (for reports)."""

    state: FileState
    fd: int
    path: str
    pread: Pread = field(init=False)
    """os.pread on `fd`, bound once (a write calls it to fill a page)."""

    def __post_init__(self) -> None:
        self.pread = functools.partial(os.pread, self.fd)


@dataclass(slots=True)
class Handle:
    """An open file: the backing descriptor (also its FUSE fh), its inode, and the path it was
    opened at (kept up to date by renames, for reports)."""

    fd: int
    key: Key
    path: str


class FaultFs(mfusepy.Operations):
    """The operations; `levers` for the control channel."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.root = os.path.realpath(backing)
        self._mutex = threading.Lock()
        self.states: dict[Key, Tracked] = {}
        self.handles: dict[int, Handle] = {}
        self.opens: dict[Key, int] = {}
        self.gate = FsyncGate()
        self._fuse: int | None = None  # struct fuse *, for invalidations
        # what `corrupt` did since the last `repair`, to undo it
        self._damaged: list[tuple[Path, damage.Damage]] = []

    # --- lifecycle ----------------------------------------------------------------------------

    def init(self, path: str) -> None:
        with contextlib.suppress(Exception):
            self._fuse = mfusepy._libfuse.fuse_get_context().contents.fuse
        log.info("mounted %s", self.root)

    def destroy(self, path: str) -> None:
        self._fuse = None
        with self._mutex:
            # An unmount is a clean shutdown: the cache is written back.
            for tracked in self.states.values():
                with contextlib.suppress(OSError):
                    self._write_back(tracked)
                with contextlib.suppress(OSError):
                    os.close(tracked.fd)
            self.states.clear()
        log.info("unmounted %s", self.root)

    # --- helpers ------------------------------------------------------------------------------

    def _track(self, key: Key, fd: int, path: str | None) -> Tracked:
        """The state of inode `key` (made, with a dup of `fd`, if it has none). Under the lock."""
        tracked = self.states.get(key)
        if tracked is None:
            own = os.dup(fd)
            tracked = Tracked(FileState(os.fstat(own).st_size), own, path or "")
            self.states[key] = tracked
        elif path is not None:
            tracked.path = path
        return tracked

    def _untrack_if_unused(self, key: Key) -> None:
        """Drop the state of `key` when no handle has it open and it is clean or its inode has
        no name left. Under the lock."""
        tracked = self.states.get(key)
        if tracked is None or self.opens.get(key, 0) > 0:
            return
        if tracked.state.dirty and os.fstat(tracked.fd).st_nlink > 0:
            return
        del self.states[key]
        os.close(tracked.fd)

    @staticmethod
    def _write_back(tracked: Tracked) -> None:
        """The state's unsynced data written to the backing file (not fsynced)."""
        state = tracked.state
        if state.dirty:
            _apply(state.sync_plan(), tracked.fd)
            state.synced()

    def _tracked_at(self, st: os.stat_result) -> Tracked | None:
        """The state of the inode `st` describes, if it has one. Under the lock."""
        return self.states.get((st.st_dev, st.st_ino))

    def _handle(self, fh: int | None) -> Handle | None:
        return None if fh is None else self.handles.get(fh)

    def _invalidate(self, paths: list[str]) -> None:
        """Drop the kernel's cached pages and attributes of `paths` (best effort)."""
        if self._fuse is None:
            return
        for path in paths:
            with contextlib.suppress(Exception):
                mfusepy._libfuse.fuse_invalidate_path(ctypes.c_void_p(self._fuse),
                                                      path.encode())

    # --- attributes and directories -----------------------------------------------------------

    def attributes(self, path: str | None, fh: int | None) -> tuple[os.stat_result, int, int]:
        """The backing's stat of `path` (or of handle `fh`), and the size and modification time
        (ns) the mount shows: those of the unsynced state when there is one."""
        handle = self._handle(fh)
        if handle is not None:
            st = os.fstat(handle.fd)
        elif path is not None:
            st = os.lstat(self.root + path)
        else:
            raise mfusepy.FuseOSError(errno.ENOENT)
        with self._mutex:
            tracked = self._tracked_at(st)
            if tracked is not None and tracked.state.dirty:
                state = tracked.state
                mtime = state.mtime_ns or 0
                return st, state.size, mtime if mtime > st.st_mtime_ns else st.st_mtime_ns
        return st, st.st_size, st.st_mtime_ns

    def getattr(self, path: str | None, fh: int | None = None) -> dict[str, Any]:
        # mfusepy's form; `_Fuse.fgetattr` fills the C struct from `attributes` directly.
        st, size, mtime = self.attributes(path, fh)
        return {
            "st_mode": st.st_mode, "st_ino": st.st_ino, "st_nlink": st.st_nlink,
            "st_uid": st.st_uid, "st_gid": st.st_gid, "st_size": size,
            "st_atime": st.st_atime_ns, "st_mtime": mtime, "st_ctime": max(mtime, st.st_ctime_ns),
            "st_blocks": max(st.st_blocks, (size + 511) // 512) if size != st.st_size
            else st.st_blocks, "st_blksize": st.st_blksize, "st_rdev": st.st_rdev,
        }

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self.root + path)]

    def readlink(self, path: str) -> str:
        return os.readlink(self.root + path)

    def statfs(self, path: str) -> dict[str, int]:
        sv = os.statvfs(self.root + path)
        return {key: getattr(sv, key) for key in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
            "f_favail", "f_flag", "f_namemax")}

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        with self.gate.passage(_interrupted):
            fd = os.open(self.root + path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return 0

    # --- metadata: straight to the backing, durable at once ---------------------------------

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self.root + path, mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self.root + path)
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self.root + target)
        return 0

    def link(self, target: str, source: str) -> int:
        os.link(self.root + source, self.root + target)
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self.root + path, mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.lchown(self.root + path, uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int | None, int | None] | None = None) -> int:
        """`times`: (atime, mtime) in ns, None for one to leave as it is; None for now."""
        full = self.root + path
        if times is None:
            os.utime(full)
        else:
            atime, mtime = times
            if atime is None or mtime is None:
                st = os.lstat(full)
                atime = st.st_atime_ns if atime is None else atime
                mtime = st.st_mtime_ns if mtime is None else mtime
            os.utime(full, ns=(atime, mtime))
        st = os.lstat(full)
        with self._mutex:
            tracked = self._tracked_at(st)
            if tracked is not None:
                tracked.state.mtime_ns = None
        return 0

    def unlink(self, path: str) -> int:
        full = self.root + path
        st = os.lstat(full)
        os.unlink(full)
        if st.st_nlink <= 1:
            with self._mutex:
                self._untrack_if_unused((st.st_dev, st.st_ino))
        return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        src, dst = self.root + old, self.root + new
        try:
            replaced: os.stat_result | None = os.lstat(dst)
        except FileNotFoundError:
            replaced = None
        if flags:
            _renameat2(src, dst, flags)
        else:
            os.rename(src, dst)
        with self._mutex:
            named: list[Tracked | Handle] = [*self.states.values(), *self.handles.values()]
            for item in named:
                if item.path == old or item.path.startswith(old + "/"):
                    item.path = new + item.path[len(old):]
            if (replaced is not None and not stat.S_ISDIR(replaced.st_mode)
                    and replaced.st_nlink <= 1 and not flags):
                self._untrack_if_unused((replaced.st_dev, replaced.st_ino))
        return 0

    # --- files --------------------------------------------------------------------------------

    def _opened(self, fd: int, path: str, truncate: bool) -> int:
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with self._mutex:
            self.handles[fd] = Handle(fd, key, path)
            self.opens[key] = self.opens.get(key, 0) + 1
            if truncate:
                tracked = self.states.get(key)
                if tracked is not None or st.st_size > 0:
                    self._track(key, fd, path).state.truncate(0, time.time_ns())
        return fd

    @staticmethod
    def _backing_flags(flags: int) -> int:
        access = os.O_RDONLY if flags & os.O_ACCMODE == os.O_RDONLY else os.O_RDWR
        return (flags & ~_STRIPPED_FLAGS) | access | os.O_CLOEXEC

    def open(self, path: str, flags: int) -> int:
        fd = os.open(self.root + path, self._backing_flags(flags))
        return self._opened(fd, path, bool(flags & os.O_TRUNC))

    def create(self, path: str, mode: int, flags: int) -> int:
        fd = os.open(self.root + path,
                     self._backing_flags(flags) | os.O_CREAT | (flags & os.O_EXCL), mode)
        return self._opened(fd, path, bool(flags & os.O_TRUNC))

    def release(self, path: str | None, fh: int) -> int:
        with self._mutex:
            handle = self.handles.pop(fh)
            left = self.opens[handle.key] - 1
            if left:
                self.opens[handle.key] = left
            else:
                del self.opens[handle.key]
            os.close(fh)
            self._untrack_if_unused(handle.key)
        return 0

    # No flush: a close is not a sync, the data stays in this process's cache (and without
    # the operation the kernel stops asking after the first close).

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        handle = self.handles[fh]
        if handle.key not in self.states:
            return os.pread(fh, size, offset)
        with self._mutex:
            tracked = self.states.get(handle.key)
            if tracked is None:
                return os.pread(fh, size, offset)
            return tracked.state.read(offset, size, functools.partial(os.pread, fh))

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        handle = self.handles[fh]
        with self._mutex:
            tracked = self.states.get(handle.key)
            if tracked is None:
                tracked = self._track(handle.key, fh, path or handle.path)
            tracked.state.write(offset, data, tracked.pread, time.time_ns())
        return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        handle = self._handle(fh)
        if handle is not None:
            key, fd, own = handle.key, handle.fd, False
        elif path is not None:
            fd, own = os.open(self.root + path, os.O_RDWR | os.O_CLOEXEC), True
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
        else:
            raise mfusepy.FuseOSError(errno.ENOENT)
        try:
            with self._mutex:
                named = path or (handle.path if handle is not None else None)
                self._track(key, fd, named).state.truncate(length, time.time_ns())
                self._untrack_if_unused(key)
        finally:
            if own:
                os.close(fd)
        return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        handle = self.handles[fh]
        with self.gate.passage(_interrupted):
            with self._mutex:
                tracked = self.states.get(handle.key)
                if tracked is not None:
                    self._write_back(tracked)
            if datasync:
                os.fdatasync(fh)
            else:
                os.fsync(fh)
        return 0

    # --- the levers (control channel) ---------------------------------------------------------

    def stall(self, seconds: float) -> None:
        self.gate.stall(seconds)

    def slow(self, ms: float) -> None:
        self.gate.slow(ms)

    def heal(self) -> None:
        self.gate.heal()

    def status(self) -> dict[str, Any]:
        """What the disk holds and does now: the unsynced data, whether fsync is stalled and
        how many fsyncs wait on it, and the damaged files no repair has undone yet."""
        root = Path(self.root)
        with self._mutex:
            dirty = [t.state for t in self.states.values() if t.state.dirty]
            damaged = sorted({path.relative_to(root).as_posix() for path, _ in self._damaged})
        remaining = self.gate.stall_remaining()
        return {
            "unsynced_bytes": sum(s.unsynced_bytes for s in dirty),
            "unsynced_files": len(dirty),
            "fsyncs": self.gate.fsyncs,
            "fsyncs_stalled": self.gate.fsyncs_stalled,
            "stalled": remaining is not None,
            "fsyncs_waiting": self.gate.fsyncs_waiting,
            "damaged": damaged,
            "stall_remaining": None if remaining is None else round(remaining, 3),
            "slow_ms": self.gate.slow_ms,
        }

    def lose_unsynced(self, torn: bool, seed: int) -> dict[str, Any]:
        """A power cut: every file's unsynced data is forgotten (a prefix of it written to the
        backing first when `torn`)."""
        rng = random.Random(seed)
        files: dict[str, dict[str, int]] = {}
        touched: list[str] = []
        with self._mutex:
            # In path order, so that a seed draws the same cuts whatever the dict's order.
            for key, tracked in sorted(self.states.items(), key=lambda kv: kv[1].path):
                state, fd = tracked.state, tracked.fd
                if not state.dirty:
                    continue
                gone = os.fstat(fd).st_nlink == 0
                if torn and not gone:
                    cut = state.torn_plan(rng)
                    _apply(cut.plan, fd)
                    kept, dropped = cut.kept_bytes, cut.dropped_bytes
                else:
                    kept, dropped = 0, state.unsynced_bytes
                state.reset(os.fstat(fd).st_size)
                if not gone:
                    files[tracked.path.lstrip("/")] = {"dropped": dropped, "kept": kept}
                    touched.append(tracked.path)
                self._untrack_if_unused(key)
        self._invalidate(touched)
        return {
            "files": files,
            "dropped_bytes": sum(f["dropped"] for f in files.values()),
            "kept_bytes": sum(f["kept"] for f in files.values()),
        }

    def corrupt(self, globs: list[str], mode: str, seed: int) -> dict[str, Any]:
        """Damage the newest file matching the first glob that matches (after writing out its
        own unsynced data: the damage is to what the disk stores)."""
        root = Path(self.root)
        rng = random.Random(seed)
        with self._mutex:
            chosen = damage.choose(root, globs, self._mtime_ns)
            if chosen is None:
                return {"file": None, "mode": mode, "size_before": None, "size_after": None,
                        "flipped": []}
            tracked = self._tracked_at(chosen.stat())
            if tracked is not None:
                self._write_back(tracked)
            flipped: list[tuple[int, int]] = []
            if mode == "bitflip":
                before, flipped = damage.bitflip(chosen, rng)
                after = before
                done = damage.Damage(flipped=tuple(flipped))
            else:
                before, after, tail = damage.truncate(chosen, rng)
                done = damage.Damage(offset=after, tail=tail)
            if tracked is not None:
                tracked.state.reset(after)
            self._damaged.append((chosen, done))
        rel = chosen.relative_to(root).as_posix()
        self._invalidate(["/" + rel])
        return {"file": rel, "mode": mode, "size_before": before, "size_after": after,
                "flipped": [list(f) for f in flipped]}

    def repair(self) -> dict[str, Any]:
        """Undo every corruption since the last repair, newest first (an operator restoring the
        damaged files): `repaired` and `not_repaired` (changed since, or gone) relative paths."""
        root = Path(self.root)
        repaired: list[str] = []
        missed: list[str] = []
        with self._mutex:
            damaged, self._damaged = self._damaged, []
            for path, done in reversed(damaged):
                rel = path.relative_to(root).as_posix()
                try:
                    tracked = self._tracked_at(path.stat())
                except FileNotFoundError:  # deleted since: nothing to restore
                    missed.append(rel)
                    continue
                if tracked is not None:
                    self._write_back(tracked)
                if damage.undo(path, done):
                    if tracked is not None:
                        tracked.state.reset(path.stat().st_size)
                    repaired.append(rel)
                else:
                    missed.append(rel)
        self._invalidate(["/" + rel for rel in repaired])
        return {"repaired": repaired, "not_repaired": missed}

    def _mtime_ns(self, path: Path) -> int:
        """The modification time the mount shows (an unsynced write counts). Under the lock."""
        st = path.stat()
        tracked = self._tracked_at(st)
        if tracked is not None and tracked.state.mtime_ns is not None:
            return max(st.st_mtime_ns, tracked.state.mtime_ns)
        return st.st_mtime_ns


def _apply(plan: list[Op], fd: int) -> None:
    """A state's plan (writes and truncations) carried out on the backing descriptor `fd`."""
    apply_plan(plan, functools.partial(os.pwrite, fd), functools.partial(os.ftruncate, fd))


_PINNED = threading.local()
"""Set in a thread whose Python thread state is kept (see `_Fuse`): a thread-local lives in the
thread state, so a new thread (even one reusing an exited thread's id) finds it unset."""
MAX_IDLE_THREADS = 32


def _interrupted() -> bool:
    """Whether the kernel interrupted the request this thread serves (its caller was killed)."""
    return bool(mfusepy._libfuse.fuse_interrupted())


_UTIME_NOW = (1 << 30) - 1
_UTIME_OMIT = (1 << 30) - 2


def _ns(ts: Any) -> int | None:
    """A struct timespec of utimensat(2) in ns; None for UTIME_OMIT (leave it as it is)."""
    if ts.tv_nsec == _UTIME_OMIT:
        return None
    if ts.tv_nsec == _UTIME_NOW:
        return time.time_ns()
    return int(ts.tv_sec) * 10**9 + int(ts.tv_nsec)


def _renameat2(src: str, dst: str, flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(_AT_FDCWD, src.encode(), _AT_FDCWD, dst.encode(), ctypes.c_uint(flags)):
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), src)


class _Fuse(mfusepy.FUSE):
    """mfusepy's glue, with the fuse3 calls it simplifies passed on whole: rename's flags
    (RENAME_NOREPLACE) and ftruncate's handle, and EINTR for an interrupted fsync.

    And one thing for speed: a ctypes callback from a thread Python did not start (libfuse's
    workers) makes a Python thread state on entry and destroys it on return, which cost about
    70 of the 120 microseconds a small write took. The first call in each worker takes one
    more reference to the thread's state (PyGILState_Ensure) and never gives it back, so the
    state lives as long as the thread; libfuse keeps up to MAX_IDLE_THREADS idle workers
    alive, which bounds what the states of exited workers leak.
    """

    def _wrapper(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        if not hasattr(_PINNED, "yes"):
            ctypes.pythonapi.PyGILState_Ensure()
            _PINNED.yes = True
        return super()._wrapper(func, *args, **kwargs)

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        return self.operations.rename(old.decode(self.encoding, self.errors),
                                      new.decode(self.encoding, self.errors), flags)

    def utimens_fuse_3(self, path: bytes | None, buf: Any, fip: Any) -> int:
        times = None
        if buf:
            times = (_ns(buf.contents.actime), _ns(buf.contents.modtime))
        return self.operations.utimens(
            None if path is None else path.decode(self.encoding, self.errors), times)

    def truncate_fuse_3(self, path: bytes | None, length: int, fip: Any) -> int:
        fh = fip.contents.fh if fip else None
        return self.operations.truncate(
            None if path is None else path.decode(self.encoding, self.errors), length, fh)

    # The hot paths, without mfusepy's generic conversions (the path is not needed: the
    # handle says which file).

    def write(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        return self.operations.write(None, ctypes.string_at(buf, size), offset, fip.contents.fh)

    def read(self, path: bytes | None, buf: Any, size: int, offset: int, fip: Any) -> int:
        data = self.operations.read(None, size, offset, fip.contents.fh)
        ctypes.memmove(buf, data, len(data))
        return len(data)

    def fsync(self, path: bytes | None, datasync: int, fip: Any) -> int:
        try:
            return self.operations.fsync(None, datasync, fip.contents.fh)
        except Interrupted:
            return -errno.EINTR

    def fgetattr(self, path: bytes | None, buf: Any, fip: Any) -> int:
        st, size, mtime = self.operations.attributes(
            None if path is None else path.decode(self.encoding, self.errors),
            fip.contents.fh if fip else None)
        out = buf.contents
        out.st_mode, out.st_ino, out.st_nlink = st.st_mode, st.st_ino, st.st_nlink
        out.st_uid, out.st_gid, out.st_rdev = st.st_uid, st.st_gid, st.st_rdev
        out.st_size, out.st_blksize = size, st.st_blksize
        out.st_blocks = st.st_blocks if size == st.st_size else (size + 511) // 512
        out.st_atimespec.tv_sec, out.st_atimespec.tv_nsec = divmod(st.st_atime_ns, 10**9)
        out.st_mtimespec.tv_sec, out.st_mtimespec.tv_nsec = divmod(mtime, 10**9)
        out.st_ctimespec.tv_sec, out.st_ctimespec.tv_nsec = divmod(
            max(mtime, st.st_ctime_ns), 10**9)
        return 0

    def fsyncdir(self, path: bytes | None, datasync: int, fip: Any) -> int:
        try:
            return super().fsyncdir(path, datasync, fip)
        except Interrupted:
            return -errno.EINTR


def serve(backing: str, mountpoint: str, control: str, fsname: str) -> None:
    """Mount and serve until unmounted (foreground), answering on the control socket meanwhile.
    RuntimeError when the mount fails."""
    ops = FaultFs(backing)
    server = ControlServer(control, ops)
    server.start()
    # With `intr`, libfuse signals (SIGUSR1) a worker whose request the kernel interrupted, but
    # mfusepy sets `intr` after fuse_new, which would have installed the handler: the signal
    # would kill the process. Ignored, it still marks the request (fuse_interrupted), which
    # the fsync gate polls.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    try:
        _Fuse(
            ops, mountpoint, foreground=True, fsname=fsname, subtype="kraft-faultfs",
            attr_timeout=0, entry_timeout=0, negative_timeout=0, hard_remove=True, intr=True,
            max_idle_threads=MAX_IDLE_THREADS,
        )
    finally:
        server.stop()
