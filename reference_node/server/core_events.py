"""`CoreEvents`: what the node does with each event of the core (`Ready.events`).

Every event is written to events.jsonl (`EventsWriter`, docs/contracts.md); a plain high-watermark
move takes the writer's short path, and wakes the consumer Fetches waiting for one. The events an
operator follows (state changes, truncations, snapshots, the log start, the brokers' lifecycle)
are logged too, and an election's latency (from prospective or candidate to leader or follower)
is recorded in the metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from reference_node.server.events import EventsWriter
from reference_node.server.metrics import Metrics

log = logging.getLogger(__name__)

LOGGED = frozenset({"state", "truncate", "snapshot", "snapshot-install", "snapshot-refused",
                    "log-start", "broker-state", "broker-register", "broker-fence",
                    "broker-unfence", "broker-shutdown", "broker-refused"})
"""The kinds of event also logged, at INFO."""


class CoreEvents:
    def __init__(self, events: EventsWriter, metrics: Metrics,
                 hw_moved: Callable[[], None]) -> None:
        self._events = events
        self._metrics = metrics
        self._hw_moved = hw_moved
        self._election_started: float | None = None

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.pop("type")
        if kind == "high-watermark":
            self._hw_moved()
            if event.keys() == {"epoch", "hw"}:
                self._events.high_watermark_moved(event["epoch"], event["hw"])
                return
        if kind == "state":
            self._measure_election(event.get("state"))
        self._events.emit(kind, **event)
        if kind in LOGGED:
            log.info("%s %s", kind, event)

    def _measure_election(self, state: Any) -> None:
        if state in ("prospective", "candidate"):
            if self._election_started is None:
                self._election_started = time.monotonic()
        elif state in ("leader", "follower") and self._election_started is not None:
            self._metrics.election_latency_ms.record(
                (time.monotonic() - self._election_started) * 1000.0)
            self._election_started = None
