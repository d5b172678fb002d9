"""The KIP-595 raft-manager metrics and a tiny Prometheus text endpoint.

Gauges are read from the node when scraped (`Metrics.gauges` is a callable), so they are never
stale; latencies and rates are recorded as they happen into 30-second windows, as Kafka's default
`metrics.sample.window.ms` x `metrics.num.samples` does. Each KIP name `a-b` is exported as
`kafka_raft_manager_a_b`; `current-state` is an enum, exported as one series per state with value 1
for the current one. Every series carries the label `node_id`. A broker (issue 17) adds
`broker-state` (an enum like `current-state`, over `BROKER_STATES`), `broker-epoch`,
`broker-self-fenced` (1 while it refuses for want of an answered heartbeat) and
`broker-contact-age-ms` (-1: never answered); every node exports `registered-broker-count` and
`fenced-broker-count` of its committed image.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

WINDOW_S = 30.0
STATES = ("leader", "follower", "candidate", "prospective", "unattached", "resigned", "observer")
BROKER_STATES = ("initial", "inactive", "active", "stopping", "stopped")
PREFIX = "kafka_raft_manager_"


class Window:
    """Samples of the last WINDOW_S seconds: avg, max and rate per second."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: collections.deque[tuple[float, float]] = collections.deque()

    def record(self, value: float = 1.0) -> None:
        self._samples.append((self._clock(), value))

    def _trim(self) -> None:
        horizon = self._clock() - WINDOW_S
        while self._samples and self._samples[0][0] < horizon:
            self._samples.popleft()

    def avg(self) -> float:
        self._trim()
        return sum(v for _, v in self._samples) / len(self._samples) if self._samples else 0.0

    def max(self) -> float:
        self._trim()
        return max((v for _, v in self._samples), default=0.0)

    def rate(self) -> float:
        self._trim()
        return sum(v for _, v in self._samples) / WINDOW_S

    def events_rate(self) -> float:
        """Samples per second, whatever their values."""
        self._trim()
        return len(self._samples) / WINDOW_S


class Metrics:
    def __init__(self, node_id: int, gauges: Callable[[], dict[str, float | str]]) -> None:
        self.node_id = node_id
        self.gauges = gauges
        self.commit_latency_ms = Window()
        self.election_latency_ms = Window()
        self.append_records = Window()
        self.fetch_records = Window()
        self.log_flush_time_ms = Window()

    def render(self) -> str:
        """Prometheus text exposition format 0.0.4."""
        label = f'node_id="{self.node_id}"'
        lines: list[str] = []

        def gauge(name: str, value: float) -> None:
            metric = PREFIX + name.replace("-", "_")
            lines.append(f"# TYPE {metric} gauge")
            lines.append(f"{metric}{{{label}}} {float(value)!r}")

        values = self.gauges()
        state = str(values.pop("current-state", ""))
        broker_state = values.pop("broker-state", None)
        for name, value in values.items():
            gauge(name, float(value))
        enums: list[tuple[str, tuple[str, ...], str]] = [("current_state", STATES, state)]
        if broker_state is not None:
            enums.append(("broker_state", BROKER_STATES, str(broker_state)))
        for name, states, current in enums:
            metric = PREFIX + name
            lines.append(f"# TYPE {metric} gauge")
            for s in states:
                lines.append(f'{metric}{{{label},state="{s}"}} {1.0 if s == current else 0.0}')
        gauge("commit-latency-avg", self.commit_latency_ms.avg())
        gauge("commit-latency-max", self.commit_latency_ms.max())
        gauge("election-latency-avg", self.election_latency_ms.avg())
        gauge("election-latency-max", self.election_latency_ms.max())
        gauge("append-records-rate", self.append_records.rate())
        gauge("fetch-records-rate", self.fetch_records.rate())
        # Kafka's kafka.log:LogFlushStats LogFlushRateAndTimeMs, in this exporter's form
        gauge("log-flush-time-ms-avg", self.log_flush_time_ms.avg())
        gauge("log-flush-time-ms-max", self.log_flush_time_ms.max())
        gauge("log-flush-rate", self.log_flush_time_ms.events_rate())
        return "\n".join(lines) + "\n"


async def serve_metrics(metrics: Metrics, host: str, port: int) -> asyncio.Server:
    """GET /metrics (or /) answers the text format; anything else 404; bad input closes."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5.0)
            parts = head.split(b"\r\n", 1)[0].split()
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1] in (b"/metrics", b"/"):
                body = metrics.render().encode()
                status = b"200 OK"
                ctype = b"text/plain; version=0.0.4; charset=utf-8"
            else:
                body, status, ctype = b"not found\n", b"404 Not Found", b"text/plain"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype
                + b"\r\nContent-Length: " + str(len(body)).encode()
                + b"\r\nConnection: close\r\n\r\n" + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ConnectionError):
            pass
        except Exception:  # a scrape must never take the node down
            log.exception("metrics endpoint")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host, port, limit=16384)
