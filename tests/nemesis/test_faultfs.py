"""The fault filesystem on real FUSE mounts (`kraft faultfs mount --daemon`): what survives a
power cut and what does not, fsync stalls that block only fsync, corruption, the control
channel's robustness, unmounting, and the reference node's storage on it.

Most tests share one mount (each in a directory of its own: a power cut hits the whole mount,
and every test checks only its own files); those that unmount get their own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from nemesis.faultfs import check_usable, mounts, request, sweep
from nemesis.faultfs.cli import main

UNUSABLE = check_usable()
pytestmark = pytest.mark.skipif(UNUSABLE is not None, reason=f"no FUSE here: {UNUSABLE}")
FSNAME = "kraft-faultfs:test"


@dataclass
class Mounted:
    backing: Path
    root: Path
    sock: str

    def ctl(self, op: str, **args: Any) -> dict[str, Any]:
        reply = request(self.sock, {"op": op, **args})
        assert "error" not in reply, reply
        return reply

    def pid(self) -> int | None:
        """The process serving this mount (None: gone)."""
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"nemesis.faultfs.cli" in cmdline and str(self.root).encode() in cmdline:
                    return int(entry.name)
        return None


def mount(base: Path, name: str = "fs", fsname: str = FSNAME) -> Mounted:
    m = Mounted(base / f"{name}.backing", base / name, str(base / f"{name}.sock"))
    code = main(["mount", str(m.backing), str(m.root), "--control", m.sock, "--fsname", fsname,
                 "--daemon", "--log", str(base / f"{name}.log")])
    assert code == 0, (base / f"{name}.log").read_text()
    return m


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mounted]:
    m = mount(tmp_path_factory.mktemp("faultfs"))
    try:
        yield m
    finally:
        with_heal(m)
        assert main(["unmount", str(m.root)]) == 0


def with_heal(m: Mounted) -> None:
    with contextlib.suppress(OSError):
        m.ctl("heal")


@pytest.fixture
def d(shared: Mounted, request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory of this test's own on the shared mount."""
    path = shared.root / request.node.name[:60]
    path.mkdir()
    try:
        yield path
    finally:
        with_heal(shared)


def write(path: Path, data: bytes, *, fsync: bool, offset: int | None = None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, os.fstat(fd).st_size if offset is None else offset)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backing_of(m: Mounted, path: Path) -> Path:
    return m.backing / path.relative_to(m.root)


# --- what a power cut keeps ------------------------------------------------------------------


def test_fsynced_data_survives_a_power_cut_and_unsynced_data_does_not(
        shared: Mounted, d: Path) -> None:
    f = d / "segment"
    write(f, b"synced|", fsync=True)
    write(f, b"unsynced", fsync=False)
    assert f.read_bytes() == b"synced|unsynced" and f.stat().st_size == 15
    assert backing_of(shared, f).read_bytes() == b"synced|"
    report = shared.ctl("lose-unsynced")
    assert report["files"][str(f.relative_to(shared.root))] == {"dropped": 8, "kept": 0}
    assert f.stat().st_size == 7 and f.read_bytes() == b"synced|"


