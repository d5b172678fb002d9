"""Reading the `__brokers` view: what `kraft cluster brokers` and the harness's `describe` ask.

Theory of operation. A node serves its registered brokers as a topic view, `__brokers` partition
0 (docs/contracts.md, "Brokers on the wire"): a consumer Fetch from offset 0 answers one batch,
keys and values JSON. On a broker node the first record has the key `"self"` (the JSON string)
and this broker's own report; then one record per broker, ascending id, key the JSON of the id,
value `BrokerInfo.to_json()` (`{"broker", "incarnation", "epoch", "host", "port", "fenced",
"shutdown", "since", "state"}`). The partition's high watermark is the end offset of the image
the view is of. A refusal is a partition error: BROKER_NOT_AVAILABLE from a broker that is not
serving, NOT_LEADER_OR_FOLLOWER from a controller that does not lead.

`read_brokers_view(client)` sends that Fetch with a `KafkaClient` and returns a `BrokersView`, or
raises `ViewRefused` naming Kafka's error (`error_name`, e.g. "broker-not-available", the
history's spelling) or a `WireError`; `parse_brokers_view` reads the records alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from .apis import FETCH
from .client import KafkaClient
from .errors import BadResponse
from .records import parse_batches
from .requests import fetch_request

BROKERS_TOPIC = "__brokers"
BROKERS_PARTITION = 0
SELF_KEY = "self"


class ViewRefused(Exception):
    """The node answered the view with a partition error (Kafka's code and name)."""

    def __init__(self, code: int) -> None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error-{code}"
        super().__init__(f"{name.upper()} ({code})")
        self.code = code
        self.error_name = name.replace("_", "-")
        """The history's spelling: "broker-not-available", "not-leader-or-follower", ..."""


@dataclass(frozen=True, slots=True)
class BrokersView:
    """One answer of the view: the image end offset it is of, the answering broker's own report
    (None from a controller), and each registered broker's `BrokerInfo.to_json()` by id."""

    offset: int
    leader_id: int
    self_report: dict[str, Any] | None
    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)

    def unfenced(self) -> list[int]:
        """The ids the view shows unfenced (active or stopping), ascending."""
        return sorted(i for i, b in self.brokers.items() if not b.get("fenced", True))


def parse_brokers_view(records: bytes | None) -> tuple[dict[str, Any] | None,
                                                       dict[int, dict[str, Any]]]:
    """(the "self" report or None, brokers by id) of a `__brokers` answer's records;
    ValueError (one line) for a record that is not one of the view's."""
    own: dict[str, Any] | None = None
    brokers: dict[int, dict[str, Any]] = {}
    for batch in parse_batches(records):
        if batch.is_control:
            continue
        for offset, key, value in batch.records:
            if key is None or value is None:
                raise ValueError(f"__brokers record {offset} has no key or no value")
            try:
                name = json.loads(key)
                body = json.loads(value)
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValueError(f"__brokers record {offset} is not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ValueError(f"__brokers record {offset} is not a JSON object")
            if name == SELF_KEY:
                own = body
            elif isinstance(name, int) and not isinstance(name, bool):
                brokers[name] = body
            else:
                raise ValueError(f"__brokers record {offset} has the key {name!r}")
    return own, brokers


def read_brokers_view(client: KafkaClient, timeout: float | None = None) -> BrokersView:
    """The view as `client`'s node serves it; ViewRefused, WireError, or BadResponse for an
    answer that is not the view."""
    resp = client.call(FETCH, lambda v: fetch_request(v, 0, topic=BROKERS_TOPIC,
                                                      partition=BROKERS_PARTITION,
                                                      max_bytes=8 << 20), timeout=timeout)
    if int(getattr(resp, "error_code", 0)):
        raise ViewRefused(int(resp.error_code))
    part = next((p for t in resp.responses if t.topic == BROKERS_TOPIC for p in t.partitions),
                None)
    if part is None:
        raise BadResponse(f"the Fetch response names no partition of {BROKERS_TOPIC}")
    if int(part.error_code):
        raise ViewRefused(int(part.error_code))
    try:
        own, brokers = parse_brokers_view(part.records)
    except ValueError as exc:
        raise BadResponse(str(exc)) from None
    return BrokersView(offset=int(part.high_watermark),
                       leader_id=int(part.current_leader.leader_id), self_report=own,
                       brokers=brokers)
