"""The campaign plugin: options, the matrix, and what each run tells Allure.

Each test is one run of the harness (`kraft test`), parametrized over workload x nemesis (x the
target given with --target). Options narrow the matrix (--nemesis, --workload) or change every run
(--backend, --nodes, --time-limit, --seed, --node-config, --min-availability). At the end of the
session the Allure results directory gets `categories.json` and `environment.properties`.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from matrix import CASES, Case

from reference_node import properties

REPO = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kraft", "KRaft campaign")
    group.addoption("--backend", default="local", help="local, docker or auto (default local)")
    group.addoption("--target", default="reference", help="the implementation under test")
    group.addoption("--nodes", type=int, default=3)
    group.addoption("--time-limit", type=int, default=None,
                    help="seconds of workload per run (default: 15 with -m smoke, else 60)")
    group.addoption("--seed", type=int, default=1, help="seed of the first run; each case adds its index")
    group.addoption("--nemesis-interval", type=float, default=None,
                    help="seconds between faults and each fault's length (default: the harness's)")
    group.addoption("--rate", type=float, default=None, help="operations per second (default: the harness's)")
    group.addoption("--nemesis", default=None, help="only cases whose nemesis is in this comma list")
    group.addoption("--workload", default=None, help="only cases of these workloads (comma list)")
    group.addoption("--node-config", action="append", default=[], metavar="KEY=VALUE",
                    help="passed to every node of every run (e.g. unsafe=no-check-quorum)")
    group.addoption("--min-availability", default=None, metavar="FLOORS",
                    help="availability floors of every run, as kraft test's (e.g. 0.5,kill=0.2): "
                         "a run below one is invalid, so a liveness regression fails its case")
    group.addoption("--kraft-results-dir", default=str(REPO / "results"),
                    help="where runs are stored (default: results/)")


def _selected(config: pytest.Config) -> list[tuple[int, Case]]:
    nemeses = config.getoption("--nemesis")
    workloads = config.getoption("--workload")
    keep = []
    for index, case in enumerate(CASES):
        if nemeses and case.nemesis not in nemeses.split(","):
            continue
        if workloads and case.workload not in workloads.split(","):
            continue
        keep.append((index, case))
    return keep


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    params = [
        pytest.param(case, index, id=case.id, marks=[getattr(pytest.mark, m) for m in case.marks])
        for index, case in _selected(metafunc.config)
    ]
    metafunc.parametrize(("case", "case_index"), params)


@pytest.fixture
def campaign_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    config = request.config
    time_limit = config.getoption("--time-limit")
    if time_limit is None:
        markexpr = config.getoption("-m") or ""
        time_limit = 15 if "smoke" in markexpr else 60
    node_config = []
    for item in config.getoption("--node-config"):
        key, sep, value = item.partition("=")
        if not sep:
            raise pytest.UsageError(f"--node-config {item!r}: expected KEY=VALUE")
        node_config.append((key, value))
    return {
        "backend": config.getoption("--backend"),
        "target": config.getoption("--target"),
        "nodes": config.getoption("--nodes"),
        "time_limit": time_limit,
        "seed": config.getoption("--seed"),
        "nemesis_interval": config.getoption("--nemesis-interval"),
        "rate": config.getoption("--rate"),
        "node_config": node_config,
        "min_availability": config.getoption("--min-availability"),
        "results_dir": Path(config.getoption("--kraft-results-dir")),
    }


def _versions() -> dict[str, str]:
    versions = {"python": platform.python_version(), "platform": platform.platform()}
    for package in ("kraft-jepsen", "kio", "docker", "paramiko", "allure-pytest"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "not installed"
    try:
        out = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                             capture_output=True, text=True, timeout=10)
        versions["docker-engine"] = out.stdout.strip() or "unavailable"
    except (OSError, subprocess.SubprocessError):
        versions["docker-engine"] = "unavailable"
    return versions


def pytest_sessionfinish(session: pytest.Session) -> None:
    alluredir = getattr(session.config.option, "allure_report_dir", None)
    if not alluredir:
        return
    out = Path(alluredir)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__).parent / "categories.json", out / "categories.json")
    env = _versions()
    env["backend"] = session.config.getoption("--backend")
    env["target"] = session.config.getoption("--target")
    env["nodes"] = str(session.config.getoption("--nodes"))
    text = properties.render({key: str(value) for key, value in sorted(env.items())})
    (out / "environment.properties").write_text(text)
