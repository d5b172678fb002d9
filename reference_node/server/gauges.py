"""The node's gauges (`metrics.Metrics.gauges`), read from the core when scraped.

KIP-595's raft-manager names, the snapshots, how long the flush in flight has waited for the disk,
and on a broker (issue 17) Kafka's broker-side names where it has them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reference_node.raft.core import RaftCore


def node_gauges(core: RaftCore, flush_in_flight_ms: float) -> dict[str, float | str]:
    snapshots = core.snapshot_ids
    return {
        "current-leader": -1 if core.leader_id is None else core.leader_id,
        "current-epoch": core.epoch,
        "current-vote": -1 if core.voted_id is None else core.voted_id,
        "current-state": core.state_name,
        "high-watermark": core.high_watermark,
        "log-end-offset": core.log_end_offset,
        "log-end-epoch": core.last_epoch,
        "log-start-offset": core.log_start_offset,
        "latest-snapshot-end-offset": snapshots[-1].end_offset if snapshots else -1,
        "latest-snapshot-epoch": snapshots[-1].epoch if snapshots else -1,
        "snapshot-count": len(snapshots),
        # how long the flush in flight has been waiting for the disk (0: none): a stalled
        # fsync shows here while it lasts, before it shows in log-flush-time-ms-max
        "log-flush-in-flight-ms": flush_in_flight_ms,
        **broker_gauges(core),
    }


def broker_gauges(core: RaftCore) -> dict[str, float | str]:
    """Kafka's broker-side names where it has them (BrokerLifecycleManager's state, the broker
    epoch), and the count of unfenced brokers this node's image knows."""
    view = core.brokers_view()
    gauges: dict[str, float | str] = {
        "registered-broker-count": len(view),
        "fenced-broker-count": sum(1 for b in view.values() if b.fenced),
    }
    status = core.broker_status()
    if status is not None:
        gauges.update({
            "broker-state": status.state,
            "broker-epoch": status.broker_epoch,
            "broker-self-fenced": 1.0 if status.self_fenced else 0.0,
            "broker-contact-age-ms": -1 if status.contact_age_ms is None
            else status.contact_age_ms,
        })
    return gauges
