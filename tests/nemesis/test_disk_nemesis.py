"""The disk nemeses (nemesis/disk.py) drive their levers in the right order, record what they did,
and leave a node that refuses a damaged disk down; the runner's levers (harness/disk.py) speak
`kraft faultfs ctl` through the backend. The filesystem itself is tested in test_faultfs*.py."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest

from contracts.backend import BackendError, CommandResult
from harness.disk import Disks
from nemesis.base import Env, NoEffect
from nemesis.disk import CORRUPT_TARGETS, POWER_TARGETS, Corrupt, FsyncStall, PowerLoss
from nemesis.process import Kill
from nemesis.registry import available, build

NODES = ["n1", "n2", "n3"]


class Log:
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []


class FakeDisk:
    """A disk per node whose status tells what was done to it, as the filesystem's does: a
    stall holds `waiting` fsyncs (counted in `fsyncs_stalled`), a heal lets them go on unless
    `stuck`; `files` False: no file to corrupt."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.stalled: set[str] = set()
        self.waiting = 0  # fsyncs each stall holds
        self.held: dict[str, int] = {}
        self.stuck: set[str] = set()  # disks whose heal does not take
        self.files = True
        self.damaged: dict[str, list[str]] = {}

    def stall(self, node: str) -> dict[str, Any]:
        self.log.calls.append(("stall", node))
        self.stalled.add(node)
        self.held[node] = self.held.get(node, 0) + self.waiting
        return {}

    def heal(self, node: str) -> dict[str, Any]:
        self.log.calls.append(("heal", node))
        if node not in self.stuck:
            self.stalled.discard(node)
        return {}

    def status(self, node: str) -> dict[str, Any]:
        stalled = node in self.stalled
        return {"stalled": stalled, "fsyncs_waiting": self.waiting if stalled else 0,
                "fsyncs_stalled": self.held.get(node, 0), "damaged": self.damaged.get(node, [])}

    def lose_unsynced(self, node: str, torn: bool, seed: int) -> dict[str, Any]:
        self.log.calls.append(("lose", node, str(torn), str(seed)))
        return {"dropped_bytes": 100, "kept_bytes": 10 if torn else 0, "files": {"a": {}}}

    def corrupt(self, node: str, kind: str, mode: str, seed: int) -> dict[str, Any]:
        self.log.calls.append(("corrupt", node, kind, mode))
        if not self.files:
            return {"file": None, "mode": mode, "size_before": None, "size_after": None,
                    "flipped": []}
        self.damaged.setdefault(node, []).append(f"{kind}.file")
        return {"file": f"{kind}.file", "mode": mode, "size_before": 10,
                "size_after": 9 if mode == "truncate" else 10,
                "flipped": [[7, 2]] if mode == "bitflip" else []}

    def repair(self, node: str) -> dict[str, Any]:
        self.log.calls.append(("repair", node))
        return {"repaired": self.damaged.pop(node, []), "not_repaired": []}

    def file_kinds(self) -> list[str]:
        return ["segment", "quorum-state"]


class FakeBackend:
    name = "fake"

    def __init__(self) -> None:
        self.running = set(NODES)

    def is_running(self, node: str) -> bool:
        return node in self.running


class FakeDB:
    """Kills and starts; refuses to start the nodes of `refuses` (a damaged disk) until their
    disk is repaired, those of `hopeless` always."""

    def __init__(self, log: Log, backend: FakeBackend, refuses: Sequence[str] = (),
                 hopeless: Sequence[str] = ()) -> None:
        self.log = log
        self.backend = backend
        self.refuses = set(refuses)
        self.hopeless = set(hopeless)

    def kill(self, backend: object, node: str) -> None:
        self.log.calls.append(("kill", node))
        self.backend.running.discard(node)

    def start(self, backend: object, node: str) -> None:
        self.log.calls.append(("start", node))
        repaired = ("repair", node) in self.log.calls
        if node in self.hopeless or (node in self.refuses and not repaired):
            raise BackendError(f"{node}: kraft node exited at start (see nodes/{node}/node.log)")
        self.backend.running.add(node)


def make_env(refuses: Sequence[str] = (),
             hopeless: Sequence[str] = ()) -> tuple[Env, Log, FakeBackend]:
    log = Log()
    backend = FakeBackend()
    env = Env(backend, FakeDB(log, backend, refuses, hopeless),  # type: ignore[arg-type]
              list(NODES), disk=FakeDisk(log))
    return env, log, backend


