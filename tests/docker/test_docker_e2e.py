"""`kraft test --backend docker` end to end: the zombie-leader partition, with and without the
node's check-quorum, and a harness killed mid-run.

Each test runs `kraft test` as a subprocess (as a user would), with its results under tmp_path,
and proves its point from the stored run.

Putting the nemesis and the nodes on one clock: the history's `time` is nanoseconds on the
harness's monotonic clock, counted from the start of the workload (not from test.json's
`start_time`, which is taken before the cluster is deployed), and nemesis ops carry no wall
time. The nodes' events.jsonl carry `ts`, Unix milliseconds of the containers' clock, which is the
host's (containers share the kernel's clock). The docker backend writes each partition to
backend.log with a wall-clock stamp (local time of day, milliseconds) just before it installs the
iptables rules, and each heal likewise: those stamps anchor the partition on the nodes' clock. The
anchor precedes the moment the rules take effect, so a delay measured from it errs on the long
side; a tolerance covers scheduling on a loaded machine.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness import images
from harness.backends import docker as docker_backend
from harness.backends.docker import LABEL, OWNER_LABEL
from reference_node.raft.config import RaftConfig

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
Op = dict[str, Any]

# The leader progress (check-quorum) timeout of the node's defaults: 1.5 x the fetch timeout.
CHECK_QUORUM_MS = RaftConfig().check_quorum_timeout_ms
# Clock and scheduling noise (2 shared cores, SSH round trips to install the rules).
TOLERANCE_MS = 1500.0
# Faults every 8 s for 22 s: one partition, from about 8 s to 16 s, well past CHECK_QUORUM_MS.
ZOMBIE_ARGS = ["--nemesis", "partition", "--partition-shapes", "leader", "--time-limit", "22",
               "--nemesis-interval", "8"]
RUN_TIMEOUT = 300.0


# -- running kraft ---------------------------------------------------------------------------

def _env(tmp_path: Path) -> dict[str, str]:
    # KRAFT_LOCAL_DIR: `kraft clean` also sweeps the local backend; keep it off other runs.
    return {**os.environ, "PYTHONUNBUFFERED": "1", "KRAFT_LOCAL_DIR": str(tmp_path / "local")}


def _kraft(*args: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", *args]


def _kraft_test(tmp_path: Path, results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _kraft("test", "--backend", "docker", "--results-dir", str(results), *args),
        cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=RUN_TIMEOUT)


def _latest(results: Path) -> Path:
    return (results / "latest").resolve()


def _history(run: Path) -> list[Op]:
    return [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()
            if line.strip()]


def _states(run: Path, node: str) -> list[Op]:
    events = run / "nodes" / node / "events.jsonl"
    assert events.exists(), f"no events.jsonl collected for {node} in {run}"
    return [e for e in map(json.loads, events.read_text().splitlines()) if e["type"] == "state"]


# -- the partition on the nodes' clock -------------------------------------------------------

STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) (.*)$")


def _backend_log(run: Path) -> list[tuple[float, str]]:
    """backend.log as (Unix ms, message): its stamps are local times of day, on the day of
    test.json's start_time (local, naive), or the next day for a run that passes midnight."""
    start = dt.datetime.fromisoformat(json.loads((run / "test.json").read_text())["start_time"])
    lines = []
    for line in (run / "backend.log").read_text().splitlines():
        match = STAMP.match(line)
        if match is None:
            continue  # a continuation line (a multi-line message)
        h, m, s, ms = (int(g) for g in match.groups()[:4])
        when = dt.datetime.combine(start.date(), dt.time(h, m, s, ms * 1000))
        if when < start - dt.timedelta(minutes=1):
            when += dt.timedelta(days=1)
        lines.append((when.timestamp() * 1000, match.group(5)))
    return lines


def _partition_window(run: Path, cut: list[list[str]]) -> tuple[float, float]:
    """(Unix ms) when the backend began to install `cut`, and when it began the next heal."""
    log = _backend_log(run)
    wanted = f"partition: cut {sorted((a, b) for a, b in cut)}"
    starts = [i for i, (_, message) in enumerate(log) if message == wanted]
    assert starts, f"backend.log of {run} never logs {wanted!r}"
    began = log[starts[0]][0]
    heals = [when for when, message in log[starts[0]:] if message == "heal"]
    assert heals, f"backend.log of {run} never logs the heal after the partition"
    return began, heals[0]


def _window_ops(history: list[Op]) -> tuple[Op, float, float]:
    """The first start-partition (ok) and the history times of its window: from its ok to the
    invoke of the stop that follows it."""
    nemesis = [op for op in history if op["process"] == "nemesis"]
    starts = [op for op in nemesis if op["f"] == "start-partition" and op["type"] == "ok"]
    assert starts, f"no partition was made: {nemesis}"
    start = starts[0]
    stops = [op for op in nemesis if op["f"] == "stop-partition" and op["type"] == "invoke"
             and op["index"] > start["index"]]
    assert stops, f"the partition was never stopped: {nemesis}"
    return start, float(start["time"]), float(stops[0]["time"])


