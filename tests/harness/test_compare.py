"""`kraft compare`'s tables, views and checks, on run directories written here in the real formats
(test.json, results.json, history.jsonl as `kraft test` stores them), each cell checked against
figures worked out by hand from those histories."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from contracts.target import DB, Client, Target
from harness import compare, compare_report, targets
from harness.commands import compare as compare_cli
from harness.commands.compare import Planned

MS = 1_000_000  # ns


def _op(index: int, ms: float, process: int | str, type_: str, f: str, value: Any = None,
        **extra: Any) -> dict[str, Any]:
    return {"index": index, "time": int(ms * MS), "process": process, "type": type_, "f": f,
            "value": value, **extra}


def kill_history(append_ms: float = 10.0) -> list[dict[str, Any]]:
    """Two appends and a read; a kill from 100 to 600 ms; one more append after it.

    Client ops: append(0..append_ms) ok, append(200..1200) info and read(300..350) ok while the
    fault is open, append(800..830) ok. So: 4 ops, 3 ok, 2 during the fault of which 1 ok;
    recovery after the start 350-100 = 250 ms, after the stop 830-600 = 230 ms."""
    ops = [
        _op(0, 0, 0, "invoke", "append", {"value": 1}),
        _op(1, append_ms, 0, "ok", "append", {"value": 1, "offset": 0}, node="n1"),
        _op(2, 100, "nemesis", "invoke", "start-kill", {"target": "one"}),
        _op(3, 110, "nemesis", "ok", "start-kill", {"target": "one", "nodes": ["n1"]}),
        _op(4, 200, 0, "invoke", "append", {"value": 2}),
        _op(5, 300, 1, "invoke", "read", {"from": 0}),
        _op(6, 350, 1, "ok", "read", {"from": 0, "hw": 1, "records": [[0, 1]]}, node="n2"),
        _op(7, 500, "nemesis", "invoke", "stop-kill", None),
        _op(8, 600, "nemesis", "ok", "stop-kill", {"nodes": ["n1"]}),
        _op(9, 800, 1, "invoke", "append", {"value": 3}),
        _op(10, 830, 1, "ok", "append", {"value": 3, "offset": 2}, node="n2"),
        _op(11, 1200, 0, "info", "append", {"value": 2}, error="timeout", node="n1"),
    ]
    return sorted(ops, key=lambda op: op["time"])


def write_run(root: Path, target: str, workload: str, nemesis: list[str], seed: int,
              valid: bool | str = True, anomalies: dict[str, list[Any]] | None = None,
              findings: dict[str, list[Any]] | None = None,
              history: list[dict[str, Any]] | None = None) -> Path:
    """A run directory as `kraft test` stores it: <root>/<name>/<start>/."""
    name = f"{target}-{workload}-{'+'.join(nemesis) or 'none'}-s{seed}"
    start = f"2026-11-26T07:0{seed % 10}:00.000000"
    run = root / name / start.replace("-", "").replace(":", "")
    run.mkdir(parents=True)
    test = {"backend": "local", "target": target, "nodes": ["n1", "n2", "n3"],
            "workload": workload, "nemesis": nemesis, "seed": seed, "name": name,
            "test_name": name, "start_time": start, "end_time": start, "outcome": "complete",
            "promises": sorted(["linearizable", "no-duplicates"]), "node_data": False}
    anomalies, findings = anomalies or {}, findings or {}
    checker = {"valid": valid, "anomaly_types": sorted(anomalies), "anomalies": anomalies,
               "finding_types": sorted(findings), "findings": findings}
    results = {"valid": valid, "checkers": {"log-anomalies": checker},
               "anomaly_types": sorted(anomalies), "anomalies": anomalies,
               "finding_types": sorted(findings), "findings": findings, "stats": {}}
    (run / "test.json").write_text(json.dumps(test))
    (run / "results.json").write_text(json.dumps(results))
    ops = [{**op, "index": i} for i, op in enumerate(kill_history() if history is None
                                                     else history)]
    (run / "history.jsonl").write_text("".join(json.dumps(op) + "\n" for op in ops))
    return run


LOST = {"lost-write": [{"ops": [4], "explanation": "append 2 acknowledged, never read"}]}
STALE = {"stale-read": [{"ops": [6], "explanation": "read missed 1",
                         "promise": "linearizable-reads"}]}


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """Two targets x append x kill, two seeds each, and a run that cannot be analyzed."""
    root = tmp_path / "results"
    write_run(root, "alpha", "append", ["kill"], 1)
    write_run(root, "alpha", "append", ["kill"], 2, history=kill_history(append_ms=30.0))
    write_run(root, "beta", "append", ["kill"], 1, valid=False, anomalies=LOST)
    write_run(root, "beta", "append", ["kill"], 2, findings=STALE)
    broken = write_run(root, "beta", "append", ["kill"], 3, valid="unknown")
    (broken / "history.jsonl").write_text("")
    return root


def _row(data: dict[str, Any], workload: str, nemesis: str, target: str) -> dict[str, Any]:
    table = next(t for t in data["tables"] if t["workload"] == workload)
    return next(r for r in table["rows"] if (r["nemesis"], r["target"]) == (nemesis, target))


def test_each_cell_is_the_runs_figures(stored: Path) -> None:
    data = compare.tables(compare.find_runs([stored]), targets=["beta", "alpha"])
    (table,) = data["tables"]
    assert table["workload"] == "append" and table["targets"] == ["beta", "alpha"]
    assert table["nemeses"] == ["kill"]

    alpha = _row(data, "append", "kill", "alpha")
    assert alpha["runs"] == 2
    assert (alpha["valid"], alpha["invalid"], alpha["unknown"]) == (2, 0, 0)
    assert alpha["valid_share"] == 1.0
    assert alpha["anomalies"] == {} and alpha["findings"] == {}
    assert (alpha["ops"], alpha["ok_ops"]) == (8, 6)
    assert (alpha["fault_ops"], alpha["fault_ok_ops"]) == (2 * 2, 2 * 1)
    assert alpha["availability_during_faults"] == 0.5
    assert alpha["availability"] == {"kill": {"ops": 4, "ok": 2, "share": 0.5}}
    # each history spans 0..1200 ms: 6 ok in 2.4 s
    assert alpha["duration_s"] == 2.4 and alpha["throughput_ok_per_s"] == 2.5
    assert alpha["recovery"] == {
        "start": {"events": 2, "recovered": 2, "p50_ms": 250.0, "max_ms": 250.0},
        "stop": {"events": 2, "recovered": 2, "p50_ms": 230.0, "max_ms": 230.0}}
    # ok latencies: appends 10, 30 (seed 1) and 30, 30 (seed 2); reads 50, 50
    assert alpha["latency"]["append"] == {"ok_ops": 4, "p50_ms": 30.0, "p99_ms": 30.0}
    assert alpha["latency"]["read"] == {"ok_ops": 2, "p50_ms": 50.0, "p99_ms": 50.0}
    # all six sorted: 10 30 30 30 50 50; p99 at rank 4.95: 50
    assert alpha["latency"]["all"] == {"ok_ops": 6, "p50_ms": 30.0, "p99_ms": 50.0}

    beta = _row(data, "append", "kill", "beta")
    seeds = {s: f"beta-append-kill-s{s}/20261126T070{s}00.000000" for s in (1, 2, 3)}
    assert beta["runs"] == 3 and beta["run_ids"] == [seeds[1], seeds[2], seeds[3]]
    assert (beta["valid"], beta["invalid"], beta["unknown"]) == (1, 1, 1)
    assert beta["valid_share"] == round(1 / 3, 6)
    assert beta["anomalies"] == {"lost-write": [seeds[1]]}
    assert beta["findings"] == {"stale-read": [seeds[2]]}
    assert beta["unreadable"] == {seeds[3]: "history.jsonl is empty"}
    # the unreadable run's verdict counts, its (absent) facts do not
    assert (beta["ops"], beta["ok_ops"]) == (8, 6)


def test_a_run_directory_is_compared_alone(stored: Path) -> None:
    run = stored / "beta-append-kill-s1" / "20261126T070100.000000"
    (found,) = compare.find_runs([run])
    assert found.run_id == "beta-append-kill-s1/20261126T070100.000000"
    assert (found.valid, found.anomalies) == ("false", ["lost-write"])


def test_latency_quantiles_interpolate_between_ranks() -> None:
    assert compare.quantile([10.0, 20.0, 30.0, 40.0], 0.5) == 25.0
    assert compare.quantile([10.0, 20.0], 0.99) == pytest.approx(19.9)
    assert compare.quantile([7.0], 0.99) == 7.0
    assert compare.quantile([], 0.5) is None


def test_a_fault_never_recovered_from_counts_apart(tmp_path: Path) -> None:
    # the last ok completion is before the kill: neither its start nor its end recover
    history = [op for op in kill_history() if op["time"] < 100 * MS or op["process"] == "nemesis"]
    write_run(tmp_path, "alpha", "append", ["kill"], 1, history=history)
    data = compare.tables(compare.find_runs([tmp_path]))
    row = _row(data, "append", "kill", "alpha")
    assert row["recovery"]["start"] == {"events": 1, "recovered": 0, "p50_ms": None,
                                        "max_ms": None}
    assert row["availability_during_faults"] is None
    assert "1 of 1 never" in compare_report.text(data)


def test_rows_follow_the_matrix_order_and_name_what_was_not_run(tmp_path: Path) -> None:
    calm = [op for op in kill_history() if op["process"] != "nemesis"]
    for nemesis in ("pause", "kill"):
        write_run(tmp_path, "alpha", "kv", [nemesis], 1)
    write_run(tmp_path, "alpha", "kv", [], 1, history=calm)
    not_run = [compare.NotRun("kv", "pause", "beta", "pause: the target cannot pause nodes"),
               compare.NotRun("append", None, "alpha", "target alpha cannot run append")]
    data = compare.tables(compare.find_runs([tmp_path]), targets=["alpha", "beta"],
                          workloads=["append", "kv"], nemeses=["none", "kill", "pause"],
                          not_run=not_run)
    (table,) = data["tables"]  # no table for a workload that no target ran
    assert table["nemeses"] == ["none", "kill", "pause"]
    assert table["targets"] == ["alpha", "beta"]
    assert [(r["nemesis"], r["target"]) for r in table["rows"]] == [
        ("none", "alpha"), ("kill", "alpha"), ("pause", "alpha")]
    assert _row(data, "kv", "none", "alpha")["availability_during_faults"] is None
    text = compare_report.text(data)
    assert "not run: pause: the target cannot pause nodes" in text
    assert "not run: alpha x append: target alpha cannot run append" in text
    assert "no faults" in text


def test_a_run_without_test_json_is_skipped_not_compared(stored: Path) -> None:
    bad = stored / "gamma-append-kill-s1" / "20261126T070100.000000"
    bad.mkdir(parents=True)
    (bad / "test.json").write_text("{not json")
    (bad / "results.json").write_text("{}")
    (bad / "history.jsonl").write_text("")
    data = compare.tables(compare.find_runs([stored]))
    assert [s["run_id"] for s in data["skipped_runs"]] == [
        "gamma-append-kill-s1/20261126T070100.000000"]
    assert "test.json is not valid JSON" in data["skipped_runs"][0]["problem"]
    assert all(r["target"] != "gamma" for r in data["runs"])


def test_text_and_page_show_the_cells_with_links_to_the_runs(stored: Path,
                                                            tmp_path: Path) -> None:
    data = compare.tables(compare.find_runs([stored]), targets=["alpha", "beta"])
    text = compare_report.text(data)
    header = next(line for line in text.splitlines() if "nemesis kill" in line)
    assert header.split()[2:] == ["alpha", "beta"]
    valid_line = next(line for line in text.splitlines() if "valid/invalid/unknown" in line)
    assert valid_line.split()[1:] == ["2/0/0", "1/1/1"]
    assert "lost-write (s1)" in text and "stale-read (s2)" in text
    assert "50.0% of 4 ops" in text and "2.5 ok/s" in text

    out = tmp_path / "out"
    out.mkdir()
    page = compare_report.page(data, out)
    beta1 = next(r for r in data["runs"] if (r["target"], r["seed"]) == ("beta", 1))
    link = os.path.relpath(beta1["path"], out)
    assert f"href='{link}'" in page and (out / link / "test.json").is_file()
    assert "lost-write: <a href=" in page
    assert page.count("<table>") == 1 and "colspan='2'>nemesis kill" in page


def _with_pause(history: list[dict[str, Any]], error: str) -> list[dict[str, Any]]:
    """`history` with a pause started at 150 ms that ended in `error` (a start not done)."""
    pause = [_op(0, 150, "nemesis", "invoke", "start-pause", {"target": "one"}),
             _op(0, 160, "nemesis", "info", "start-pause", {"target": "one"}, error=error)]
    return sorted(history + pause, key=lambda op: op["time"])


def test_each_row_shows_the_faults_requested_and_those_that_took_effect(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "results"
    # seed 1: the kill took effect, the pause had no effect; seed 2: the kill failed too
    write_run(root, "alpha", "append", ["kill", "pause"], 1,
              history=_with_pause(kill_history(), "no-effect"))
    failed_kill = [{**op, "type": "info", "error": "fault-failed"} if op["f"] == "start-kill"
                   and op["type"] == "ok" else op for op in kill_history()]
    write_run(root, "alpha", "append", ["kill", "pause"], 2,
              history=_with_pause(failed_kill, "no-effect"))
    # a run whose history cannot be read counts no start, done or not
    unread = write_run(root, "alpha", "append", ["kill", "pause"], 3)
    (unread / "history.jsonl").write_text("")
    # a row of that run alone, and a row without faults
    unread = write_run(root, "beta", "append", ["kill", "pause"], 1)
    (unread / "history.jsonl").write_text("")
    write_run(root, "alpha", "append", [], 4,
              history=[op for op in kill_history() if op["process"] != "nemesis"])
    out = tmp_path / "cmp"
    assert compare_cli.main(["--runs", str(root), "--results-dir", str(out)]) == 0
    data = json.loads((out / "compare.json").read_text())

    alpha = _row(data, "append", "kill+pause", "alpha")
    assert alpha["faults"] == {"requested": ["kill", "pause"], "took_effect": {
        "kill": {"done": 1, "attempted": 2}, "pause": {"done": 0, "attempted": 2}}}
    runs = {(r["target"], r["seed"]): r["faults"]["took_effect"] for r in data["runs"]}
    assert runs[("alpha", 1)] == {"kill": {"done": 1, "attempted": 1},
                                  "pause": {"done": 0, "attempted": 1}}
    assert runs[("alpha", 3)] is None and runs[("alpha", 4)] == {}
    shown = {(r["nemesis"], r["target"]): compare_report.faults_text(r["faults"])
             for r in data["tables"][0]["rows"]}
    assert shown == {("kill+pause", "alpha"): "kill, pause / kill 1 of 2, pause 0 of 2",
                     ("kill+pause", "beta"): "kill, pause / -", ("none", "alpha"): "none"}

    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if "faults requested / took effect" in x)
    assert "kill, pause / kill 1 of 2, pause 0 of 2" in line and "kill, pause / -" in line
    page = (out / "compare.html").read_text()
    cells = page.split("<td class='m'>faults requested / took effect</td>")[1]
    # nemesis kill+pause (alpha, beta), then none; a fault asked for that never took effect is
    # marked, as a finding is
    assert cells.split("</tr>")[0].split() == " ".join([
        "<td class='find'>kill, pause / kill 1 of 2, pause 0 of 2</td>",
        "<td>kill, pause / -</td>", "<td>none</td>", "<td></td>"]).split()  # beta: no calm run


def test_allure_gets_one_result_per_run_labelled_by_target(stored: Path, tmp_path: Path) -> None:
    data = compare.tables(compare.find_runs([stored]))
    page_path = tmp_path / "compare.html"
    page_path.write_text("<html></html>")
    allure = tmp_path / "allure"
    failed = {r["run_id"] for r in data["runs"] if r["seed"] == 2 and r["target"] == "alpha"}
    assert compare_report.allure_results(data, allure, page_path, failed) == 6
    results = [json.loads(p.read_text()) for p in allure.glob("*-result.json")]
    by_name = {r["name"]: r for r in results}
    assert len(by_name) == 6

    def labels(result: dict[str, Any]) -> dict[str, str]:
        return {label["name"]: label["value"] for label in result["labels"]}

    beta1 = by_name["append under kill on beta (seed 1)"]
    assert labels(beta1)["epic"] == "beta" and labels(beta1)["feature"] == "append"
    assert labels(beta1)["story"] == "kill"
    assert beta1["status"] == "failed"
    assert beta1["statusDetails"]["message"] == "invalid: lost-write"
    assert by_name["append under kill on beta (seed 2)"]["status"] == "passed"  # a finding only
    assert by_name["append under kill on beta (seed 3)"]["status"] == "broken"  # unknown
    assert by_name["append under kill on alpha (seed 2)"]["status"] == "broken"  # failed to run
    attached = {a["name"]: a["source"] for a in beta1["attachments"]}
    stored_results = json.loads((allure / attached["results.json"]).read_text())
    assert stored_results["anomaly_types"] == ["lost-write"]
    assert json.loads((allure / "categories.json").read_text())[0]["name"] == "Lost write"
    comparison = by_name["comparison of the targets"]
    (page_attachment,) = comparison["attachments"]
    assert (allure / page_attachment["source"]).read_text() == "<html></html>"


def test_run_fields_are_the_pipelines_schema() -> None:
    schemas = pytest.importorskip("harness.pipeline.schemas")
    assert list(compare.RUN_FIELDS) == schemas.RUN.fieldNames()


# -- the command -------------------------------------------------------------------------------

def test_compare_stored_runs_writes_the_table_the_page_and_says_where(
        stored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    assert compare_cli.main(["--runs", str(stored), "--results-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads((out / "compare.json").read_text())
    assert _row(data, "append", "kill", "beta")["anomalies"] == {
        "lost-write": ["beta-append-kill-s1/20261126T070100.000000"]}
    assert (out / "compare.html").is_file()
    assert printed.rstrip().endswith(f"page:   {out / 'compare.html'}")
    assert f"kraft analyze {stored}" in printed


def _no_client() -> Client:
    raise AssertionError("nothing may be deployed")


class LackingTarget(Target):
    """A target whose server this machine lacks."""

    name = "lacking"
    ports = {"client": 1}
    clients = {"append": _no_client}

    def db(self) -> DB:
        raise AssertionError("nothing may be deployed")

    def missing(self, backend: str) -> str | None:
        return f"lacking-server not found on PATH ({backend}): apt-get install lacking-server"


class NullDB(DB):
    """Deploys nothing, and can neither kill nor pause (contracts.target's protocols)."""

    def setup(self, backend: Any, nodes: list[str], node_config: dict[str, str]) -> None:
        raise AssertionError("nothing may be deployed")

    teardown = start = stop = collect = setup  # type: ignore[assignment]


class KvOnlyTarget(LackingTarget):
    def db(self) -> DB:
        return NullDB()

    def missing(self, backend: str) -> str | None:
        return None

    def workloads(self) -> list[str]:
        return ["kv"]


@pytest.fixture
def fake_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(targets.TARGETS, "lacking", f"{__name__}:LackingTarget")
    monkeypatch.setitem(targets.TARGETS, "kvonly", f"{__name__}:KvOnlyTarget")


@pytest.mark.parametrize(("argv", "said"), [
    (["--targets", "nope"], "--targets: unknown target 'nope'; one of: reference"),
    (["--targets", "lacking"], "--targets: lacking: lacking-server not found on PATH (local): "
                               "apt-get install lacking-server"),
    (["--targets", "reference", "--seeds", "3-1"], "--seeds: the range 3-1 is empty"),
    (["--targets", "reference", "--seeds", "1-x"], "--seeds: '1-x' is neither a seed"),
    (["--targets", "reference", "--nemesis", "kil"], "--nemesis: unknown fault kil;"),
    (["--targets", "reference", "--workloads", "brokers"], "--workloads: brokers is not compared"),
    (["--targets", "reference", "--workloads", "app"], "--workloads: unknown workload 'app'"),
    (["--targets", "reference", "--node-config", "unsafe=x"],
     "--node-config: expected TARGET:KEY=VALUE with TARGET one of reference, got 'unsafe=x'"),
    (["--targets", "reference", "--node-config", "reference:unsafe=bogus"], "--node-config:"),
    (["--targets", "reference", "--time-limit", "inf"], "--time-limit"),
    (["--targets", "reference", "--jobs", "0"], "--jobs: must be from 1 to 32, got 0"),
    (["--targets", "reference,kvonly", "--workloads", "append"],
     "--targets: kvonly runs none of this matrix"),
    (["--runs", "/nonexistent-h5"], "--runs: results directory /nonexistent-h5 does not exist"),
])
def test_bad_usage_is_one_line_and_64_before_any_run(
        argv: list[str], said: str, tmp_path: Path, fake_targets: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    assert compare_cli.main([*argv, "--results-dir", str(out)]) == 64
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 or "skipping" in err, err
    last = err.splitlines()[-1]
    assert last.startswith("kraft compare: ") and said in last, last
    assert not out.exists(), "something was made before the matrix was checked"


def test_the_matrix_skips_what_a_target_cannot_run_and_says_so(
        tmp_path: Path, fake_targets: None) -> None:
    args = compare_cli.parser().parse_args([
        "--targets", "reference,kvonly", "--workloads", "append,kv", "--nemesis", "kill,none",
        "--seeds", "1-2,5", "--time-limit", "5", "--node-config", "reference:read.mode=leader"])
    said: list[str] = []
    matrix = compare_cli.plan(args, tmp_path, said.append)
    cells = [(p.target, p.workload, p.nemesis, p.seed) for p in matrix.runs]
    assert cells == [("reference", w, n, s) for w in ("append", "kv") for n in ("kill", "none")
                     for s in (1, 2, 5)] + [("kvonly", "kv", "none", s) for s in (1, 2, 5)]
    assert said == ["skipping kvonly x append: target kvonly cannot run append (it runs kv)",
                    "skipping kvonly x kv x kill: kill: the target cannot kill nodes "
                    "(target kvonly, local backend)"]
    first = matrix.runs[0]
    assert first.test_name == "reference-append-kill-s1"
    tail = first.argv[len(compare_cli.KRAFT_TEST):]
    assert tail[tail.index("--node-config") + 1] == "read.mode=leader"
    assert tail[tail.index("--results-dir") + 1] == str(tmp_path)
    assert tail[tail.index("--test-name") + 1] == "reference-append-kill-s1"
    assert matrix.not_run[0] == compare.NotRun("append", None, "kvonly",
                                               "target kvonly cannot run append (it runs kv)")


STAND_IN = r"""
import os, signal, sys, time
from pathlib import Path
results, name, marker = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
run = results / name / "20261126T070000.000000"
def stop(signum, frame):
    run.mkdir(parents=True)
    (run / "interrupted").write_text("SIGINT")
    sys.exit(3)
signal.signal(signal.SIGINT, stop)
marker.write_text(str(os.getpid()))
time.sleep(30)
"""


def test_ctrl_c_stops_the_running_tests_once_and_starts_no_more(tmp_path: Path) -> None:
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN)
    marker = tmp_path / "started"
    cells = [Planned("alpha", "append", "kill", seed, f"alpha-append-kill-s{seed}",
                     [sys.executable, str(script), str(tmp_path), f"alpha-append-kill-s{seed}",
                      str(marker)]) for seed in (1, 2)]

    def interrupt() -> None:
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    said: list[str] = []
    threading.Thread(target=interrupt, daemon=True).start()
    before = signal.getsignal(signal.SIGINT)
    finished, interrupted = compare_cli.execute(cells, tmp_path, 1, said.append)
    assert interrupted
    assert signal.getsignal(signal.SIGINT) is before
    first, second = finished
    assert first.exit_code == 3 and first.interrupted
    assert (first.run_dir / "interrupted").read_text() == "SIGINT"  # type: ignore[operator]
    assert second.exit_code is None  # never started
    assert not any("alpha-append-kill-s2" in line for line in said)


COPY_RUN = r"""
import shutil, sys
from pathlib import Path
source, folder, code = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
if source:
    shutil.copytree(source, folder / Path(source).name)
print("a line of kraft test's output")
sys.exit(code)
"""


def test_a_run_that_failed_to_run_makes_exit_3_and_the_others_are_compared(
        stored: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "copy_run.py"
    script.write_text(COPY_RUN)
    out = tmp_path / "cmp"
    source = stored / "beta-append-kill-s1" / "20261126T070100.000000"
    cells = [Planned("beta", "append", "kill", 1, "beta-append-kill-s1",
                     [sys.executable, str(script), str(source), str(out / "beta-append-kill-s1"),
                      "1"]),
             Planned("alpha", "append", "kill", 1, "alpha-append-kill-s1",
                     [sys.executable, str(script), "", str(out / "alpha-append-kill-s1"), "3"])]

    def plan(args: Any, results_dir: Path, say: Any) -> compare_cli.Plan:
        assert results_dir == out
        return compare_cli.Plan(cells, [], ["alpha", "beta"], ["append"], ["kill"], "local")

    monkeypatch.setattr(compare_cli, "plan", plan)
    assert compare_cli.main(["--results-dir", str(out), "--jobs", "2"]) == 3
    err = capsys.readouterr().err
    log = out / "_logs" / "alpha-append-kill-s1.log"
    assert f"alpha-append-kill-s1 failed to run (exit 3); its output: {log}" in err
    assert log.read_text() == "a line of kraft test's output\n"
    assert "beta-append-kill-s1: INVALID (exit 1" in err
    data = json.loads((out / "compare.json").read_text())
    assert [r["run_id"] for r in data["runs"]] == [
        "beta-append-kill-s1/20261126T070100.000000"]
    assert _row(data, "append", "kill", "beta")["anomalies"] == {
        "lost-write": ["beta-append-kill-s1/20261126T070100.000000"]}
