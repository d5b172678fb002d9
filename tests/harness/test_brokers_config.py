"""`kraft test --brokers N`: the configuration, test.json, the refusals, the brokers' properties."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.commands import test as test_cli
from harness.config import TestConfig
from harness.targets.reference import ReferenceTarget, properties
from reference_node.properties import parse

HERE = Path(__file__).parent


def test_brokers_are_named_after_the_controllers_and_the_spares() -> None:
    config = TestConfig(brokers=2)
    assert config.broker_nodes() == ["n4", "n5"]
    assert config.all_nodes() == ["n1", "n2", "n3", "n4", "n5"]
    with_spares = TestConfig(nemesis=["membership"], nemesis_options={"spares": 2}, brokers=1)
    assert with_spares.all_nodes() == ["n1", "n2", "n3", "n4", "n5", "n6"]
    assert with_spares.broker_nodes() == ["n6"]
    assert TestConfig().broker_nodes() == []


def test_the_brokers_get_clients_of_their_own() -> None:
    assert TestConfig(brokers=2).concurrency == 10
    assert TestConfig().concurrency == 6


def test_test_json_records_the_brokers_and_the_fencing_timings() -> None:
    data = TestConfig(brokers=2).to_json()
    assert data["brokers"] == ["n4", "n5"]
    assert data["fencing"] == {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500,
                               "broker_timeout_ms": 4500}
    plain = TestConfig().to_json()
    assert plain["brokers"] == [] and "fencing" not in plain


def test_every_node_gets_the_fencing_settings_and_node_config_wins() -> None:
    config = TestConfig(brokers=1, node_config={"broker.heartbeat.timeout.ms": "6000",
                                                "unsafe": "no-self-fence"})
    settings = config.node_settings()
    assert settings == {"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500",
                        "broker.heartbeat.timeout.ms": "6000", "unsafe": "no-self-fence"}
    assert config.to_json()["fencing"]["broker_timeout_ms"] == 6000
    assert TestConfig(node_config={"a": "b"}).node_settings() == {"a": "b"}


@pytest.mark.parametrize("argv", [
    ["--brokers", "9"],
    ["--brokers", "-1"],
    ["--brokers", "two"],
    ["--workload", "brokers"],
    ["--partition-shapes", "broker"],
    ["--nemesis", "stale-incarnation"],
    ["--brokers", "2", "--nemesis", "membership"],
    ["--brokers", "2", "--node-config", "broker.session.timeout.ms=5000"],
    ["--brokers", "2", "--node-config", "broker.session.timeout.ms=soon"],
])
def test_bad_broker_combinations_are_one_line_and_exit_64(
        argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert test_cli.main([*argv, "--results-dir", str(tmp_path / "results")]) == 64
    err = capsys.readouterr().err.strip()
    assert err.startswith("kraft test: ") and "\n" not in err
    assert not (tmp_path / "results").exists()  # refused before anything was made


def test_a_target_without_brokers_is_refused_before_deploying(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.setattr(sys, "path", [str(HERE), *sys.path])
    assert test_cli.main(["--target", "toy_target:ToyTarget", "--brokers", "2",
                          "--results-dir", str(tmp_path / "results")]) == 64
    err = capsys.readouterr().err.strip()
    assert err == "kraft test: --brokers: target toy_target:ToyTarget has no broker nodes"


def test_the_reference_target_runs_the_brokers_workload_and_takes_the_fencing_keys() -> None:
    target = ReferenceTarget()
    assert "brokers" in target.workloads()
    assert target.check_node_config(TestConfig(brokers=2).node_settings()) is None
    assert target.check_node_config({"advertised.listeners": "CONTROLLER://h:1"}) is not None


class Hosts:
    """Addresses as the local backend gives them: a proxy port per (src, dst)."""

    name = "fake"

    def node_dir(self, node: str) -> str:
        return f"/nodes/{node}"

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return ("127.0.0.1", 9000 + int(node[1:]) * 10 + (port == "metrics"))

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return ("127.0.0.1", 20000 + int(src[1:]) * 100 + int(dst[1:]))

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return ("10.0.0." + node[1:], self.bind_address(node, port)[1])


NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_a_broker_is_deployed_as_an_observer_of_the_controllers_alone() -> None:
    broker = parse(properties(Hosts(), NODES, "n4", {}, None,  # type: ignore[arg-type]
                              brokers=["n4", "n5"]))
    assert broker["node.id"] == "4" and broker["process.roles"] == "broker"
    assert broker["controller.quorum.voters"] == ",".join(
        f"{k}@127.0.0.1:{20000 + 400 + k}" for k in (1, 2, 3))
    assert broker["advertised.listeners"] == "CONTROLLER://10.0.0.4:9040"
    assert [v.partition("@")[0] for v in broker["client.voters"].split(",")] == ["1", "2", "3"]
    controller = parse(properties(Hosts(), NODES, "n2", {}, None,  # type: ignore[arg-type]
                                  brokers=["n4", "n5"]))
    assert controller["process.roles"] == "controller" and "advertised.listeners" not in controller
    assert controller["controller.quorum.voters"].count("@") == 3