# -- 1. the zombie leader resigns, the majority goes on -----------------------------------------

def test_an_isolated_leader_resigns_and_the_majority_elects_and_serves(
        node_image: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = _kraft_test(tmp_path, results, *ZOMBIE_ARGS, "--seed", "11",
                       "--test-name", "zombie-leader")
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    run = _latest(results)
    assert "verdict: VALID" in done.stdout
    assert json.loads((run / "results.json").read_text())["valid"] is True

    history = _history(run)
    start_op, window_from, window_to = _window_ops(history)
    choice = start_op["value"]
    old = choice["isolated"]
    assert choice["leader"] == old, f"the partition did not cut off the leader: {choice}"
    others = [n for n in json.loads((run / "test.json").read_text())["nodes"] if n != old]
    assert sorted(map(tuple, choice["cut"])) == sorted(
        [(old, o) for o in others] + [(o, old) for o in others])
    cut_at, healed_at = _partition_window(run, choice["cut"])
    # the anchor read right: it puts the workload's start (history time 0) after test.json's
    # start_time (taken before the deploy) and not long after it
    started = dt.datetime.fromisoformat(json.loads((run / "test.json").read_text())["start_time"])
    zero = cut_at - window_from / 1e6
    assert 0 <= zero - started.timestamp() * 1000 < RUN_TIMEOUT * 1000, (zero, started)

    # the isolated node led when it was cut off, and left leadership within the timeout
    states = _states(run, old)
    before = [e for e in states if e["ts"] <= cut_at]
    assert before and before[-1]["state"] == "leader", \
        f"{old} was not leader when cut off at {cut_at}: {before[-3:]}"
    old_epoch = before[-1]["epoch"]
    left = next((e for e in states if e["ts"] > cut_at and e["state"] != "leader"), None)
    assert left is not None, f"{old} never left leadership after the partition: {states[-5:]}"
    delay = left["ts"] - cut_at
    assert delay <= CHECK_QUORUM_MS + TOLERANCE_MS, \
        f"{old} resigned {delay:.0f} ms after it was cut off (timeout {CHECK_QUORUM_MS} ms)"
    assert left["state"] == "resigned", left  # check-quorum, not a higher epoch it could not see
    assert left["ts"] < healed_at

    # a new leader among the others, in a later epoch, while the partition was on
    elected = sorted((e["ts"], node, e["epoch"]) for node in others for e in _states(run, node)
                     if e["state"] == "leader" and e["epoch"] > old_epoch
                     and cut_at < e["ts"] < healed_at)
    assert elected, f"no new leader among {others} during the partition"
    new = elected[0][1]

    # clients appended on the new leader while the partition was on: invoked and acknowledged
    # inside the window
    invoked: dict[Any, Op] = {}
    on_new = []
    for op in history:
        if op["process"] == "nemesis":
            continue
        if op["type"] == "invoke":
            invoked[op["process"]] = op
        elif (op["type"] == "ok" and op["f"] == "append" and op.get("node") == new
              and invoked[op["process"]]["time"] >= window_from and op["time"] <= window_to):
            on_new.append(op)
    assert on_new, f"no ok append on the new leader {new} during the partition"
    print(f"{old} cut off, resigned after {delay:.0f} ms; {new} elected after "
          f"{elected[0][0] - cut_at:.0f} ms; {len(on_new)} ok appends on {new} in the window")


# -- 2. without check-quorum, the zombie serves stale reads --------------------------------------

@pytest.mark.timeout(3 * RUN_TIMEOUT + 60)
def test_without_check_quorum_the_zombie_leader_serves_stale_reads(
        node_image: str, tmp_path: Path) -> None:
    tries = []
    for seed in (1, 2, 3):
        results = tmp_path / f"results-{seed}"
        # A faster rate: enough reads on the zombie and appends on the new leader in the window.
        done = _kraft_test(tmp_path, results, *ZOMBIE_ARGS, "--rate", "20", "--seed", str(seed),
                           "--node-config", "unsafe=no-check-quorum",
                           "--node-config", "read.mode=leader", "--test-name", "zombie-stale")
        report = json.loads((_latest(results) / "results.json").read_text())
        tries.append((seed, done.returncode, report.get("anomaly_types")))
        if done.returncode == 1 and "stale-read" in report.get("anomalies", {}):
            assert report["valid"] is False
            assert "stale-read" in done.stdout and "verdict: INVALID" in done.stdout, done.stdout
            return
    pytest.fail(f"no stale read found in {len(tries)} runs (seed, exit, anomalies): {tries}\n"
                f"last run's output:\n{done.stdout}\n{done.stderr[-3000:]}")


# -- 3. a killed harness leaves nothing that `kraft clean` does not remove ---------------------

def _labelled(client: Any) -> list[Any]:
    return [*client.containers.list(all=True, filters={"label": f"{LABEL}=1"}),
            *client.networks.list(filters={"label": f"{LABEL}=1"})]


def _labels(thing: Any) -> dict[str, str]:
    labels = thing.labels if hasattr(thing, "exec_run") else thing.attrs.get("Labels")
    return dict(labels or {})


def _owned_by(client: Any, pid: int) -> list[str]:
    prefix = f"{socket.gethostname()}:{pid}:"
    return [str(t.name) for t in _labelled(client)
            if _labels(t).get(OWNER_LABEL, "").startswith(prefix)]


def _live_others(client: Any, pid: int) -> list[str]:
    """What other harnesses, still alive (or on other hosts), have up: `kraft clean` would
    remove it too."""
    prefix = f"{socket.gethostname()}:{pid}:"
    return [str(t.name) for t in _labelled(client)
            if not _labels(t).get(OWNER_LABEL, "").startswith(prefix)
            and not docker_backend._orphaned(_labels(t).get(OWNER_LABEL, ""))]


@pytest.fixture
def engine(node_image: str) -> Any:
    client = images.docker_client()
    others = _live_others(client, -1)
    if others:
        client.close()
        pytest.skip(f"other runs are up on this engine ({', '.join(others[:3])}...): "
                    "`kraft clean` would remove them too")
    yield client
    client.close()


class Harness:
    """`kraft test --backend docker` in the background, its output collected as it comes."""

    def __init__(self, tmp_path: Path) -> None:
        self.proc = subprocess.Popen(
            _kraft("test", "--backend", "docker", "--results-dir", str(tmp_path / "results"),
                   "--nodes", "3", "--nemesis", "partition,pause", "--time-limit", "120",
                   "--test-name", "killed"),
            cwd=ROOT, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True)
        self.lines: list[str] = []
        self.running = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if "[kraft] phase: run" in line:
                self.running.set()

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_running(self, timeout: float = 240.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.running.wait(0.5):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the run never reached its workload:\n{self.output}")
        time.sleep(3)  # clients and faults at work

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(10)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _clean(tmp_path: Path, client: Any, pid: int) -> str:
    """`kraft clean`, unless another live run came up meanwhile (then only ours is swept)."""
    others = _live_others(client, pid)
    if others:
        docker_backend._sweep(client, only_orphans=True)
        pytest.skip(f"another run came up on this engine ({', '.join(others[:3])}...): "
                    "`kraft clean` would remove it too")
    done = subprocess.run(_kraft("clean"), cwd=ROOT, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_sigkill_of_the_harness_then_kraft_clean_leaves_nothing_labelled(
        engine: Any, tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    try:
        harness.wait_running()
        up = _owned_by(engine, harness.proc.pid)
        assert len(up) == 4, up  # three containers and their network
        harness.proc.send_signal(signal.SIGKILL)
        assert harness.wait(30) == -signal.SIGKILL
        # no cleanup could run: what stays behind is the orphans `kraft clean` is for
        left = _owned_by(engine, harness.proc.pid)
        assert sorted(left) == sorted(up)
        out = _clean(tmp_path, engine, harness.proc.pid)
        for name in left:
            assert name in out, out
    finally:
        harness.stop()
        with contextlib.suppress(Exception):
            docker_backend._sweep(engine, only_orphans=True)
    assert _labelled(engine) == []


def test_sigint_of_the_harness_cleans_up_itself_and_exits_3(engine: Any, tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    try:
        harness.wait_running()
        assert len(_owned_by(engine, harness.proc.pid)) == 4
        harness.proc.send_signal(signal.SIGINT)
        code = harness.wait(180)
        assert code == 3, harness.output
        assert "interrupted" in harness.output
        assert _owned_by(engine, harness.proc.pid) == []  # before any `kraft clean`
        # what it stored: the history so far and every node's files
        run = _latest(tmp_path / "results")
        assert json.loads((run / "results.json").read_text())["valid"] == "unknown"
        assert all((run / "nodes" / n / "events.jsonl").exists() for n in ("n1", "n2", "n3"))
        out = _clean(tmp_path, engine, harness.proc.pid)
        assert "kraft-jepsen-killed-" not in out, out
    finally:
        harness.stop()
        with contextlib.suppress(Exception):
            docker_backend._sweep(engine, only_orphans=True)
    assert _labelled(engine) == []
