"""Unsafe switches enter by name in three places, and each refuses a name it does not know with one
line listing the valid ones; `read.mode=leader` is the stale-leader-reads switch, read by the core."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from harness.commands import test as test_cli
from reference_node.config import ConfigError, from_properties
from reference_node.raft.config import Unsafe
from reference_node.raft.messages import ErrorCode
from reference_node.server.node import NodeHost, raft_config
from reference_node.server.storage_adapter import format_directory
from reference_node.sim import cli as simulate_cli
from testkit.cluster import CLUSTER_ID, free_ports

BASE = {
    "node.id": "1",
    "process.roles": "controller",
    "controller.quorum.voters": "1@127.0.0.1:19093",
    "listeners": "CONTROLLER://127.0.0.1:19093",
    "metadata.log.dir": "/tmp/x",
}


def lists_every_switch_on_one_line(text: str) -> bool:
    lines = text.strip().splitlines()
    return len(lines) == 1 and all(switch.value in lines[0] for switch in Unsafe)


def test_kraft_simulate_refuses_an_unknown_switch(capsys: pytest.CaptureFixture[str]) -> None:
    assert simulate_cli.main(["--unsafe", "no-such-switch", "--seeds", "0"]) == 64
    err = capsys.readouterr().err
    assert "no-such-switch" in err and lists_every_switch_on_one_line(err)


def test_kraft_test_refuses_an_unknown_switch_before_deploying(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_deploy(*args: object, **kwargs: object) -> None:
        raise AssertionError("a backend was made for a run with a misspelt switch")

    monkeypatch.setattr(test_cli.backends, "make", no_deploy)
    code = test_cli.main(["--node-config", "unsafe=skip-flush,no-such-switch", "--seed", "1"])
    err = capsys.readouterr().err
    assert code == 64
    assert "--node-config" in err and "no-such-switch" in err
    assert lists_every_switch_on_one_line(err)


def test_node_config_refuses_an_unknown_switch() -> None:
    with pytest.raises(ConfigError, match="unsafe") as info:
        from_properties({**BASE, "unsafe": "skip-flush,no-such-switch"})
    assert lists_every_switch_on_one_line(str(info.value))


def test_node_config_switches_reach_the_core() -> None:
    cfg = from_properties({**BASE, "unsafe": "no-check-quorum, skip-flush"})
    assert cfg.unsafe == {Unsafe.NO_CHECK_QUORUM, Unsafe.SKIP_FLUSH}
    assert raft_config(cfg).unsafe == cfg.unsafe


@pytest.mark.parametrize(("mode", "stale"), [("leader", True), ("linearizable", False)])
def test_read_mode_leader_is_the_stale_leader_reads_switch(mode: str, stale: bool) -> None:
    cfg = from_properties({**BASE, "read.mode": mode, "unsafe": "no-check-quorum"})
    assert (Unsafe.STALE_LEADER_READS in cfg.unsafe) is stale
    assert Unsafe.NO_CHECK_QUORUM in cfg.unsafe
    assert raft_config(cfg).has(Unsafe.STALE_LEADER_READS) is stale


def test_read_mode_leader_reads_through_the_core(tmp_path: Path) -> None:
    """A one-voter node under read.mode=leader answers a read with the core's reply."""
    (port,) = free_ports(1)
    cfg = from_properties({
        **BASE,
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "metadata.log.dir": str(tmp_path / "data"),
        "controller.quorum.election.timeout.ms": "50",
        "read.mode": "leader",
    })
    format_directory(cfg, CLUSTER_ID)

    async def scenario() -> None:
        host = NodeHost(cfg)
        await host.start()
        try:
            for _ in range(500):
                if host.core.is_leader:
                    break
                await asyncio.sleep(0.01)
            appended = await asyncio.wait_for(host.facade.append((b"7", b"8")), 5)
            assert appended.error == ErrorCode.none
            reply = await asyncio.wait_for(host.facade.read(appended.offsets[0]), 5)
        finally:
            await host.stop(graceful=False)
        assert reply.error == ErrorCode.none
        assert reply.request_id > 0  # a request the core answered, not one the host made up
        assert [e.payload for e in reply.records] == [b"7", b"8"]
        assert reply.high_watermark == appended.offsets[-1] + 1

    asyncio.run(scenario())
