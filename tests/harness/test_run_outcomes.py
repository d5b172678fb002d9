"""How a run ends decides what it may claim: a run in which nothing succeeded, whose nemesis died or
whose disk filled up is never VALID; a crash is never exit 1; bad usage fails before deploying."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import workloads
from contracts.history import History
from harness import runner, targets
from harness.backends.local import LocalBackend
from harness.cli import main as kraft
from harness.config import TestConfig
from harness.targets.reference import HARNESS_KEYS, properties

HERE = Path(__file__).parent
TOY = "toy_target:ToyTarget"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "KRAFT_LOCAL_DIR": str(tmp_path / "registry"), "PYTHONUNBUFFERED": "1"}


def _kraft_test(results: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "test", "--backend", "local", "--target", TOY,
            "--results-dir", str(results), *args]


def _strict_json(path: Path) -> Any:
    def refuse(constant: str) -> None:
        raise ValueError(f"{path.name} holds {constant}, which is not JSON")
    return json.loads(path.read_text(), parse_constant=refuse)


# -- bad usage, refused before anything is deployed ------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["--time-limit", "inf"],
    ["--time-limit", "nan"],
    ["--time-limit", "0"],
    ["--rate", "inf"],
    ["--rate", "1e-300"],  # one op per 10^300 s: an interval that is infinite
    ["--nemesis-interval", "inf"],
    ["--op-timeout", "1e300"],
    ["--recovery-time", "inf"],
    ["--recovery-time", "-1"],
    ["--target", "os:path"],
    ["--target", "json:dumps"],
    ["--node-config", "node.id=7"],
    ["--node-config", "listeners=CONTROLLER://0.0.0.0:1"],
    ["--node-config", "controller.quorum.voters=1@h:1"],
    ["--node-config", "metadata.log.dir=/tmp/elsewhere"],
    ["--node-config", "cluster.id=abc"],
])
def test_bad_usage_is_one_line_exit_64_before_deploying(
        argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.syspath_prepend(str(HERE))
    assert kraft(["test", "--backend", "local", "--results-dir", str(tmp_path / "results"),
                  *argv]) == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraft test: ") and "\n" not in err, err
    assert not (tmp_path / "registry").exists() and not (tmp_path / "results").exists()


def test_a_results_dir_that_cannot_be_written_is_refused_before_deploying(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert kraft(["test", "--backend", "local", "--results-dir", str(blocker / "results")]) == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kraft test: --results-dir: cannot write to {blocker}/results")
    assert not (tmp_path / "registry").exists()


def test_every_key_the_harness_writes_for_a_node_is_refused_as_node_config() -> None:
    from contracts.backend import ClusterSpec
    from harness.targets.reference import ReferenceTarget

    backend = LocalBackend()  # given addresses without starting anything
    spec = ClusterSpec("keys", ["n1", "n2"], ReferenceTarget.ports, Path("/nonexistent"))
    backend._spec, backend._run_root = spec, Path("/nonexistent")
    backend._ports = {(n, p): 1 for n in spec.nodes for p in spec.ports}
    backend._peers = {(a, b, p): ("127.0.0.1", 2) for a in spec.nodes for b in spec.nodes
                      for p in spec.ports if a != b}
    text = properties(backend, spec.nodes, "n1", {})
    keys = {line.split("=", 1)[0] for line in text.splitlines()
            if "=" in line and not line.startswith("#")}
    # the properties, and the cluster id that `kraft node format` is given
    assert keys | {"cluster.id"} == set(HARNESS_KEYS)
    target = ReferenceTarget()
    for key in HARNESS_KEYS:
        assert target.check_node_config({key: "x"}) is not None
    assert target.check_node_config({"unsafe": "skip-flush"}) is None


# -- crashes and misuse of the other commands --------------------------------------------------------

def test_a_crash_in_kraft_node_format_exits_3(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = tmp_path / "server.properties"
    config.write_text("node.id=1\nprocess.roles=controller\ncontroller.quorum.voters=1@127.0.0.1:9\n"
                      f"listeners=CONTROLLER://127.0.0.1:9\nmetadata.log.dir={blocker}/data\n")
    assert kraft(["node", "format", "--config", str(config),
                  "--cluster-id", "MkU3OEVBNTcwNTJENDM2Qg"]) == 3
    assert "crashed" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["report", "--no-such-flag"], ["report", "a", "b"],
                                  ["campaign", "--alluredir"]])
def test_report_and_campaign_misuse_is_64(argv: list[str]) -> None:
    assert kraft(argv) == 64


# -- runs that did not test what they claim ------------------------------------------------------------

def test_a_run_in_which_nothing_succeeds_is_unknown_with_the_reason(tmp_path: Path) -> None:
    done = subprocess.run(_kraft_test(tmp_path / "results", "--time-limit", "2", "--nemesis",
                                      "none", "--recovery-time", "1", "--node-config", "down=true"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    run = (tmp_path / "results" / "latest").resolve()
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] == "unknown"
    assert "no operation succeeded" in results["reason"]
    assert "no final read succeeded" in results["reason"]
    assert "verdict: UNKNOWN: no operation succeeded" in done.stdout
    assert _strict_json(run / "test.json")["outcome"] == "complete"


@pytest.fixture
def local_registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.syspath_prepend(str(HERE))
    yield


@pytest.mark.usefixtures("local_registry")
def test_a_nemesis_that_dies_fails_the_run_never_valid(tmp_path: Path) -> None:
    # `--nemesis-interval inf` is refused on the command line; here it reaches the schedule,
    # whose thread dies at its first wait (a timer that cannot be set)
    config = TestConfig(backend="local", target=TOY, nemesis=["kill"], nemesis_interval=float("inf"),
                        time_limit=1.5, rate=20, recovery_time=2, seed=1,
                        results_dir=str(tmp_path / "results"))
    outcome = runner.run(config, LocalBackend(), targets.get(TOY), workloads.get("append"),
                         out=io.StringIO())
    assert outcome.exit_code == 3, outcome.summary
    assert outcome.results["valid"] == "unknown"
    assert "the run failed: the nemesis died: OverflowError" in outcome.summary
    assert "verdict: VALID" not in outcome.summary
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["outcome"] == "failed" and "the nemesis died" in test["error"]
    # a re-check of the stored run says the same
    assert kraft(["check", "--no-plots", str(outcome.run_dir)]) == 2


# -- the history file: whole lines, and a full disk stops the run ----------------------------------------

def _op(n: int) -> dict[str, Any]:
    return {"process": n % 5, "type": "invoke" if n % 2 == 0 else "ok", "f": "append",
            "value": {"value": n, "padding": "x" * 100}}


def test_a_full_disk_stops_recording_and_keeps_whole_lines_only() -> None:
    history = History(Path("/dev/full"))  # every write fails with ENOSPC
    stamped = history.record(_op(0))
    assert stamped["index"] == 0
    assert history.write_error is not None and history.write_error.strerror
    assert history.ops() == []  # what the file lacks, memory lacks too: the verdict is the file's
    history.record(_op(1))
    assert history.ops() == []
    history.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 KiB tmpfs, for a real ENOSPC with real short writes (needs root)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_history_on_a_full_disk_holds_whole_lines(small_disk: Path) -> None:
    path = small_disk / "history.jsonl"
    history = History(path)
    n = 0
    while history.write_error is None:
        history.record(_op(n))
        n += 1
        assert n < 10_000, "the disk never filled"
    history.close()
    text = path.read_text()
    assert text.endswith("\n")
    stored = [json.loads(line) for line in text.splitlines()]
    assert stored == history.ops() and len(stored) == n - 1


def test_a_run_whose_disk_fills_stops_cleanly_and_says_so(small_disk: Path, tmp_path: Path
                                                          ) -> None:
    done = subprocess.run(_kraft_test(small_disk / "results", "--time-limit", "60", "--nemesis",
                                      "none", "--rate", "200", "--recovery-time", "2"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "history.jsonl could not be written (No space left on device)" in done.stdout
    run = (small_disk / "results" / "latest").resolve()
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    lines = (copy / "history.jsonl").read_text().splitlines()
    assert lines and all(json.loads(line) for line in lines)  # whole lines, no torn tail
    with contextlib.suppress(OSError):
        (copy / "results.json").unlink()
    # a re-check reads every stored op, and knows the run did not finish
    assert kraft(["check", "--no-plots", str(copy)]) == 2


# -- what the target promises reaches test.json, and its packages the backend ------------------------

@pytest.mark.usefixtures("local_registry")
def test_test_json_records_the_targets_promises_and_node_data() -> None:
    from toy_target import LaxToyTarget, ToyTarget

    from contracts.target import PROMISES
    assert runner.target_facts(ToyTarget()) == {
        "promises": sorted(PROMISES), "node_data": False, "crash_patterns": ["^toy: fatal"],
        "designed_exits": [{"pattern": "Address already in use",
                            "why": "refused to start: its port is taken", "after": []}]}
    lax = runner.target_facts(LaxToyTarget())["promises"]
    assert lax == sorted(set(PROMISES) - {"acked-writes-durable"})


@pytest.mark.usefixtures("local_registry")
def test_the_backend_is_given_the_targets_image_packages() -> None:
    from toy_target import PackagedToyTarget, ToyTarget
    plain = TestConfig(nemesis=["kill"])
    assert runner.cluster_options(plain, ToyTarget()) == {}
    assert runner.cluster_options(plain, PackagedToyTarget()) == {
        "packages": "toy-server toy-tools"}
    disks = TestConfig(nemesis=["power-loss"])
    assert runner.cluster_options(disks, PackagedToyTarget()) == {
        "fuse": "1", "packages": "toy-server toy-tools"}


@pytest.mark.slow
@pytest.mark.usefixtures("local_registry")
def test_what_a_target_does_not_promise_is_a_finding_of_a_real_run(tmp_path: Path) -> None:
    # n1 forgets its log when killed: lost writes, which this toy does not promise to keep, and
    # what follows from them, which it is judged on. Seed 1's first kill (at 0.5 s) takes every
    # node, n1 among them, so the forgetting never depends on how many faults fit in the run.
    config = TestConfig(backend="local", target="toy_target:LaxToyTarget", nemesis=["kill"],
                        nemesis_interval=0.5, time_limit=2.5, rate=40, recovery_time=5, seed=1,
                        node_config={"lossy": "true"}, results_dir=str(tmp_path / "results"))
    target = targets.get(config.target)
    outcome = runner.run(config, LocalBackend(), target, workloads.get("append"),
                         out=io.StringIO())
    test = json.loads((outcome.run_dir / "test.json").read_text())
    assert test["promises"] == sorted(target.promises) and test["node_data"] is False
    results = json.loads((outcome.run_dir / "results.json").read_text())
    assert "lost-write" in results["finding_types"], outcome.summary
    assert all(f["promise"] == "acked-writes-durable" for f in results["findings"]["lost-write"])
    assert "lost-write" not in results["anomaly_types"]
    # what else forgetting did (reads that went back, offsets given twice) it is judged on
    from checkers.promises import KIND_PROMISE
    assert results["anomaly_types"], outcome.summary
    assert all(KIND_PROMISE.get(kind, "always") in {*target.promises, "always"}
               for kind in results["anomaly_types"])
    assert results["valid"] is False and outcome.exit_code == 1
    assert not {"raft-invariants", "snapshots"} & set(results["checkers"])
    # a re-check of the stored run judges it under the same promises
    assert kraft(["check", "--no-plots", str(outcome.run_dir)]) == 1
    assert json.loads((outcome.run_dir / "results.json").read_text())["findings"] == \
        results["findings"]
