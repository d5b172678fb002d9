"""A node whose ports cannot all be bound exits 1, and its client port never accepted meanwhile:
the harness (and the peers) take a client port that accepts for a started node, so a node that is
about to exit must never look started (a taken metrics port once let such a node's run pass)."""

from __future__ import annotations

import asyncio
import logging
import socket
from pathlib import Path
from typing import Any

import pytest

from reference_node.server import node as node_module
from reference_node.server import process
from testkit.cluster import free_ports, single_voter


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_a_taken_metrics_port_fails_the_start_before_the_client_port_accepts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    (metrics_port,) = free_ports(1)
    cfg = single_voter(tmp_path, **{"metrics.port": str(metrics_port)})
    port = cfg.listen.port
    seen: list[bool] = []
    real = node_module.serve_metrics

    async def probing(*args: Any) -> asyncio.Server:
        # the moment the metrics port is bound: what a harness polling the client port sees
        seen.append(await asyncio.to_thread(accepts, port))
        return await real(*args)

    monkeypatch.setattr(node_module, "serve_metrics", probing)
    with socket.socket() as taken, caplog.at_level(logging.ERROR):
        taken.bind(("127.0.0.1", metrics_port))
        taken.listen()
        assert asyncio.run(process.serve(cfg)) == 1
    assert seen == [False]
    assert not accepts(port)
    assert f"metrics port {metrics_port}" in caplog.text and "cannot listen" in caplog.text


def test_with_both_ports_free_the_node_serves_both(tmp_path: Path) -> None:
    (metrics_port,) = free_ports(1)
    cfg = single_voter(tmp_path, **{"metrics.port": str(metrics_port)})
    port = cfg.listen.port

    async def scenario() -> tuple[bool, bool]:
        host = node_module.NodeHost(cfg)
        await host.start()
        try:
            return (await asyncio.to_thread(accepts, port),
                    await asyncio.to_thread(accepts, metrics_port))
        finally:
            await host.stop(graceful=False)

    assert asyncio.run(scenario()) == (True, True)
