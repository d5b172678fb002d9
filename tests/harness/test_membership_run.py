"""The membership nemesis's deployment and a real run of it (KIP-853).

Fast: what a membership run deploys (spares named on from the voters, directory ids drawn from
the seed, the dynamic quorum's keys and format flags, the voter endpoints in the log) and what
`kraft test` refuses. Slow: a short `kraft test --nemesis membership` on the local backend is VALID
with voter changes committed, DescribeQuorum at the end agreeing with the log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.commands.test import EXIT_USAGE, main
from harness.config import TestConfig
from harness.targets.reference import (
    DYNAMIC_KEYS,
    ROUTES,
    ReferenceDB,
    ReferenceTarget,
    initial_controllers,
    properties,
    read_directory_id,
    voter_endpoint,
)
from reference_node.properties import parse
from reference_node.voter_admin import kafka_uuid, parse_kafka_uuid

ROOT = Path(__file__).resolve().parents[2]


class Docker:
    """Addresses as the docker backend gives them: one per node, whoever dials."""

    name = "docker"

    def node_dir(self, node: str) -> str:
        return f"/var/lib/kraft-jepsen/{node}"

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return ("0.0.0.0", 9093)

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return (dst, 9093)

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return (f"172.18.0.{int(node[1:]) + 1}", 9093)


class Local(Docker):
    """Addresses as the local backend gives them: a proxy port per (src, dst)."""

    name = "local"

    def bind_address(self, node: str, port: str) -> tuple[str, int]:
        return ("127.0.0.1", 9000 + int(node[1:]))

    def peer_address(self, src: str, dst: str, port: str) -> tuple[str, int]:
        return ("127.0.0.1", 10000 + 100 * int(src[1:]) + int(dst[1:]))

    def client_address(self, node: str, port: str) -> tuple[str, int]:
        return self.bind_address(node, port)


NODES = ["n1", "n2", "n3", "n4", "n5"]


def test_spares_are_named_on_from_the_voters_only_with_the_membership_nemesis() -> None:
    config = TestConfig(nodes=list(NODES), nemesis=["membership", "kill"], seed=7)
    assert config.spare_nodes() == ["n6", "n7"]
    assert config.all_nodes() == [*NODES, "n6", "n7"]
    assert TestConfig(nodes=["n1", "n6"], nemesis=["membership"],
                      nemesis_options={"spares": 2}).spare_nodes() == ["n3", "n4"]
    plain = TestConfig(nodes=list(NODES), nemesis=["partition"])
    assert plain.spare_nodes() == [] and plain.all_nodes() == NODES
    assert "membership" not in plain.to_json()


def test_directory_ids_are_drawn_from_the_seed_in_kafkas_form() -> None:
    ids = TestConfig(nodes=list(NODES), nemesis=["membership"], seed=7).directory_ids()
    assert list(ids) == NODES and len(set(ids.values())) == 5
    assert ids == TestConfig(nodes=list(NODES), nemesis=["membership"], seed=7).directory_ids()
    assert ids != TestConfig(nodes=list(NODES), nemesis=["membership"], seed=8).directory_ids()
    for text in ids.values():
        assert len(text) == 22 and not text.startswith("-")
        assert kafka_uuid(parse_kafka_uuid(text)) == text
    recorded = TestConfig(nodes=list(NODES), nemesis=["membership"], seed=7).to_json()
    assert recorded["membership"] == {"spares": ["n6", "n7"], "directory_ids": ids}


def test_a_dynamic_quorum_names_bootstrap_servers_never_static_voters() -> None:
    backend = Local()
    nodes = [*NODES, "n6", "n7"]
    spare = parse(properties(backend, nodes, "n6", {}, spares=["n6", "n7"]))  # type: ignore[arg-type]
    voter = parse(properties(backend, nodes, "n2", {}, spares=["n6", "n7"]))  # type: ignore[arg-type]
    for settings in (spare, voter):
        assert "controller.quorum.voters" not in settings
        assert settings["client.voters"].count("@") == 7
    # each dials the initial voters through its own proxies, and leaves itself out
    assert spare["controller.quorum.bootstrap.servers"] == ",".join(
        f"127.0.0.1:{10600 + i}" for i in range(1, 6))
    assert voter["controller.quorum.bootstrap.servers"] == ",".join(
        f"127.0.0.1:{10200 + i}" for i in (1, 3, 4, 5))
    static = parse(properties(backend, NODES, "n2", {}))  # type: ignore[arg-type]
    assert "controller.quorum.bootstrap.servers" not in static
    assert static["controller.quorum.voters"].count("@") == 5


def test_where_the_node_takes_its_own_routes_every_link_goes_through_the_proxies(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import reference_node.config

    nodes = [*NODES, "n6", "n7"]
    keys = dict(reference_node.config.KEYS)
    keys.pop(ROUTES, None)
    monkeypatch.setattr(reference_node.config, "KEYS", keys)
    assert ROUTES not in parse(properties(Local(), nodes, "n6", {}, spares=["n6", "n7"]))  # type: ignore[arg-type]
    monkeypatch.setitem(keys, ROUTES, ("routes", str))
    settings = parse(properties(Local(), nodes, "n6", {}, spares=["n6", "n7"]))  # type: ignore[arg-type]
    assert settings[ROUTES] == ",".join(f"{i}@127.0.0.1:{10600 + i}" for i in (1, 2, 3, 4, 5, 7))
    # a static quorum has its routes in controller.quorum.voters already
    assert ROUTES not in parse(properties(Local(), NODES, "n2", {}))  # type: ignore[arg-type]


def test_the_voter_endpoint_is_the_shared_address_else_the_nodes_own() -> None:
    assert voter_endpoint(Docker(), NODES, "n3") == ("n3", 9093)  # type: ignore[arg-type]
    assert voter_endpoint(Local(), NODES, "n3") == ("127.0.0.1", 9003)  # type: ignore[arg-type]
    ids = {n: f"id{n}" for n in NODES[:3]}
    assert initial_controllers(Docker(), NODES, NODES[:3], ids) == (  # type: ignore[arg-type]
        "1@n1:9093:idn1,2@n2:9093:idn2,3@n3:9093:idn3")


def test_format_flags_of_a_membership_deployment() -> None:
    db = ReferenceDB()
    backend = Docker()
    assert db._voters_in_log(backend, NODES, "n1") == []  # type: ignore[arg-type]
    db.use_spares(["n4", "n5"], {"n1": "a", "n2": "b", "n3": "c"})
    assert db._voters_in_log(backend, NODES, "n4") == ["--no-initial-controllers"]  # type: ignore[arg-type]
    assert db._voters_in_log(backend, NODES, "n2") == [  # type: ignore[arg-type]
        "--initial-controllers", "1@n1:9093:a,2@n2:9093:b,3@n3:9093:c"]


def test_the_directory_id_is_read_back_from_meta_properties() -> None:
    meta = "#\n#Tue\ncluster.id=abc\ndirectory.id=J8aAPcfLQt2bqs1JT_rMgQ\nnode.id=6\nversion=1\n"
    assert read_directory_id(meta) == "J8aAPcfLQt2bqs1JT_rMgQ"
    assert read_directory_id("node.id=6\n") is None


def test_the_harness_keys_of_a_dynamic_quorum_are_refused_as_node_config() -> None:
    target = ReferenceTarget()
    for key in DYNAMIC_KEYS:
        assert key in str(target.check_node_config({key: "x"}))


@pytest.mark.parametrize("argv", [["--spares", "-1"], ["--spares", "9"]])
def test_a_bad_spare_count_is_refused(argv: list[str], tmp_path: Path) -> None:
    assert main([*argv, "--results-dir", str(tmp_path)]) == EXIT_USAGE


@pytest.mark.slow
def test_a_local_membership_run_is_valid_and_commits_voter_changes(tmp_path: Path) -> None:
    results = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "test", "--backend", "local", "--nodes", "3",
         "--nemesis", "membership", "--nemesis-interval", "2", "--time-limit", "12",
         "--seed", "3", "--results-dir", str(results)],
        cwd=ROOT, capture_output=True, text=True, timeout=400,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "KRAFT_LOCAL_DIR": str(tmp_path / "local")})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert "verdict: VALID" in done.stdout
    run = (results / "latest").resolve()
    test = json.loads((run / "test.json").read_text())
    assert test["membership"]["spares"] == ["n4", "n5"]
    assert set(test["membership"]["directory_ids"]) == {"n1", "n2", "n3", "n4", "n5"}
    final = test["membership"]["final_quorum"]
    assert final is not None and len(final["voters"]) >= 2
    checked = json.loads((run / "results.json").read_text())["checkers"]["membership"]
    assert checked["valid"] is True and checked["committed"] >= 1, checked
    assert checked["final_voters"] == sorted(final["voters"])
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    changes = [op for op in history if op["f"] == "start-membership" and op["type"] == "ok"]
    assert any(op["value"]["result"] == "ok" for op in changes)
    assert "membership:" in done.stdout and "voter change(s) committed" in done.stdout
    # every node, spares too, was deployed and collected
    assert sorted(p.name for p in (run / "nodes").iterdir()) == ["n1", "n2", "n3", "n4", "n5"]