def test_fsync_stall_stalls_the_chosen_disks_and_the_stop_heals_them() -> None:
    env, log, _ = make_env()
    disk = env.disk
    assert isinstance(disk, FakeDisk)
    disk.held = {node: 4 for node in NODES}  # fsyncs earlier stalls held
    disk.waiting = 3
    fault = FsyncStall(env, ["minority"])
    choice = fault.choose(random.Random(3))
    assert choice["target"] == "minority" and len(choice["nodes"]) == 1
    [node] = choice["nodes"]
    done = fault.start(choice)
    assert log.calls == [("stall", node)]
    # the filesystem's own status is the proof
    assert done["evidence"] == {node: "stalled, 3 fsyncs waiting"}
    stopped = fault.stop()
    assert stopped["nodes"] == choice["nodes"]
    assert stopped["fsyncs_stalled"] == {node: 3}  # those of this stall, not the earlier ones
    assert stopped["evidence"] == {node: "healed, 3 fsyncs held"}
    assert log.calls[-1] == ("heal", node)
    log.calls.clear()
    fault.heal()
    assert sorted(c[1] for c in log.calls) == NODES  # a heal heals every disk


def test_a_stall_the_status_does_not_show_fails_the_step() -> None:
    env, _, _ = make_env()
    disk = env.disk
    assert isinstance(disk, FakeDisk)
    disk.stall = lambda node: {}  # type: ignore[method-assign]  # a lever that does nothing
    with pytest.raises(RuntimeError, match="n1 not stalled after the stall"):
        FsyncStall(env, ["one"]).start({"target": "one", "nodes": ["n1"]})


def test_a_filesystem_that_does_not_say_stalled_is_read_by_its_stall_remaining() -> None:
    env, _, _ = make_env()
    disk = env.disk
    assert isinstance(disk, FakeDisk)
    told = disk.status
    disk.status = lambda node: {  # type: ignore[method-assign]  # a faultfs of an older image
        "fsyncs_stalled": 0, "stall_remaining": 119.5 if told(node)["stalled"] else None}
    fault = FsyncStall(env, ["one"])
    done = fault.start({"target": "one", "nodes": ["n1"]})
    assert done["evidence"] == {"n1": "stalled, fsyncs waiting not told"}
    assert fault.stop()["evidence"] == {"n1": "healed, 0 fsyncs held"}


def test_a_heal_that_leaves_fsyncs_waiting_fails_the_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("nemesis.disk.DRAIN_WAIT_S", 0.1)
    env, _, _ = make_env()
    disk = env.disk
    assert isinstance(disk, FakeDisk)
    disk.waiting, disk.stuck = 2, {"n2"}
    fault = FsyncStall(env, ["minority"])
    fault.start({"target": "minority", "nodes": ["n2"]})
    with pytest.raises(RuntimeError, match=r"n2 not healed .*still stalled"):
        fault.stop()


def test_power_loss_kills_before_it_drops_and_restarts_at_the_stop() -> None:
    env, log, backend = make_env()
    fault = PowerLoss(env, ["all"])
    choice = fault.choose(random.Random(5))
    assert choice["nodes"] == NODES
    # everything random about it is in the choice, so the history can replay it
    assert set(choice["torn"]) == set(choice["seeds"]) == set(NODES)
    done = fault.start({**choice, "brownout": 0.0})
    for node in NODES:
        node_calls = [c for c in log.calls if c[1] == node]
        assert node_calls[0] == ("kill", node)  # the process dies first, then its page cache
        assert node_calls[1][0] == "lose" and node_calls[1][3] == str(choice["seeds"][node])
        assert len(node_calls) == 2
        assert done["lost"][node]["dropped_bytes"] == 100
        assert done["evidence"][node] == "killed, 100 unsynced bytes of 1 files dropped"
    assert not backend.running
    stopped = fault.stop()
    assert stopped == {"nodes": NODES, "evidence": {node: "running" for node in NODES}}
    assert backend.running == set(NODES)


def test_power_loss_leaves_a_node_that_is_down_alone_and_is_no_effect_if_all_are() -> None:
    env, log, backend = make_env()
    backend.running.discard("n2")  # killed by another fault
    fault = PowerLoss(env, ["all"])
    cut = {"target": "all", "nodes": NODES, "brownout": 0.0,
           "torn": {n: False for n in NODES}, "seeds": {n: 1 for n in NODES}}
    done = fault.start(cut)
    assert done["nodes"] == ["n1", "n3"] and set(done["lost"]) == {"n1", "n3"}
    assert done["evidence"]["n2"] == "already gone"
    assert not [c for c in log.calls if c[1] == "n2"]  # its disk is not touched either
    assert fault.stop()["nodes"] == ["n1", "n3"]
    assert "n2" not in backend.running  # its restart is the other fault's
    backend.running.clear()
    with pytest.raises(NoEffect) as no_effect:
        fault.start(cut)
    assert no_effect.value.evidence == {n: "already gone" for n in NODES}


