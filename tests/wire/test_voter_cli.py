"""`kraft quorum add-controller / remove-controller` without a quorum: what the tool reads from the
controller's files, Kafka's output lines (with --dry-run), bad usage (64, one line), and no leader
(1, one line). The changes themselves are tested on real nodes (tests/server/test_voter_rpcs.py,
test_quorum_grow_shrink.py)."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path

import pytest

from reference_node import quorum_cli, voter_admin
from reference_node.wire import WireError

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"
DIRECTORY = uuid.UUID("0123e567-e89b-12d3-a456-426614174000")


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def controller(tmp_path: Path, *, listeners: str = "CONTROLLER://0.0.0.0:9093",
               meta: bool = True, extra: str = "") -> Path:
    """A controller's config (dynamic quorum) and, with `meta`, its formatted meta.properties."""
    data = tmp_path / "data"
    data.mkdir()
    if meta:
        (data / "meta.properties").write_text(
            f"version=1\nnode.id=2\ncluster.id={CLUSTER_ID}\n"
            f"directory.id={voter_admin.kafka_uuid(DIRECTORY)}\n")
    config = tmp_path / "controller.properties"
    config.write_text(f"node.id=2\nprocess.roles=controller\nlisteners={listeners}\n"
                      f"controller.quorum.bootstrap.servers=127.0.0.1:9092\n"
                      f"metadata.log.dir={data}\n{extra}")
    return config


def run(*argv: str) -> int:
    return quorum_cli.main(["--bootstrap-controller", f"127.0.0.1:{dead_port()}",
                            "--timeout", "1", *argv])


def test_add_controller_dry_run_names_the_node_its_directory_and_endpoint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run("add-controller", "--config", str(controller(tmp_path)), "--dry-run")
    assert code == 0
    # Kafka's tool reads a listener without a host as localhost; so does ours for a wildcard.
    assert capsys.readouterr().out.strip() == (
        f"DRY RUN of adding controller 2 with directory id {voter_admin.kafka_uuid(DIRECTORY)} "
        "and endpoints: CONTROLLER://localhost:9093")


def test_remove_controller_dry_run_prints_kafkas_line(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    text = voter_admin.kafka_uuid(DIRECTORY)
    assert run("remove-controller", "--controller-id", "2", "--controller-directory-id", text,
               "--dry-run") == 0
    assert capsys.readouterr().out.strip() == (
        f"DRY RUN of removing  KRaft controller 2 with directory id {text}")


@pytest.mark.parametrize(("case", "says"), [
    ("unformatted", "meta.properties"),
    ("no controller listener", "CONTROLLER"),
    ("missing file", "cannot read --config"),
    ("broker only", "process.roles"),
])
def test_add_controller_refuses_a_config_it_cannot_use(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, says: str) -> None:
    path = {
        "unformatted": lambda: controller(tmp_path, meta=False),
        "no controller listener": lambda: controller(
            tmp_path, listeners="PLAINTEXT://127.0.0.1:9093",
            extra="controller.listener.names=PLAINTEXT,CONTROLLER\n"),
        "missing file": lambda: tmp_path / "none.properties",
        "broker only": lambda: controller(tmp_path, extra="process.roles=broker\n"),
    }[case]()
    assert run("add-controller", "--config", str(path)) == 64
    err = capsys.readouterr().err
    assert err.startswith("kraft quorum: ") and err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize("argv", [
    ["remove-controller", "--controller-id", "-1", "--controller-directory-id",
     "AAAAAAAAAAAAAAAAAAAAAQ"],
    ["remove-controller", "--controller-id", "2", "--controller-directory-id", "not-a-uuid"],
    ["remove-controller", "--controller-id", "2"],
    ["add-controller"],
])
def test_bad_voter_change_usage_exits_64(argv: list[str],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert run(*argv) == 64
    err = capsys.readouterr().err
    assert err.startswith("kraft quorum: ") and err.count("\n") == 1


def test_no_leader_to_ask_exits_1_on_one_line(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert run("add-controller", "--config", str(controller(tmp_path))) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot find the quorum's leader" in err and "refused" in err


def test_voter_admin_without_a_leader_raises_a_quorum_error_nothing_sent() -> None:
    with pytest.raises(voter_admin.QuorumError) as info:
        voter_admin.remove_voter(f"127.0.0.1:{dead_port()}", 2, DIRECTORY, timeout_s=1)
    assert isinstance(info.value, WireError) and info.value.certainly_not_sent


def test_kafka_uuid_text_round_trips_and_refuses_other_text() -> None:
    assert voter_admin.parse_kafka_uuid(voter_admin.kafka_uuid(DIRECTORY)) == DIRECTORY
    for bad in ("", "AAAA", "not a uuid, not at all", "A" * 23, "+/AAAAAAAAAAAAAAAAAAAA"):
        with pytest.raises(ValueError):
            voter_admin.parse_kafka_uuid(bad)
