"""The kv workload through the harness: final reads of every key on every node, the reference
target's workloads and snapshot settings, and the node data it collects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contracts.backend import Backend
from contracts.history import History
from contracts.target import Client
from harness.commands import test as test_cli
from harness.config import TestConfig
from harness.runner import _final_reads
from harness.targets import reference
from harness.targets.reference import ReferenceTarget, write_node_dumps
from workloads.kv import KV

Op = dict[str, Any]


class FlakyClient(Client):
    """Fails the first read of all (a node not yet leading), then reads each key's number times
    ten."""

    def __init__(self, node: str, seen: list[tuple[str, Any]]) -> None:
        self.node = node
        self.seen = seen

    def open(self, backend: Backend, nodes: list[str], node: str) -> None:
        pass

    def invoke(self, op: Op, timeout: float) -> Op:
        key = op["value"]["key"]
        self.seen.append((self.node, key))
        if len(self.seen) == 1:
            return {**op, "type": "fail", "error": "not-leader"}
        return {**op, "type": "ok", "value": {"key": key, "value": key * 10}}

    def close(self) -> None:
        pass


def test_every_node_is_asked_every_key_until_it_answers() -> None:
    history = History()
    seen: list[tuple[str, Any]] = []
    config = TestConfig(nodes=["n1", "n2"], recovery_time=5.0, op_timeout=1.0)
    _final_reads(config, KV, history, lambda node: lambda: FlakyClient(node, seen), 100,
                 lambda _m: None)
    oks = [op for op in history.ops() if op["type"] == "ok"]
    assert [(op["value"]["key"], op["value"]["value"]) for op in oks] == \
        [(k, k * 10) for k in range(KV.keys)] * 2
    assert all(op["final"] for op in history.ops())
    assert seen == [("n1", 0)] + [(n, k) for n in ("n1", "n2") for k in range(KV.keys)]
    # one process per node: every invoke is completed before the next
    assert {op["process"] for op in history.ops()} == {100, 101}


def test_the_reference_target_runs_kv() -> None:
    assert "kv" in ReferenceTarget().workloads() and "append" in ReferenceTarget().workloads()


SNAPSHOT_KEYS = {
    "metadata.log.max.record.bytes.between.snapshots": "2000",
    "metadata.log.max.snapshot.interval.ms": "1000",
    "metadata.max.retention.bytes": "0",
    "metadata.max.retention.ms": "60000",
}


def test_the_snapshot_settings_pass_to_the_nodes() -> None:
    assert ReferenceTarget().check_node_config(SNAPSHOT_KEYS) is None
    problem = ReferenceTarget().check_node_config(
        {"metadata.log.max.record.bytes.between.snapshots": "0"})
    assert problem is not None and "between.snapshots" in problem and "\n" not in problem


@pytest.mark.parametrize("argv", [
    ["--nemesis", "lagging-follower,meteor"],
    ["--lagging-duration", "0"],
    ["--lagging-duration", "inf"],
    ["--partition-shapes", "follower,zigzag"],
])
def test_bad_nemesis_input_is_one_line_and_exit_64(argv: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert test_cli.main(argv) == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraft test: ") and "\n" not in err


def test_the_cli_takes_kv_the_lagging_follower_and_its_duration() -> None:
    args = test_cli.parser().parse_args(
        ["--workload", "kv", "--nemesis", "partition,lagging-follower", "--lagging-duration",
         "12.5", "--partition-shapes", "follower"])
    config = test_cli.config_from(args)
    assert config.workload == "kv" and config.nemesis == ["partition", "lagging-follower"]
    assert config.nemesis_options["lagging_duration"] == 12.5
    assert config.nemesis_options["partition_shapes"] == ["follower"]
    assert config.to_json()["lagging_duration"] == 12.5
    default = test_cli.config_from(test_cli.parser().parse_args([]))
    assert default.nemesis == ["partition", "pause", "kill"]


def test_collect_writes_a_snapshots_file_beside_the_log(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from reference_node.storage import dump

    calls: list[tuple[Path, Path]] = []

    def fake(data_dir: Path, out_path: Path) -> int:
        calls.append((Path(data_dir), Path(out_path)))
        Path(out_path).write_text(json.dumps({"file": "x.checkpoint", "valid": False,
                                              "error": "bad CRC"}) + "\n")
        return 1

    monkeypatch.setattr(dump, "dump_snapshots_jsonl", fake, raising=False)
    (tmp_path / reference.DATA).mkdir()
    write_node_dumps(tmp_path, 1)
    assert calls == [(tmp_path / reference.DATA, tmp_path / "snapshots.jsonl")]
    assert json.loads((tmp_path / "snapshots.jsonl").read_text())["valid"] is False
    assert (tmp_path / "final.json").exists()


def test_a_failing_snapshot_dump_leaves_the_other_files(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from reference_node.storage import dump

    def broken(data_dir: Path, out_path: Path) -> int:
        raise OSError("disk gone")

    monkeypatch.setattr(dump, "dump_snapshots_jsonl", broken, raising=False)
    (tmp_path / reference.DATA).mkdir()
    write_node_dumps(tmp_path, 2)
    assert json.loads((tmp_path / "final.json").read_text())["node_id"] == 2
