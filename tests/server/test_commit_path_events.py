"""events.jsonl on the commit path: the `high-watermark` line formatted without json.dumps is the
line `emit` writes (docs/contracts.md), and every line is in the file as soon as it is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reference_node.server import events as events_module
from reference_node.server.events import EventsWriter


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


@pytest.mark.parametrize("ts", [1795713820524.1196, 1.5, 1e16, 0.1 + 0.2])
def test_the_high_watermark_line_is_the_line_emit_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ts: float) -> None:
    monkeypatch.setattr(events_module.time, "time", lambda: ts / 1000.0)
    fast, general = EventsWriter(tmp_path / "fast", 3), EventsWriter(tmp_path / "general", 3)
    fast.high_watermark_moved(7, 123456)
    general.emit("high-watermark", epoch=7, hw=123456)
    assert lines(fast.path) == lines(general.path)
    assert json.loads(lines(fast.path)[0]) == {
        "type": "high-watermark", "ts": (ts / 1000.0) * 1000.0, "node": 3, "epoch": 7,
        "hw": 123456}
    fast.close()
    general.close()


def test_a_high_watermark_of_another_type_goes_through_json(tmp_path: Path) -> None:
    writer = EventsWriter(tmp_path, 3)
    writer.high_watermark_moved(True, 5)  # a bool is JSON's true, not 1
    writer.close()
    assert json.loads(lines(writer.path)[0])["epoch"] is True


def test_each_line_is_in_the_file_when_written_and_none_after_close(tmp_path: Path) -> None:
    writer = EventsWriter(tmp_path, 3)
    writer.start()
    writer.high_watermark_moved(1, 2)
    # read by another file object while the writer is open: nothing waits in a buffer
    assert [json.loads(x)["type"] for x in lines(writer.path)] == ["start", "high-watermark"]
    writer.close()
    writer.high_watermark_moved(1, 3)
    writer.emit("stop")
    assert len(lines(writer.path)) == 2
