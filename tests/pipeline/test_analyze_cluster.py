"""Acceptance: the same analysis through a Spark standalone cluster (a master and a worker on
localhost, started here from the installed PySpark) gives the same tables as local mode."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pipeline_cli import CliRun, run_analyze

from testkit import synthetic

pytestmark = [pytest.mark.spark, pytest.mark.slow]
TABLES = ("runs", "summary", "latency", "anomalies", "availability", "recovery")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def wait_for_worker(ui_port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
                if json.load(r).get("aliveworkers", 0) >= 1:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise TimeoutError("the standalone worker did not register with the master")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, local_analysis: CliRun) -> Iterator[str]:
    work = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_WORKER_DIR": str(work / "worker"), "SPARK_LOCAL_DIRS": str(work / "tmp")}
    port, ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs = []
    with open(work / "cluster.log", "w") as log:
        procs.append(subprocess.Popen(
            [str(spark_class()), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(port), "--webui-port", str(ui)],
            env=env, stdout=log, stderr=log, start_new_session=True))
        procs.append(subprocess.Popen(
            [str(spark_class()), "org.apache.spark.deploy.worker.Worker", url, "--host",
             "127.0.0.1", "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui)],
            env=env, stdout=log, stderr=log, start_new_session=True))
    try:
        wait_for_worker(ui, time.monotonic() + 120)
        yield url
    finally:
        for proc in reversed(procs):  # each in a session of its own: its executors go with it
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)


def test_cluster_gives_the_same_tables(cluster: str, local_analysis: CliRun,
                                       campaign: synthetic.Generated,
                                       tmp_path: Path) -> None:
    assert local_analysis.code == 0
    remote = run_analyze(local_analysis.results, tmp_path / "out", "--master", cluster)
    assert remote.code == 0, remote.stderr
    assert (remote.out / "kraft-code.zip").exists()  # the code went to the executors
    for name in TABLES:
        want = pd.read_csv(local_analysis.out / f"{name}.csv")
        got = pd.read_csv(remote.out / f"{name}.csv")
        pd.testing.assert_frame_equal(got, want, check_exact=False, atol=2e-6, rtol=0,
                                      obj=name)
