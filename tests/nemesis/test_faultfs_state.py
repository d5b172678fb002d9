"""The fault filesystem's parts that need no FUSE: the model of unsynced data (against a plain
bytearray file), the fsync gate, the corruption functions, the control channel's parsing, and
`kraft faultfs check` without a FUSE device."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis.faultfs import corrupt
from nemesis.faultfs.cli import main
from nemesis.faultfs.control import answer
from nemesis.faultfs.gate import FsyncGate, Interrupted
from nemesis.faultfs.host import check_usable
from nemesis.faultfs.state import PAGE, SECTOR, FileState, Op, Truncate, Write, apply_plan

# --- the model against a bytearray -----------------------------------------------------------


class Disk:
    """A backing file as a bytearray, with the system calls the model and plans use."""

    def __init__(self, data: bytes) -> None:
        self.data = bytearray(data)

    def pread(self, length: int, offset: int) -> bytes:
        return bytes(self.data[offset : offset + length])

    def pwrite(self, data: memoryview, offset: int) -> int:
        if offset > len(self.data):
            self.data += bytes(offset - len(self.data))
        self.data[offset : offset + len(data)] = data
        return len(data)

    def ftruncate(self, size: int) -> None:
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data += bytes(size - len(self.data))

    def apply(self, plan: list[Op]) -> None:
        apply_plan(plan, self.pwrite, self.ftruncate)


def replay(base: bytes, ops: list[Op]) -> bytes:
    disk = Disk(base)
    disk.apply(ops)
    return bytes(disk.data)


# Offsets and sizes around page boundaries, where the model has its edge cases.
positions = st.one_of(st.integers(0, 3 * PAGE + 10),
                      st.sampled_from([PAGE - 1, PAGE, PAGE + 1, 2 * PAGE, 2 * PAGE - 3]))
ops_strategy = st.lists(st.one_of(
    st.tuples(st.just("write"), positions, st.binary(min_size=1, max_size=PAGE + 300)),
    st.tuples(st.just("truncate"), positions, st.just(b"")),
    st.tuples(st.just("read"), positions, st.integers(0, 2 * PAGE).map(lambda n: bytes(n))),
    st.tuples(st.just("sync"), st.just(0), st.just(b"")),
), max_size=25)


@settings(max_examples=300, deadline=None)
@given(base=st.binary(max_size=2 * PAGE + 100), ops=ops_strategy)
def test_the_merged_view_is_the_file_and_a_sync_makes_the_backing_equal_it(
        base: bytes, ops: list[tuple[str, int, bytes]]) -> None:
    disk = Disk(base)
    state = FileState(len(base))
    model = bytearray(base)
    for kind, position, payload in ops:
        if kind == "write":
            state.write(position, payload, disk.pread)
            if position > len(model):
                model += bytes(position - len(model))
            model[position : position + len(payload)] = payload
        elif kind == "truncate":
            state.truncate(position)
            model = model[:position] + bytes(max(0, position - len(model)))
        elif kind == "read":
            assert state.read(position, len(payload), disk.pread) == bytes(
                model[position : position + len(payload)])
        else:
            # Both ways of writing it out give the file: the log replayed and the pages.
            by_pages = replay(bytes(disk.data), state.page_plan())
            by_log = replay(bytes(disk.data), list(state.log))
            assert by_pages == by_log == bytes(model)
            disk.apply(state.sync_plan())
            state.synced()
            assert bytes(disk.data) == bytes(model) and not state.dirty
        assert state.size == len(model)
        assert state.read(0, len(model) + 10, disk.pread) == bytes(model)


@settings(max_examples=200, deadline=None)
@given(base=st.binary(max_size=PAGE), seed=st.integers(0, 2**32),
       ops=st.lists(st.one_of(
           st.tuples(positions, st.binary(min_size=1, max_size=300)),
           st.tuples(positions, st.none())), min_size=1, max_size=12))
def test_a_torn_cut_keeps_a_prefix_of_the_log(
        base: bytes, seed: int, ops: list[tuple[int, bytes | None]]) -> None:
    disk = Disk(base)
    state = FileState(len(base))
    for position, payload in ops:
        if payload is None:
            state.truncate(position)
        else:
            state.write(position, payload, disk.pread)
    log = list(state.log)
    cut = state.torn_plan(random.Random(seed))
    k = len(cut.plan)
    if k:
        assert cut.plan[: k - 1] == log[: k - 1]
        last, original = cut.plan[-1], log[k - 1]
        assert last == original or (
            isinstance(last, Write) and isinstance(original, Write)
            and last.offset == original.offset and original.data.startswith(last.data)
            and 0 < len(last.data) < len(original.data))
    assert cut.kept_bytes == sum(len(op.data) for op in cut.plan if isinstance(op, Write))
    assert cut.kept_bytes + cut.dropped_bytes == state.unsynced_bytes
    disk.apply(cut.plan)
    state.reset(len(disk.data))
    assert state.read(0, len(disk.data) + 1, disk.pread) == bytes(disk.data)


def test_a_torn_write_keeps_whole_sectors_only() -> None:
    # one unsynced write of 3000 bytes from byte 100: a cut ends on a sector boundary of the file
    for seed in range(40):
        state = FileState(0)
        state.write(100, b"w" * 3000, Disk(b"").pread)
        cut = state.torn_plan(random.Random(seed))
        if cut.plan:
            [write] = cut.plan
            assert isinstance(write, Write)
            kept = len(write.data)
            assert kept == 3000 or (100 + kept) % SECTOR == 0, (seed, kept)


def test_torn_cuts_vary_with_the_seed_and_repeat_with_it() -> None:
    state = FileState(0)
    disk = Disk(b"")
    for i in range(10):
        state.write(i * 10, bytes([65 + i]) * 10, disk.pread)
    kept = {state.torn_plan(random.Random(seed)).kept_bytes for seed in range(30)}
    assert len(kept) > 5
    assert state.torn_plan(random.Random(7)) == state.torn_plan(random.Random(7))


def test_an_append_is_synced_as_written_not_as_whole_pages() -> None:
    disk = Disk(b"x" * 5000)
    state = FileState(5000)
    state.write(5000, b"y" * 100, disk.pread)
    assert state.sync_plan() == [Write(5000, b"y" * 100)]
    state.truncate(10)
    state.write(PAGE * 3, b"z" * PAGE, disk.pread)
    state.write(PAGE * 3, b"w" * PAGE, disk.pread)
    plan = state.sync_plan()
    assert plan[0] == Truncate(10) and plan[-1] == Truncate(4 * PAGE)


def test_a_truncate_below_the_floor_then_growth_reads_zeros_not_the_old_bytes() -> None:
    disk = Disk(b"abcdefgh" * 1000)
    state = FileState(8000)
    state.truncate(3)
    state.truncate(20)
    assert state.read(0, 100, disk.pread) == b"abc" + bytes(17)
    state.write(6000, b"!", disk.pread)
    assert state.read(5990, 20, disk.pread) == bytes(10) + b"!"


# --- the gate --------------------------------------------------------------------------------


def test_a_stall_holds_an_fsync_until_heal() -> None:
    gate = FsyncGate()
    gate.stall(30)
    done = threading.Event()

    def fsync() -> None:
        with gate.passage():
            pass
        done.set()

    thread = threading.Thread(target=fsync)
    thread.start()
    assert not done.wait(0.2)
    assert gate.fsyncs_stalled == 1 and gate.stall_remaining() is not None
    assert gate.fsyncs_waiting == 1  # held now: the evidence that a stall took effect
    gate.heal()
    assert done.wait(2)
    thread.join()
    assert gate.stall_remaining() is None
    assert gate.fsyncs_waiting == 0 and gate.fsyncs_stalled == 1


def test_an_fsync_interrupted_in_a_stall_no_longer_waits() -> None:
    gate = FsyncGate()
    gate.stall(30)
    killed = threading.Event()
    outcome: list[str] = []

    def fsync() -> None:
        try:
            with gate.passage(killed.is_set):
                outcome.append("passed")
        except Interrupted:
            outcome.append("interrupted")

    thread = threading.Thread(target=fsync)
    thread.start()
    deadline = time.monotonic() + 2
    while gate.fsyncs_waiting != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gate.fsyncs_waiting == 1
    killed.set()
    thread.join(2)
    assert outcome == ["interrupted"] and gate.fsyncs_waiting == 0
    assert gate.stall_remaining() is not None  # the stall itself goes on


def test_a_stall_ends_by_itself_and_slow_makes_fsync_last() -> None:
    gate = FsyncGate()
    gate.stall(0.2)
    began = time.monotonic()
    with gate.passage():
        pass
    assert 0.15 <= time.monotonic() - began < 2
    gate.slow(150)
    began = time.monotonic()
    with gate.passage():
        pass
    assert time.monotonic() - began >= 0.15
    gate.heal()
    began = time.monotonic()
    with gate.passage():
        pass
    assert time.monotonic() - began < 0.1
    assert (gate.fsyncs, gate.fsyncs_stalled) == (3, 1)


def test_an_interrupted_fsync_stops_waiting() -> None:
    gate = FsyncGate()
    gate.stall(30)
    began = time.monotonic()
    with pytest.raises(Interrupted), gate.passage(lambda: time.monotonic() - began > 0.1):
        pass
    assert time.monotonic() - began < 1


# --- corruption ------------------------------------------------------------------------------


def test_bitflip_flips_exactly_the_bits_it_reports(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    original = bytes(random.Random(1).randbytes(1000))
    path.write_bytes(original)
    size, flips = corrupt.bitflip(path, random.Random(3))
    assert size == 1000 and 1 <= len(flips) <= 8 and len(set(flips)) == len(flips)
    expected = bytearray(original)
    for byte, bit in flips:
        expected[byte] ^= 1 << bit
    assert path.read_bytes() == bytes(expected) != original


def test_bitflip_prefers_the_second_half() -> None:
    flips = [f for seed in range(200) for f in corrupt.flips_for(1000, random.Random(seed))]
    assert sum(byte >= 500 for byte, _ in flips) / len(flips) > 0.75


def test_truncate_cuts_at_least_a_byte_off_the_end(tmp_path: Path) -> None:
    path = tmp_path / "f"
    for seed in range(20):
        path.write_bytes(b"0123456789")
        before, after, tail = corrupt.truncate(path, random.Random(seed))
        assert before == 10 and 0 <= after < 10
        assert path.read_bytes() == b"0123456789"[:after]
        assert tail == b"0123456789"[after:]
    path.write_bytes(b"")
    assert corrupt.truncate(path, random.Random(0)) == (0, 0, b"")
    assert corrupt.bitflip(path, random.Random(0)) == (0, [])


def test_choose_takes_the_first_glob_that_matches_and_its_newest_file(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    for name, mtime in [("p/1.log", 100), ("p/2.log", 300), ("p/3.log", 300), ("q.idx", 900)]:
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, ns=(mtime, mtime))
    assert corrupt.choose(tmp_path, ["**/*.snap", "**/*.log", "*.idx"]) == tmp_path / "p/2.log"
    assert corrupt.choose(tmp_path, ["*.idx", "**/*.log"]) == tmp_path / "q.idx"
    assert corrupt.choose(tmp_path, ["*.nothing"]) is None
    assert corrupt.choose(tmp_path, ["**/*.log"], lambda p: -len(p.name)) == tmp_path / "p/1.log"


# --- the control channel's parsing -----------------------------------------------------------


class Levers:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def stall(self, seconds: float) -> None:
        self.calls.append(("stall", seconds))

    def slow(self, ms: float) -> None:
        self.calls.append(("slow", ms))

    def heal(self) -> None:
        self.calls.append(("heal",))

    def lose_unsynced(self, torn: bool, seed: int) -> dict[str, Any]:
        self.calls.append(("lose", torn, seed))
        return {"files": {}}

    def corrupt(self, globs: list[str], mode: str, seed: int) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    def repair(self) -> dict[str, Any]:
        return {"repaired": [], "not_repaired": []}

    def status(self) -> dict[str, Any]:
        return {"fsyncs": 0}


@pytest.mark.parametrize(("line", "error"), [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"op": "explode"}', "unknown op 'explode'"),
    (b'{"op": "stall"}', "'seconds' must be a number"),
    (b'{"op": "stall", "seconds": -1}', "'seconds' must be a number"),
    (b'{"op": "slow", "ms": "fast"}', "'ms' must be a number"),
    (b'{"op": "lose-unsynced", "torn": "yes"}', "'torn' must be true or false"),
    (b'{"op": "lose-unsynced", "seed": 1.5}', "'seed' must be an integer"),
    (b'{"op": "corrupt", "globs": []}', "'globs' must be a non-empty list"),
    (b'{"op": "corrupt", "globs": ["*"], "mode": "melt"}', "'mode' must be one of"),
    (b'{"op": "corrupt", "globs": ["*"]}', "RuntimeError: disk on fire"),
])
def test_a_bad_command_gets_an_error_answer(line: bytes, error: str) -> None:
    reply = answer(Levers(), line)
    assert set(reply) == {"error"} and error in reply["error"]


def test_commands_reach_the_levers() -> None:
    levers = Levers()
    assert answer(levers, b'{"op": "ping"}') == {"ok": True}
    assert answer(levers, b'{"op": "stall", "seconds": 2}') == {"ok": True}
    assert answer(levers, b'{"op": "slow", "ms": 5}') == {"ok": True}
    assert answer(levers, b'{"op": "heal"}') == {"ok": True}
    assert answer(levers, json.dumps({"op": "lose-unsynced", "torn": True, "seed": 9}).encode()
                  ) == {"files": {}}
    assert answer(levers, b'{"op": "status"}') == {"fsyncs": 0}
    assert levers.calls == [("stall", 2.0), ("slow", 5.0), ("heal",), ("lose", True, 9)]


# --- check -----------------------------------------------------------------------------------


def test_check_says_what_is_missing_without_a_fuse_device(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "no-fuse")
    reason = check_usable(missing)
    assert reason is not None and missing in reason and "--device /dev/fuse" in reason
    monkeypatch.setenv("KRAFT_FAULTFS_DEVICE", missing)
    assert main(["check"]) == 69
    said = capsys.readouterr()
    assert said.out == "" and said.err.count("\n") == 1 and "apt-get install fuse3" in said.err


def test_check_of_a_device_that_does_not_open(tmp_path: Path) -> None:
    not_a_device = tmp_path / "fuse"
    not_a_device.mkdir()
    reason = check_usable(str(not_a_device))
    assert reason is not None and "cannot open" in reason


def test_bad_usage_exits_64(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ctl", "/tmp/x.sock", "corrupt"]) == 64
    assert main(["ctl", "/tmp/x.sock", "stall"]) == 64
    assert main(["mount", "a"]) == 64
    assert main(["frobnicate"]) == 64


def test_ctl_says_when_nothing_answers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ctl", str(tmp_path / "nobody.sock"), "ping"]) == 3
    assert "nothing answers on" in capsys.readouterr().err
