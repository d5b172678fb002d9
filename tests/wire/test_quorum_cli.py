"""`kraft quorum describe`: Kafka's output layout, leader following, errors and exit codes."""

from __future__ import annotations

import socket

import pytest
from kio.schema.errors import ErrorCode

from reference_node import quorum_cli

from .fake_server import CLUSTER_ID, FakeServer, describe_quorum_response


def test_status_output(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer() as server:
        code = quorum_cli.main(["--bootstrap-controller", f"127.0.0.1:{server.port}",
                                "describe", "--status"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines() == [
        f"ClusterId:              {CLUSTER_ID}",
        "LeaderId:               1",
        "LeaderEpoch:            5",
        "HighWatermark:          10",
        "MaxFollowerLag:         2",
        "MaxFollowerLagTimeMs:   2",
        # Kafka's KIP-853 layout: a static voter's directory is unknown (null).
        'CurrentVoters:          [{"id": 1, "directoryId": null}, {"id": 2, "directoryId": null}, '
        '{"id": 3, "directoryId": null}]',
        "CurrentObservers:       []",
    ]


def test_replication_table(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer() as server:
        code = quorum_cli.main(["--bootstrap-controller", f"127.0.0.1:{server.port}",
                                "describe", "--replication"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split("\t")[:-1] == [
        "NodeId", "DirectoryId           ", "LogEndOffset", "Lag", "LastFetchTimestamp",
        "LastCaughtUpTimestamp", "Status  "]
    rows = [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines[1:]]
    assert rows == [
        ["1", "AAAAAAAAAAAAAAAAAAAAAA", "10", "0", "-1", "1700000000000", "Leader"],
        ["2", "AAAAAAAAAAAAAAAAAAAAAA", "8", "2", "1700000000000", "1699999999998", "Follower"],
        ["3", "AAAAAAAAAAAAAAAAAAAAAA", "10", "0", "1700000000000", "1700000000000", "Follower"],
    ]


def test_follows_the_leader_named_in_the_response(capsys: pytest.CaptureFixture[str]) -> None:
    with FakeServer(node_id=2) as follower, FakeServer(node_id=1) as leader:
        follower.describe_quorum = lambda v: describe_quorum_response(
            v, error=ErrorCode.not_leader_or_follower,
            nodes=((1, "127.0.0.1", leader.port),))
        code = quorum_cli.main(["--bootstrap-controller", f"127.0.0.1:{follower.port}",
                                "describe", "--status"])
        assert code == 0
        assert [r.api_key for r in leader.requests].count(55) == 1
    assert "LeaderId:               1" in capsys.readouterr().out


def test_tries_the_next_bootstrap_server(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with FakeServer() as server:
        code = quorum_cli.main(["--bootstrap-controller",
                                f"127.0.0.1:{dead},127.0.0.1:{server.port}",
                                "describe", "--status"])
    assert code == 0


def test_connection_refused_names_the_address(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    code = quorum_cli.main(["--bootstrap-controller", f"127.0.0.1:{dead}", "describe",
                            "--status"])
    err = capsys.readouterr().err
    assert code == 1
    assert f"127.0.0.1:{dead} refused" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv", [
    [],
    ["describe", "--status"],
    ["--bootstrap-controller", "nohost", "describe", "--status"],
    ["--bootstrap-controller", "h:1", "describe"],
    ["--bootstrap-controller", "h:1", "describe", "--status", "--replication"],
])
def test_bad_usage_exits_64(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert quorum_cli.main(argv) == 64
    assert capsys.readouterr().err.startswith("kraft quorum: ")