def test_a_closed_file_keeps_its_data_until_the_power_cut(shared: Mounted, d: Path) -> None:
    f = d / "closed"
    write(f, b"never fsynced", fsync=False)
    # Another process (a restarted node) sees it all: a crash loses nothing.
    out = subprocess.run([sys.executable, "-c", f"print(open({str(f)!r}).read())"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "never fsynced"
    assert shared.ctl("status")["unsynced_files"] >= 1
    shared.ctl("lose-unsynced")
    assert f.exists() and f.read_bytes() == b""


def test_a_torn_power_cut_keeps_a_byte_exact_prefix_of_the_writes(
        shared: Mounted, d: Path) -> None:
    writes = [bytes([65 + i]) * (50 + 7 * i) for i in range(8)]
    files = [d / f"f{n}" for n in range(6)]
    for f in files:
        write(f, b"base|", fsync=True)
        for w in writes:
            write(f, w, fsync=False)
    report = shared.ctl("lose-unsynced", torn=True, seed=11)
    prefixes = [b"base|" + b"".join(writes)[:cut] for cut in range(sum(map(len, writes)) + 1)]
    kept = []
    for f in files:
        content = f.read_bytes()
        assert content in prefixes
        entry = report["files"][str(f.relative_to(shared.root))]
        assert entry["kept"] == len(content) - 5
        assert entry["kept"] + entry["dropped"] == sum(map(len, writes))
        kept.append(entry["kept"])
    assert len(set(kept)) > 1  # the cuts differ from file to file


def test_an_unsynced_truncate_is_lost(shared: Mounted, d: Path) -> None:
    f = d / "t"
    write(f, b"0123456789" * 10, fsync=True)
    os.truncate(f, 10)
    assert f.stat().st_size == 10 and f.read_bytes() == b"0123456789"
    os.truncate(f, 30)
    assert f.read_bytes() == b"0123456789" + bytes(20)
    with open(f, "wb", buffering=0) as handle:  # O_TRUNC is an unsynced truncate as well
        handle.write(b"new")
    assert f.read_bytes() == b"new"
    shared.ctl("lose-unsynced")
    assert f.read_bytes() == b"0123456789" * 10


def test_an_fsynced_truncate_survives(shared: Mounted, d: Path) -> None:
    f = d / "t"
    write(f, b"0123456789" * 10, fsync=True)
    with open(f, "r+b") as handle:
        handle.truncate(25)
        os.fsync(handle.fileno())
    shared.ctl("lose-unsynced")
    assert f.read_bytes() == (b"0123456789" * 3)[:25]


def test_kafkas_durable_replace_survives_and_an_unsynced_one_leaves_an_empty_file(
        shared: Mounted, d: Path) -> None:
    good, bad = d / "quorum-state", d / "checkpoint"
    write(d / "quorum-state.tmp", b'{"leaderEpoch": 3}', fsync=True)
    os.rename(d / "quorum-state.tmp", good)
    fsync_path(d)
    write(d / "checkpoint.tmp", b"0 123", fsync=False)
    os.rename(d / "checkpoint.tmp", bad)
    shared.ctl("lose-unsynced")
    assert good.read_bytes() == b'{"leaderEpoch": 3}'
    # As ext4 without auto_da_alloc: the rename is durable, the data was not.
    assert bad.exists() and bad.read_bytes() == b""
    assert not (d / "checkpoint.tmp").exists()


def test_an_unlinked_file_takes_its_unsynced_data_with_it(shared: Mounted, d: Path) -> None:
    f = d / "doomed"
    write(f, b"x" * 1000, fsync=False)
    with open(f, "rb") as still_open:
        f.unlink()
        assert not f.exists() and not backing_of(shared, f).exists()
        assert still_open.read() == b"x" * 1000  # its descriptors still read it
    report = shared.ctl("lose-unsynced")
    assert str(f.relative_to(shared.root)) not in report["files"]
    assert not f.exists()


def test_metadata_is_durable_at_once(shared: Mounted, d: Path) -> None:
    (d / "sub").mkdir()
    write(d / "sub" / "a", b"data", fsync=True)
    os.link(d / "sub" / "a", d / "b")
    os.symlink("sub/a", d / "c")
    os.chmod(d / "b", 0o600)
    os.utime(d / "c", ns=(5 * 10**9, 7 * 10**9))
    subprocess.run(["touch", "-a", "-d", "@9", str(d / "c")], check=True)  # UTIME_OMIT for mtime
    assert ((d / "b").stat().st_atime_ns, (d / "b").stat().st_mtime_ns) == (9 * 10**9, 7 * 10**9)
    shared.ctl("lose-unsynced")
    assert (d / "b").read_bytes() == b"data" and os.readlink(d / "c") == "sub/a"
    assert (d / "c").read_bytes() == b"data"
    assert (d / "b").stat().st_mode & 0o777 == 0o600 and (d / "b").stat().st_mtime == 7
    assert sorted(os.listdir(d)) == ["b", "c", "sub"]


def test_a_hard_link_shares_the_unsynced_data(shared: Mounted, d: Path) -> None:
    write(d / "a", b"synced", fsync=True)
    os.link(d / "a", d / "b")
    write(d / "a", b"+more", fsync=False)
    assert (d / "b").read_bytes() == b"synced+more"
    fsync_path(d / "b")
    shared.ctl("lose-unsynced")
    assert (d / "a").read_bytes() == b"synced+more"


def test_a_descriptor_kept_open_reads_what_the_power_cut_left(
        shared: Mounted, d: Path) -> None:
    f = d / "open"
    write(f, b"A" * 4096, fsync=True)
    with open(f, "r+b", buffering=0) as handle:
        handle.write(b"B" * 4096)  # overwrite in place: the size does not change
        assert os.pread(handle.fileno(), 4, 0) == b"BBBB"
        shared.ctl("lose-unsynced")
        assert os.pread(handle.fileno(), 4, 0) == b"AAAA"


# --- stall and slow --------------------------------------------------------------------------


def test_a_stall_blocks_fsync_and_only_fsync(shared: Mounted, d: Path) -> None:
    write(d / "stalled", b"pending", fsync=False)
    write(d / "other", b"old", fsync=True)
    shared.ctl("stall", seconds=30)
    done = threading.Event()

    def fsync() -> None:
        fsync_path(d / "stalled")
        done.set()

    thread = threading.Thread(target=fsync, daemon=True)
    thread.start()
    time.sleep(0.2)
    # Reads and writes go on meanwhile (the stalled file itself is readable too).
    write(d / "other", b"new", fsync=False)
    assert (d / "other").read_bytes() == b"oldnew"
    assert (d / "stalled").read_bytes() == b"pending"
    assert not done.is_set()
    status = shared.ctl("status")
    assert status["fsyncs_stalled"] >= 1 and 20 < status["stall_remaining"] <= 30
    assert status["stalled"] is True and status["fsyncs_waiting"] == 1
    # A directory fsync waits as well.
    began = time.monotonic()
    shared.ctl("stall", seconds=0.3)
    fsync_path(d)
    assert time.monotonic() - began >= 0.25
    assert done.wait(2)  # the shorter stall replaced the long one
    shared.ctl("stall", seconds=30)
    thread = threading.Thread(target=fsync_path, args=(d / "stalled",), daemon=True)
    thread.start()
    time.sleep(0.1)
    assert thread.is_alive()
    shared.ctl("heal")
    thread.join(2)
    healed = shared.ctl("status")
    assert not thread.is_alive() and healed["stall_remaining"] is None
    assert healed["stalled"] is False and healed["fsyncs_waiting"] == 0
    # A stalled fsync did not make the data durable before it returned; now it is.
    shared.ctl("lose-unsynced")
    assert (d / "stalled").read_bytes() == b"pending"


def test_a_process_killed_in_a_stalled_fsync_dies(shared: Mounted, d: Path) -> None:
    write(d / "f", b"x", fsync=False)
    shared.ctl("stall", seconds=30)
    proc = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
         "print('fsync', flush=True); os.fsync(fd)", str(d / "f")],
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "fsync"
    time.sleep(0.2)
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(5) == -signal.SIGKILL
    proc.stdout.close()


def test_slow_makes_every_fsync_last(shared: Mounted, d: Path) -> None:
    shared.ctl("slow", ms=120)
    assert shared.ctl("status")["slow_ms"] == 120
    for _ in range(2):
        began = time.monotonic()
        write(d / "f", b"x", fsync=True)
        assert time.monotonic() - began >= 0.12
    shared.ctl("slow", ms=0)
    began = time.monotonic()
    write(d / "f", b"x", fsync=True)
    assert time.monotonic() - began < 0.1


# --- corruption ------------------------------------------------------------------------------


def test_bitflip_changes_exactly_the_reported_bits(shared: Mounted, d: Path) -> None:
    f = d / "00000000000000000000.log"
    write(f, bytes(range(256)) * 8, fsync=True)
    write(f, b"tail, unsynced", fsync=False)
    before = f.read_bytes()
    rel = str(d.relative_to(shared.root))
    report = shared.ctl("corrupt", globs=[f"{rel}/*.snap", f"{rel}/*.log"], mode="bitflip",
                        seed=5)
    assert report["file"] == str(f.relative_to(shared.root)) and report["mode"] == "bitflip"
    assert report["size_before"] == report["size_after"] == len(before)
    expected = bytearray(before)
    for byte, bit in report["flipped"]:
        expected[byte] ^= 1 << bit
    assert 1 <= len(report["flipped"]) <= 8 and f.read_bytes() == bytes(expected)
    # The file's own unsynced data was written out first: damage is to what the disk stores.
    shared.ctl("lose-unsynced")
    assert f.read_bytes() == bytes(expected)


def test_truncate_corruption_shortens_the_newest_matching_file(
        shared: Mounted, d: Path) -> None:
    old, new = d / "00000000000000000000.log", d / "00000000000000000100.log"
    write(old, b"o" * 500, fsync=True)
    write(new, b"n" * 500, fsync=True)
    os.utime(old, (1, 1))
    rel = str(d.relative_to(shared.root))
    report = shared.ctl("corrupt", globs=[f"{rel}/**/*.log"], mode="truncate", seed=1)
    assert report["file"] == str(new.relative_to(shared.root))
    assert report["size_before"] == 500 and report["size_after"] < 500
    assert new.read_bytes() == b"n" * report["size_after"] and old.stat().st_size == 500
    assert shared.ctl("corrupt", globs=[f"{rel}/*.nothing"], mode="truncate")["file"] is None


def test_repair_undoes_flips_and_cuts_newest_first(shared: Mounted, d: Path) -> None:
    segment, state = d / "00000000000000000000.log", d / "quorum-state"
    original = bytes(range(256)) * 4
    write(segment, original, fsync=True)
    write(state, b'{"leaderEpoch": 7}', fsync=True)
    rel = str(d.relative_to(shared.root))
    flipped = shared.ctl("corrupt", globs=[f"{rel}/*.log"], mode="bitflip", seed=3)
    assert flipped["flipped"] and segment.read_bytes() != original
    flipped_again = shared.ctl("corrupt", globs=[f"{rel}/*.log"], mode="bitflip", seed=4)
    cut = shared.ctl("corrupt", globs=[f"{rel}/quorum-state"], mode="truncate", seed=5)
    assert cut["size_after"] < cut["size_before"]
    # the filesystem says which files carry damage no repair has undone
    # (earlier tests on the shared mount may have left damage of their own)
    assert {flipped["file"], cut["file"]} <= set(shared.ctl("status")["damaged"])
    report = shared.ctl("repair")
    assert {flipped["file"], flipped_again["file"], cut["file"]} <= set(report["repaired"])
    assert segment.read_bytes() == original
    assert state.read_bytes() == b'{"leaderEpoch": 7}'
    assert shared.ctl("repair") == {"repaired": [], "not_repaired": []}  # nothing left to undo
    assert shared.ctl("status")["damaged"] == []


def test_a_file_changed_since_its_damage_is_not_repaired(shared: Mounted, d: Path) -> None:
    f = d / "quorum-state"
    write(f, b"0123456789", fsync=True)
    rel = str(d.relative_to(shared.root))
    shared.ctl("corrupt", globs=[f"{rel}/quorum-state"], mode="truncate", seed=2)
    write(f, b"rewritten by the node", fsync=True)  # the node wrote to it meanwhile
    before = f.read_bytes()
    report = shared.ctl("repair")
    assert f"{rel}/quorum-state" in report["not_repaired"]
    assert f.read_bytes() == before


# --- the control channel ---------------------------------------------------------------------


def test_control_errors_do_not_kill_the_filesystem(shared: Mounted, d: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        s.connect(shared.sock)
        s.sendall(b"{garbage\n[]\n{\"op\": \"nope\"}\n{\"op\": \"stall\"}\n")
        replies = b""
        while replies.count(b"\n") < 4:
            replies += s.recv(4096)
    assert [b'"error"' in line for line in replies.splitlines()] == [True] * 4
    with socket.socket(socket.AF_UNIX) as s:  # a client that hangs up mid-line
        s.connect(shared.sock)
        s.sendall(b'{"op": "pi')
    assert request(shared.sock, {"op": "ping"}) == {"ok": True}
    write(d / "f", b"still here", fsync=True)
    assert (d / "f").read_bytes() == b"still here"


def test_ctl_prints_the_answer(shared: Mounted, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ctl", shared.sock, "status"]) == 0
    assert '"fsyncs":' in capsys.readouterr().out
    assert main(["ctl", shared.sock, "corrupt", "--glob", "*.nothing"]) == 0
    assert '"file": null' in capsys.readouterr().out


# --- mounting and unmounting -----------------------------------------------------------------


def test_unmount_leaves_nothing_mounted_and_the_process_gone(tmp_path: Path) -> None:
    m = mount(tmp_path)
    assert (FSNAME, str(m.root)) in mounts()
    pid = m.pid()
    assert pid is not None
    write(m.root / "f", b"unsynced at unmount", fsync=False)
    assert main(["mount", str(m.backing), str(m.root), "--control", m.sock]) == 3  # mounted
    assert main(["mount", str(tmp_path / "b"), str(tmp_path / "m"),
                 "--control", str(tmp_path / ("s" * 110))]) == 64
    assert main(["unmount", str(m.root)]) == 0
    assert str(m.root) not in [mp for _, mp in mounts("")]
    deadline = time.monotonic() + 5
    while m.pid() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert m.pid() is None
    # An unmount is a clean shutdown: the cache was written back.
    assert (m.backing / "f").read_bytes() == b"unsynced at unmount"
    assert main(["unmount", str(m.root)]) == 0  # not mounted: nothing to do
    assert main(["ctl", m.sock, "ping"]) == 3


def test_unmount_of_a_busy_mount_and_sweep(tmp_path: Path) -> None:
    # A name of its own: the sweep must not take the other tests' mounts (nor anyone else's).
    fsname = f"{FSNAME}-sweep-{os.getpid()}"
    busy, dead = mount(tmp_path, "busy", fsname), mount(tmp_path, "dead", fsname)
    dead_pid = dead.pid()
    assert dead_pid is not None
    os.kill(dead_pid, signal.SIGKILL)  # leaves a mount nobody serves
    busy.ctl("stall", seconds=60)
    write(busy.root / "f", b"x", fsync=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
         "os.fsync(fd)", str(busy.root / "f")])
    time.sleep(0.3)
    swept = sweep(fsname)
    assert sorted(swept) == sorted([str(busy.root), str(dead.root)])
    assert mounts(fsname) == []
    holder.wait(10)
    deadline = time.monotonic() + 10
    while busy.pid() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert busy.pid() is None


# --- the reference node's storage on the mount -----------------------------------------------

WRITER = """
import sys
from reference_node.storage import NodeStorage, StoredRecord
storage = NodeStorage.open(sys.argv[1], node_id=1)
records = lambda a, b: [StoredRecord(o, 0, str(o).encode(), None, 1_700_000_000_000 + o)
                        for o in range(a, b)]
storage.log.append(records(0, 50))
storage.log.flush()
storage.log.append(records(50, 80))  # appended, never flushed
print("written", flush=True)
sys.stdin.read()
"""


def test_the_reference_storage_keeps_what_it_flushed(shared: Mounted, d: Path) -> None:
    from reference_node.storage import NodeStorage, format_storage

    format_storage(d, "MkU3OEVBNTcwNTJENDM2Qk", 1)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(d)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "written"
    writer.kill()  # the node crashes ...
    writer.wait(10)
    with NodeStorage.open(d, node_id=1, read_only=True) as storage:
        assert storage.log.end_offset == 80  # ... and loses nothing: the page cache kept it
    report = shared.ctl("lose-unsynced")  # ... then the power goes
    assert report["dropped_bytes"] > 0
    with NodeStorage.open(d, node_id=1) as storage:
        assert storage.log.end_offset == 50
        assert [r.value for r in storage.log.records()] == [str(o).encode() for o in range(50)]