def test_a_power_loss_that_drops_nothing_is_still_a_power_loss() -> None:
    env, _, _ = make_env()
    disk = env.disk
    assert isinstance(disk, FakeDisk)
    disk.lose_unsynced = lambda node, torn, seed: {  # type: ignore[method-assign]
        "dropped_bytes": 0, "kept_bytes": 0, "files": {}}
    done = PowerLoss(env, ["one"]).start({"target": "one", "nodes": ["n1"], "brownout": 0.0,
                                          "torn": {"n1": True}, "seeds": {"n1": 1}})
    assert done["nodes"] == ["n1"]
    assert done["evidence"] == {"n1": "killed, 0 unsynced bytes of 0 files dropped"}


def test_a_brownout_stalls_fsync_on_the_running_nodes_before_the_power_goes() -> None:
    env, log, _ = make_env()
    fault = PowerLoss(env, ["majority"])
    brownouts = [fault.choose(random.Random(s))["brownout"] for s in range(60)]
    assert 0.0 in brownouts and all(b == 0.0 or 0.5 <= b <= 2.0 for b in brownouts)
    fault.start({"target": "majority", "nodes": ["n1", "n2"], "brownout": 0.05,
                 "torn": {"n1": False, "n2": True}, "seeds": {"n1": 1, "n2": 2}})
    for node in ("n1", "n2"):
        kinds = [c[0] for c in log.calls if c[1] == node]
        # stalled while running, then killed, then the unsynced lost, and the disk back
        assert kinds == ["stall", "kill", "lose", "heal"]


def test_power_loss_choices_are_reproducible_from_the_seed() -> None:
    env, _, _ = make_env()
    fault = PowerLoss(env, list(POWER_TARGETS))
    first = [fault.choose(random.Random(9)) for _ in range(3)]
    again = [fault.choose(random.Random(9)) for _ in range(3)]
    assert first == again


def test_a_node_refusing_its_damaged_disk_is_repaired_and_restarted() -> None:
    env, log, backend = make_env(refuses=["n2"])
    corrupt = Corrupt(env, ["one"])
    choice = {"target": "one", "nodes": ["n2"], "file": {"n2": "segment"},
              "mode": {"n2": "bitflip"}, "seeds": {"n2": 1}}
    done = corrupt.start(choice)
    assert log.calls[:2] == [("kill", "n2"), ("corrupt", "n2", "segment", "bitflip")]
    assert done["damage"]["n2"]["file"] == "segment.file"
    assert done["evidence"] == {"n2": "killed, 1 bits of segment.file flipped"}
    stopped = corrupt.stop()
    assert "exited at start" in stopped["refused"]["n2"]
    assert stopped["repaired"] == {"n2": {"repaired": ["segment.file"], "not_repaired": []}}
    assert "still_refused" not in stopped
    assert stopped["evidence"] == {"n2": "running after the repair (0 damaged files left)"}
    assert log.calls[2:] == [("start", "n2"), ("repair", "n2"), ("start", "n2")]
    assert not env.broken and "n2" in backend.running


def test_a_node_that_refuses_even_after_repair_stays_down_and_no_heal_restarts_it() -> None:
    env, log, backend = make_env(hopeless=["n2"])
    corrupt = Corrupt(env, ["one"])
    done = corrupt.start({"target": "one", "nodes": ["n2"], "file": {"n2": "segment"},
                          "mode": {"n2": "truncate"}, "seeds": {"n2": 1}})
    assert done["evidence"] == {"n2": "killed, segment.file cut from 10 to 9 bytes"}
    stopped = corrupt.stop()
    assert "exited at start" in stopped["still_refused"]["n2"]
    assert stopped["evidence"] == {"n2": "broken: left down"}
    assert env.broken == {"n2"}
    log.calls.clear()
    corrupt.heal()
    Kill(env, ["one"]).heal()  # another fault's heal leaves it down too
    assert ("start", "n2") not in log.calls
    assert "n2" not in backend.running
    # and later faults do not pick it
    assert all("n2" not in corrupt.choose(random.Random(s))["nodes"] for s in range(20))


def test_a_power_loss_restart_that_fails_is_a_failed_step_not_a_refusal() -> None:
    env, _, _ = make_env(refuses=["n1"])
    fault = PowerLoss(env, ["one"])
    fault.start({"target": "one", "nodes": ["n1"], "torn": {"n1": False}, "seeds": {"n1": 1}})
    with pytest.raises(BackendError):
        fault.stop()
    assert not env.broken


