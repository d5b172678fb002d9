"""`kraft test` and `kraft clean` end to end, with the toy target (tests/harness/toy_target.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness import backends, targets
from harness.backends import pids
from harness.cli import main as kraft
from harness.commands import clean as clean_cli
from harness.commands import test as test_cli
from harness.config import TestConfig
from nemesis.registry import OPTIONS, default_options
from nemesis.spec import Choices, Count, Seconds

HERE = Path(__file__).parent
TOY = "toy_target:ToyTarget"


@pytest.mark.parametrize("argv", [
    ["--target", "nope"],
    ["--workload", "bank"],
    ["--nemesis", "partition,meteor"],
    ["--partition-shapes", "triangle"],
    ["--backend", "cloud"],
    ["--time-limit", "-1"],
    ["--nodes", "0"],
    ["--node-config", "novalue"],
    ["--seed", "abc"],
    ["--no-such-flag"],
    ["--test-name", "../escape"],
])
def test_bad_input_is_one_line_and_exit_64(argv: list[str], capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    assert test_cli.main(argv) == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraft test: ") and "\n" not in err


def test_a_check_only_workload_is_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    """`register` judges stored histories (kraft check --model register); no target runs it."""
    assert test_cli.main(["--workload", "register"]) == 64
    assert capsys.readouterr().err.strip() == (
        "kraft test: --workload: unknown workload 'register'; one of: append, kv, brokers")


# -- refused before anything is deployed: one line naming what, and how to fix it ---------------

def _refusal(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """`kraft test argv` in-process: exit 64, one line on stderr, nothing deployed or stored."""
    code = test_cli.main(["--results-dir", str(tmp_path / "results"), *argv])
    err = capsys.readouterr().err.strip()
    assert code == 64, err
    assert err.startswith("kraft test: ") and "\n" not in err, err
    assert not (tmp_path / "registry").exists() and not (tmp_path / "results").exists()
    return err


@pytest.fixture
def toys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.syspath_prepend(str(HERE))


@pytest.mark.usefixtures("toys")
def test_an_unknown_target_is_refused_with_the_known_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refusal(["--backend", "local", "--target", "nope"], tmp_path, capsys)
    assert err.startswith("kraft test: --target: unknown target 'nope'")
    assert err.endswith(f"one of: {', '.join(targets.TARGETS)}")
    assert "reference" in targets.TARGETS


@pytest.mark.usefixtures("toys")
def test_a_workload_the_target_cannot_run_is_refused_with_those_it_can(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refusal(["--backend", "local", "--target", TOY, "--workload", "kv"], tmp_path, capsys)
    assert err == f"kraft test: --workload: target {TOY} cannot run kv; it runs: append"


@pytest.mark.usefixtures("toys")
def test_what_the_machine_lacks_for_the_target_is_refused_on_that_backend(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from toy_target import PackagedToyTarget
    packaged = "toy_target:PackagedToyTarget"
    err = _refusal(["--backend", "local", "--target", packaged], tmp_path, capsys)
    assert err == f"kraft test: --target {packaged}: {PackagedToyTarget.PROBLEM}"
    # `auto` is resolved first: to local (no engine here), whose lack is then refused
    monkeypatch.setattr(backends, "_docker_unusable", lambda: "no Docker engine answers")
    assert _refusal(["--target", packaged], tmp_path, capsys) == err
    # resolved to docker, the image layer brings the program: nothing is missing
    monkeypatch.setattr(backends, "_docker_unusable", lambda: None)
    monkeypatch.setattr(backends, "_docker", _NamedBackend)
    config = test_cli.config_from(test_cli.parser().parse_args(
        ["--target", packaged, "--nemesis", "none"]))
    target, backend, note = test_cli.prepare(config)
    assert isinstance(target, PackagedToyTarget) and backend.name == "docker"
    assert note.startswith("backend auto: docker")


class _NamedBackend:
    """Stands in for the docker backend in `prepare`, which only asks its name and powers."""

    name = "docker"


@pytest.mark.usefixtures("toys")
def test_a_nemesis_the_target_cannot_do_is_refused_naming_the_target(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _refusal(["--backend", "local", "--target", TOY, "--nemesis", "kill,membership"],
                   tmp_path, capsys)
    assert err == (f"kraft test: --nemesis: membership: the target cannot change its voters "
                   f"(target {TOY}, local backend)")


def test_etcd_without_its_binary_is_refused_with_how_to_install_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("harness.targets.etcd", reason="harness/targets/etcd.py not written yet")
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no etcd on PATH, whatever the host has
    err = _refusal(["--backend", "local", "--target", "etcd", "--workload", "kv"], tmp_path,
                   capsys)
    assert err.startswith("kraft test: --target etcd: ") and "etcd-server" in err, err


def test_nats_without_its_binary_or_with_too_many_nodes_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    # one stream replicated on every node, and NATS allows at most 5 replicas
    err = _refusal(["--backend", "local", "--target", "nats", "--nodes", "7"], tmp_path, capsys)
    assert err.startswith("kraft test: --nodes: 7 nodes") and "--nodes 5 or fewer" in err, err
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    err = _refusal(["--backend", "local", "--target", "nats"], tmp_path, capsys)
    assert err.startswith("kraft test: --target nats: ") and "nats-server" in err, err
    # a workload it does not run: the line names the ones it does
    err = _refusal(["--backend", "local", "--target", "nats", "--workload", "kv"], tmp_path, capsys)
    assert err == "kraft test: --workload: target nats cannot run kv; it runs: append"


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "KRAFT_LOCAL_DIR": str(tmp_path / "registry"), "PYTHONUNBUFFERED": "1"}


def _kraft(tmp_path: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "test", "--backend", "local", "--target", TOY,
            "--results-dir", str(tmp_path / "results"), *args]


def test_a_toy_run_stores_the_results_layout_and_is_valid(tmp_path: Path) -> None:
    done = subprocess.run(_kraft(tmp_path, "--time-limit", "3", "--nemesis-interval", "0.5",
                                 "--rate", "40", "--seed", "5"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    run = (tmp_path / "results" / "latest").resolve()
    assert run.parent.name == "toy_target.ToyTarget-append-partition+pause+kill"
    test = json.loads((run / "test.json").read_text())
    assert test["seed"] == 5 and test["nodes"] == ["n1", "n2", "n3"] and test["seeds"]
    assert "--seed 5" in test["command"] and f"rerun: {test['command']}" in done.stdout
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert [op["index"] for op in history] == list(range(len(history)))
    nemesis = {op["f"] for op in history if op["process"] == "nemesis"}
    assert {"start-partition", "stop-partition", "start-pause", "start-kill"} <= nemesis
    finals = [op for op in history if op.get("final") and op["type"] == "ok"]
    assert len(finals) == 3
    assert json.loads((run / "results.json").read_text())["valid"] is True
    assert (run / "nodes" / "n1" / "log.txt").exists()
    assert (run / "timeline.html").exists() and (run / "plots" / "rate.png").exists()
    assert "verdict: VALID" in done.stdout and str(run.name) in done.stdout
    assert not list((tmp_path / "registry").glob("local/*/pids"))


def test_a_system_that_forgets_on_kill_is_invalid(tmp_path: Path) -> None:
    done = subprocess.run(_kraft(tmp_path, "--time-limit", "4", "--nemesis", "kill",
                                 "--nemesis-interval", "0.5", "--rate", "40", "--seed", "3",
                                 "--node-config", "lossy=true"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "verdict: INVALID" in done.stdout


def _start_and_wait_for_nodes(tmp_path: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(_kraft(tmp_path, "--time-limit", "60", "--nemesis", "none"),
                            env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if len(_node_records(tmp_path)) == 3:
            return proc
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the nodes never started")


def _node_records(tmp_path: Path) -> list[dict[str, int]]:
    records = [pids.read_json(p) for p in (tmp_path / "registry").glob("local/*/pids/*.json")]
    return [r for r in records if r is not None]


def _wait_all_dead(records: list[dict[str, int]], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(pids.alive(r) for r in records):
            return True
        time.sleep(0.1)
    return False


def test_ctrl_c_stops_every_node_and_exits_3(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    proc = _start_and_wait_for_nodes(tmp_path)
    records = _node_records(tmp_path)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 3, out
    assert "the run was interrupted" in out
    assert _wait_all_dead(records, 5)
    assert not list((tmp_path / "registry" / "local").iterdir())
    # the summary counts what was stored, and the run stays marked as partial when re-checked
    run = (tmp_path / "results" / "latest").resolve()
    stored = (run / "history.jsonl").read_text().splitlines()
    completed = [op for op in map(json.loads, stored)
                 if op["process"] != "nemesis" and op["type"] != "invoke"]
    assert completed and "operations: none" not in out
    assert json.loads((run / "test.json").read_text())["outcome"] == "interrupted"
    assert kraft(["check", "--no-plots", str(run)]) == 2
    assert "history: partial (the run was interrupted)" in capsys.readouterr().out
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] == "unknown" and results["error"] == "interrupted"


def test_sigkill_of_the_harness_leaves_no_node_and_clean_removes_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = _start_and_wait_for_nodes(tmp_path)
    records = _node_records(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    assert _wait_all_dead(records, 10)  # PR_SET_PDEATHSIG
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    assert clean_cli.main([]) == 0
    assert "local run directory" in capsys.readouterr().out
    assert not list((tmp_path / "registry" / "local").iterdir())


def _live_run(root: Path, owner_pid: int) -> tuple[Path, subprocess.Popen[bytes]]:
    """A local run registered as its backend registers one, with one node process."""
    node = subprocess.Popen(["sleep", "60"], process_group=0)
    run = root / "local" / "run-1"
    pids.claim(run, owner_pid)
    pids.write_json(run / "pids" / "n1.json", pids.record_for(node.pid))
    return run, node


def test_clean_leaves_live_runs_alone_unless_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KRAFT_LOCAL_DIR", str(tmp_path / "registry"))
    monkeypatch.setattr(backends, "SWEEPERS", ("harness.backends.local",))  # not the engine's
    run, node = _live_run(tmp_path / "registry", os.getpid())  # this process: a live harness
    try:
        assert clean_cli.main([]) == 0
        assert "nothing to clean" in capsys.readouterr().out
        assert run.is_dir() and node.poll() is None
        assert clean_cli.main(["--all"]) == 0
        assert f"local process {node.pid}" in capsys.readouterr().out
        assert node.wait(timeout=10) != 0 and not run.exists()
    finally:
        node.kill()
        node.wait()


def test_a_run_being_registered_is_never_seen_without_its_owner(tmp_path: Path) -> None:
    run = tmp_path / "local" / "run-2"
    pids.claim(run, os.getpid())
    assert pids.read_json(run / "owner.json") == pids.record_for(os.getpid())
    assert [p.name for p in (tmp_path / "local").iterdir()] == ["run-2"]  # nothing aside left


def test_without_workload_a_run_takes_its_targets_first() -> None:
    def workload(*argv: str) -> str:
        return test_cli.config_from(test_cli.parser().parse_args(list(argv))).workload

    assert workload() == "append"
    assert workload("--target", "etcd") == "kv"
    assert workload("--target", "nats") == "append"
    assert workload("--target", "etcd", "--workload", "append") == "append"  # refused later
    assert workload("--target", "nope") == "append"  # prepare refuses the name itself


# -- the faults' options: a flag each, made from the specs (nemesis/registry.py) -----------------

def test_every_fault_option_is_a_flag_of_its_spec_and_unset_takes_its_default() -> None:
    flags = {a.dest: a for a in test_cli.parser()._actions}
    for option in OPTIONS:
        assert flags[option.name].option_strings == [option.flag]
        assert flags[option.name].help == option.help
    config = test_cli.config_from(test_cli.parser().parse_args([]))
    assert config.nemesis_options == default_options()


def test_the_fault_flags_keep_their_names_defaults_and_help() -> None:
    flags = {a.option_strings[0]: a for a in test_cli.parser()._actions if a.option_strings}
    assert flags["--partition-shapes"].default is None and flags["--partition-shapes"].help == (
        "comma list of halves, one, leader, majorities-ring, bridge, follower, broker "
        "(default: all)")
    assert flags["--lagging-duration"].default == 15.0 and flags["--lagging-duration"].help == (
        "seconds the lagging-follower nemesis keeps a follower cut off, so that the leader "
        "snapshots past it and it must install the snapshot (default 15)")
    assert flags["--spares"].default == 2 and flags["--spares"].help == (
        "with the membership nemesis: nodes deployed as observers beside --nodes, for it to add "
        "as voters (default 2)")


def test_a_value_of_each_fault_option_reaches_the_run_and_test_json() -> None:
    argv: list[str] = []
    expected: dict[str, Any] = {}
    for option in OPTIONS:
        if isinstance(option.type, Seconds):
            text, value = "2.5", 2.5
        elif isinstance(option.type, Count):
            text, value = str(option.type.high), option.type.high
        else:
            assert isinstance(option.type, Choices)
            value = list(option.type.allowed[-2:])
            text = ",".join(value)
        argv += [option.flag, text]
        expected[option.name] = value
    config = test_cli.config_from(test_cli.parser().parse_args(argv))
    assert config.nemesis_options == expected
    recorded = config.to_json()
    assert {name: recorded[name] for name in expected} == expected


def test_test_json_keeps_each_fault_option_a_key_of_its_own_where_it_stood() -> None:
    keys = list(TestConfig().to_json())
    assert "nemesis_options" not in keys
    assert keys[keys.index("nemesis_interval"):keys.index("brokers") + 1] == [
        "nemesis_interval", "partition_shapes", "lagging_duration", "spares", "brokers"]
    with pytest.raises(ValueError, match="unknown nemesis options shapes"):
        TestConfig(nemesis_options={"shapes": []})


@pytest.mark.parametrize(("argv", "message"), [
    (["--spares", "9"], "--spares: must be from 0 to 8, got 9"),
    (["--spares", "x"], "argument --spares: invalid int value: 'x'"),
    (["--partition-shapes", "triangle"], "--partition-shapes: unknown value triangle; one of: "
     "halves, one, leader, majorities-ring, bridge, follower, broker"),
    (["--lagging-duration", "inf"], "argument --lagging-duration: must be a finite number of "
     "seconds from 0.001 to 1e+07, got 'inf'"),
])
def test_a_bad_fault_option_is_refused_in_the_words_it_was(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert test_cli.main(argv) == 64
    assert capsys.readouterr().err.strip() == f"kraft test: {message}"


def test_a_kraft_process_skips_hypothesis_and_an_in_process_caller_keeps_it() -> None:
    """kio imports hypothesis whenever it is installed; a kraft process (the console script,
    `python -m harness.cli`) has no use for it and does not pay for it, while pytest, calling
    main(argv) in-process, must still be able to import it."""
    probe = ("import sys; from harness.cli import main; {call}; import kio.schema.errors; "
             "print(sys.modules.get('hypothesis') is not None)")
    as_process = subprocess.run(
        [sys.executable, "-c", probe.format(call="sys.argv = ['kraft', '--help']; main()")],
        capture_output=True, text=True, check=True)
    assert as_process.stdout.strip().splitlines()[-1] == "False"
    in_process = subprocess.run(
        [sys.executable, "-c", probe.format(call="main(['--help'])")],
        capture_output=True, text=True, check=True)
    assert in_process.stdout.strip().splitlines()[-1] == "True"
    assert kraft(["--help"]) == 0
    assert sys.modules.get("hypothesis", "not imported") is not None  # this pytest's own, untouched


@pytest.mark.parametrize(("time_limit", "interval", "kinds", "warned"), [
    (15, 5, ["partition", "pause", "kill"], True),  # turns at 5 and 10; one at 15 races the end
    (20, 5, ["partition", "pause", "kill"], False),
    (5, 1, ["kill"], False),
    (3, 10, ["pause", "kill"], True),
    (60, 5, [], False),
])
def test_a_time_limit_too_short_for_every_kind_to_start_is_said_before_the_run(
        time_limit: float, interval: float, kinds: list[str], warned: bool) -> None:
    config = TestConfig(nemesis=kinds, nemesis_interval=interval, time_limit=time_limit)
    warning = test_cli.too_short(config)
    assert (warning is not None) == warned
    if warning:
        least = (len(kinds) + 1) * interval
        assert f"--time-limit {least:g} or more" in warning and "UNKNOWN" in warning


def test_the_warning_is_printed_before_anything_is_deployed(tmp_path: Path) -> None:
    done = subprocess.run(_kraft(tmp_path, "--time-limit", "3", "--nemesis", "pause,kill",
                                 "--nemesis-interval", "10", "--rate", "20",
                                 "--recovery-time", "1", "--seed", "2"),
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    before, _, _ = done.stderr.partition("phase: deploy")
    assert "warning: 3s with a fault turn every 10s starts at most 0 of the 2 fault kinds" in before


def test_kraft_version_names_the_installed_build(capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.metadata

    assert kraft(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kraft {importlib.metadata.version('kraft-jepsen')}"


@pytest.mark.parametrize(("argv", "said"), [
    (["tset"], "kraft: unknown command 'tset' (did you mean test?); one of: "),
    (["test", "--nemesis", "partiton,kill"],
     "--nemesis: unknown value partiton (did you mean partition?); one of: "),
    (["test", "--workload", "appnd"], "--workload: unknown workload 'appnd' (did you mean append?)"),
    (["test", "--nemesis", "meteor"], "--nemesis: unknown value meteor; one of: "),
])
def test_a_near_miss_is_named(argv: list[str], said: str,
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert kraft(argv) == 64
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    [],
    ["--nodes", "a,b,c", "--nemesis", "none", "--time-limit", "0.5", "--rate", "33.3",
     "--seed", "7", "--results-dir", "/tmp/somewhere else", "--test-name", "mine"],
    ["--nodes", "5", "--nemesis", "partition,lagging-follower", "--partition-shapes",
     "leader,majorities-ring", "--lagging-duration", "12.5", "--node-config", "unsafe=skip-flush",
     "--node-config", "read.mode=leader", "--min-availability", "0.5,kill=20%", "--seed", "3",
     "--op-timeout", "0.25", "--recovery-time", "0", "--concurrency", "4"],
    ["--brokers", "2", "--workload", "brokers", "--nemesis", "stale-incarnation", "--seed", "9"],
])
def test_the_rerun_command_makes_the_same_configuration(argv: list[str]) -> None:
    """test.json's `command` and the summary's `rerun:` line: parsed again, the very run."""
    import shlex

    config = test_cli.config_from(test_cli.parser().parse_args(argv))
    again = shlex.split(config.command_line())
    assert again[:2] == ["kraft", "test"] and "--seed" in again
    assert test_cli.config_from(test_cli.parser().parse_args(again[2:])) == config
    assert config.to_json()["command"] == config.command_line()


@pytest.mark.parametrize(("argv", "said"), [
    (["--target", "nats", "--nemesis", "stale-incarnation"],
     "kraft test: --nemesis stale-incarnation: target nats has no broker nodes"),
    (["--target", "etcd", "--partition-shapes", "broker", "--nemesis", "partition"],
     "kraft test: --partition-shapes broker: target etcd has no broker nodes"),
    (["--target", "etcd", "--brokers", "2"], "kraft test: --brokers: target etcd has no broker nodes"),
    (["--workload", "brokers"], "--workload brokers: needs broker nodes to describe (--brokers N)"),
])
def test_an_option_the_target_cannot_honour_names_the_target(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Not "--brokers N" for a target that would refuse --brokers in turn (issue 46)."""
    assert kraft(["test", *argv]) == 64
    assert said in capsys.readouterr().err
