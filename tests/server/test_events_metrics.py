"""events.jsonl lines and the Prometheus endpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from reference_node.server.events import EventsWriter
from reference_node.server.metrics import Metrics, serve_metrics


def test_events_lines_follow_contract(tmp_path: Path) -> None:
    ev = EventsWriter(tmp_path, 7)
    ev.start()
    ev.state("candidate", 1, None, 7)
    ev.state("candidate", 1, None, 7)  # unchanged: not repeated
    ev.state("leader", 1, 7, 7)
    ev.high_watermark(1, 5)
    ev.truncate(2, 3, "diverging-epoch")
    ev.stop()
    ev.close()
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [x["type"] for x in lines] == [
        "start", "state", "state", "high-watermark", "truncate", "stop"]
    assert all(x["node"] == 7 and isinstance(x["ts"], float) for x in lines)
    assert lines[2] == {**lines[2], "state": "leader", "epoch": 1, "leader": 7, "voted_for": 7}
    assert lines[3]["hw"] == 5 and lines[4]["offset"] == 3


def test_a_line_torn_by_a_power_cut_is_ended_before_the_restart_writes(tmp_path: Path) -> None:
    (tmp_path / "events.jsonl").write_text('{"type":"start"}\n{"type":"high-wat')
    ev = EventsWriter(tmp_path, 7)
    ev.start()
    ev.close()
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert lines[1] == '{"type":"high-wat' and json.loads(lines[2])["type"] == "start"
    # a whole file gains no blank line
    ev = EventsWriter(tmp_path, 7)
    ev.stop()
    ev.close()
    assert len((tmp_path / "events.jsonl").read_text().splitlines()) == 4


def test_metrics_endpoint_serves_kip_names() -> None:
    async def scenario() -> str:
        m = Metrics(1, lambda: {"current-leader": 1, "current-epoch": 4, "current-vote": 1,
                                "current-state": "leader", "high-watermark": 10,
                                "log-end-offset": 11, "log-end-epoch": 4})
        m.commit_latency_ms.record(3.0)
        m.commit_latency_ms.record(5.0)
        m.log_flush_time_ms.record(2.0)
        m.log_flush_time_ms.record(3000.0)
        server = await serve_metrics(m, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        body = (await r.read()).decode()
        w.close()
        # garbage does not hurt the endpoint
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"\x00\xff" * 100 + b"\r\n\r\n")
        await r.read()
        w.close()
        server.close()
        return body

    body = asyncio.run(scenario())
    assert body.startswith("HTTP/1.1 200 OK")
    assert 'kafka_raft_manager_current_epoch{node_id="1"} 4.0' in body
    assert 'kafka_raft_manager_current_state{node_id="1",state="leader"} 1.0' in body
    assert 'kafka_raft_manager_commit_latency_avg{node_id="1"} 4.0' in body
    assert 'kafka_raft_manager_commit_latency_max{node_id="1"} 5.0' in body
    # a stalled fsync shows as the flush time's max
    assert 'kafka_raft_manager_log_flush_time_ms_max{node_id="1"} 3000.0' in body
    assert 'kafka_raft_manager_log_flush_rate{node_id="1"} ' in body
    for name in ("high_watermark", "log_end_offset", "log_end_epoch", "election_latency_avg",
                 "append_records_rate", "fetch_records_rate", "current_vote", "current_leader"):
        assert f"kafka_raft_manager_{name}" in body