def test_a_corruption_with_no_file_to_damage_is_no_effect_and_leaves_nothing_down() -> None:
    env, _, backend = make_env()
    disk = env.disk
    assert isinstance(disk, FakeDisk)
    disk.files = False
    corrupt = Corrupt(env, ["one"])
    with pytest.raises(NoEffect) as no_effect:
        corrupt.start({"target": "one", "nodes": ["n3"], "file": {"n3": "snapshot"},
                       "mode": {"n3": "bitflip"}, "seeds": {"n3": 1}})
    assert no_effect.value.evidence == {"n3": "killed, no file to damage"}
    assert "n3" in backend.running and corrupt.affected == []


def test_corrupt_never_targets_a_majority() -> None:
    env, _, _ = make_env()
    fault = Corrupt(env, list(CORRUPT_TARGETS))
    for seed in range(50):
        assert len(fault.choose(random.Random(seed))["nodes"]) <= 1  # of three nodes


def test_disk_kinds_are_refused_with_the_reason_and_built_when_usable() -> None:
    env, _, _ = make_env()
    refused = available(env.backend, env.db, "no /dev/fuse (apt-get install fuse3)")  # type: ignore[arg-type]
    assert refused["fsync-stall"] == refused["power-loss"] == refused["corrupt"] == \
        "no /dev/fuse (apt-get install fuse3)"
    usable = available(env.backend, env.db, None)  # type: ignore[arg-type]
    assert usable["power-loss"] is None
    faults = build(["fsync-stall", "power-loss", "corrupt"], env)
    assert [f.kind for f in faults] == ["fsync-stall", "power-loss", "corrupt"]
    with pytest.raises(TypeError, match="fault filesystem"):
        build(["power-loss"], Env(env.backend, env.db, NODES))


# -- the runner's levers: `kraft faultfs` through the backend ----------------------------------


class ExecBackend:
    """Answers `kraft faultfs ...` commands as a node host would."""

    name = "local"

    def __init__(self, answers: dict[str, CommandResult]) -> None:
        self.answers = answers
        self.argvs: list[list[str]] = []

    def node_dir(self, node: str) -> str:
        return f"/runs/x/{node}"

    def exec(self, node: str, argv: Sequence[str], check: bool = True,
             timeout: float = 60.0) -> CommandResult:
        self.argvs.append(list(argv))
        return self.answers.get(argv[2], CommandResult(tuple(argv), 0, "{}\n", ""))


class DataDirDB:
    def data_dir(self, backend: object, node: str) -> str:
        return f"/runs/x/{node}/data"

    def data_files(self) -> dict[str, list[str]]:
        return {"segment": ["**/*.log"], "quorum-state": ["**/quorum-state"]}


def test_disks_mount_over_the_data_directory_and_speak_json() -> None:
    lost = {"dropped_bytes": 5, "kept_bytes": 0, "files": {}}
    backend = ExecBackend({"ctl": CommandResult((), 0, json.dumps(lost) + "\n", "")})
    disks = Disks(backend, DataDirDB(), NODES, "run-1")  # type: ignore[arg-type]
    disks.mount_all()
    mount = next(a for a in backend.argvs if a[2] == "mount" and a[4] == "/runs/x/n2/data")
    assert mount[:4] == ["kraft", "faultfs", "mount", "/runs/x/n2/data.backing"]
    assert "--daemon" in mount and mount[mount.index("--fsname") + 1] == "kraft-faultfs:run-1"
    # unix socket paths are short whatever the run's name
    assert all(len(disks.socket(n)) < 60 for n in NODES)
    assert disks.lose_unsynced("n1", True, 42) == lost
    assert backend.argvs[-1][4:] == ["lose-unsynced", "--torn", "--seed", "42"]
    disks.corrupt("n1", "quorum-state", "truncate", 3)
    # the kind asked for first, then the others, for a node that has none of it
    assert backend.argvs[-1][4:] == ["corrupt", "--glob", "**/quorum-state", "--glob", "**/*.log",
                                     "--mode", "truncate", "--seed", "3"]


def test_disks_report_a_filesystem_that_fails_or_refuses() -> None:
    backend = ExecBackend({
        "mount": CommandResult((), 69, "", "kraft faultfs: no /dev/fuse: apt-get install fuse3\n"),
        "ctl": CommandResult((), 0, '{"error": "unknown op"}\n', "")})
    disks = Disks(backend, DataDirDB(), NODES, "run-2")  # type: ignore[arg-type]
    with pytest.raises(BackendError, match="no /dev/fuse"):
        disks.mount_all()
    with pytest.raises(BackendError, match="refused"):
        disks.heal("n1")
    backend.answers["ctl"] = CommandResult((), 3, "", "nothing answers on /tmp/x.sock")
    disks.mounted = ["n1"]
    assert disks.dead() == ["n1"]
