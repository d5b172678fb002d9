"""The campaign matrix: which runs of the harness make up the smoke and full campaigns.

A case is one `kraft test` run: a workload under a nemesis, against a target, with an expected
verdict. Unsafe cases switch on one of the reference node's deliberate defects and expect the
harness to find it: they prove the checkers still catch what they claim to catch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    workload: str
    nemesis: str  # a comma list for `kraft test --nemesis`, or "none"
    expect: str = "valid"  # or "invalid"
    partition_shapes: str | None = None
    node_config: tuple[tuple[str, str], ...] = ()
    marks: tuple[str, ...] = ("full",)
    severity: str = "normal"
    # A defect needs its window: at least this long a run, faults this long, reads this often.
    min_time_limit: int | None = None
    nemesis_interval: float | None = None
    rate: float | None = None
    brokers: int = 0  # `kraft test --brokers`: broker nodes beside the controllers

    @property
    def id(self) -> str:
        parts = [self.workload, self.nemesis.replace(",", "+")]
        if self.brokers:
            parts.append(f"{self.brokers}brokers")
        if self.partition_shapes:
            parts.append(self.partition_shapes)
        parts += [f"{k}={v}" for k, v in self.node_config]
        return "-".join(parts)


SMOKE = ("smoke", "full")

SMALL_SNAPSHOTS: tuple[tuple[str, str], ...] = (
    ("metadata.log.max.record.bytes.between.snapshots", "2000"),
    ("metadata.max.retention.bytes", "0"),
)
"""Snapshot every ~25 records and keep no log below the latest snapshot: a follower kept away for
a few seconds comes back below the leader's log start and must install a snapshot (KIP-630)."""

CASES: list[Case] = [
    Case("append", "none", marks=SMOKE, severity="blocker"),
    Case("append", "partition", marks=SMOKE, severity="critical"),
    Case("append", "pause", marks=SMOKE, severity="critical"),
    Case("append", "kill", marks=SMOKE, severity="critical"),
    Case("append", "partition", partition_shapes="leader", severity="critical"),
    Case("append", "partition,pause,kill", severity="critical"),
    Case("append", "partition", partition_shapes="majorities-ring"),
    Case("append", "partition", partition_shapes="bridge"),
    # Deliberate defects: the campaign passes when the harness catches them.
    # A zombie leader that never steps down, answering reads from its own log: stale reads, once
    # the new leader has committed something (~3 s into the partition): an 8 s partition.
    Case("append", "partition", partition_shapes="leader", expect="invalid",
         node_config=(("unsafe", "no-check-quorum"), ("read.mode", "leader")), marks=SMOKE,
         severity="minor", min_time_limit=25, nemesis_interval=8, rate=20),
    Case("append", "partition", partition_shapes="leader", expect="invalid",
         node_config=(("unsafe", "stale-leader-reads"),), severity="minor", min_time_limit=60),
    Case("append", "partition,kill", expect="invalid",
         node_config=(("unsafe", "no-log-check"),), severity="minor"),
    # Snapshots (KIP-630) and the state machine: the kv workload judged by WGL, snapshots taken
    # and installed during the run; then each snapshot defect, caught from the nodes' data.
    Case("kv", "partition", node_config=SMALL_SNAPSHOTS, marks=SMOKE, severity="critical"),
    Case("kv", "partition,pause,kill", node_config=SMALL_SNAPSHOTS, severity="critical"),
    Case("append", "lagging-follower", node_config=SMALL_SNAPSHOTS, severity="critical"),
    Case("kv", "partition", partition_shapes="leader", expect="invalid",
         node_config=(("unsafe", "no-check-quorum"), ("read.mode", "leader")), severity="minor",
         min_time_limit=25, nemesis_interval=8, rate=20),
    Case("append", "lagging-follower", expect="invalid",
         node_config=(*SMALL_SNAPSHOTS, ("unsafe", "snapshot-off-by-one")), severity="minor"),
    Case("append", "lagging-follower", expect="invalid",
         node_config=(*SMALL_SNAPSHOTS, ("unsafe", "snapshot-uncommitted")), severity="minor"),
    Case("append", "kill", expect="invalid",
         node_config=(*SMALL_SNAPSHOTS, ("unsafe", "delete-before-snapshot")), severity="minor"),
    # KIP-853: voters added and removed (the leader first) while partitions and kills go on.
    Case("append", "membership,partition,kill", marks=SMOKE, severity="critical"),
    Case("kv", "membership,pause", node_config=SMALL_SNAPSHOTS, severity="critical"),
    # KAFKA-16530: the leader that removed itself leads on (the membership checker's
    # removed-leader-leads-on).
    Case("append", "membership", expect="invalid",
         node_config=(("unsafe", "leader-remove-no-resign"),), severity="minor"),
    # Disks, through the fault filesystem (nemesis/faultfs): fsync stalls, power cuts that drop
    # what was not fsynced (a torn prefix kept at times), damaged files on a minority.
    Case("append", "fsync-stall", severity="critical"),
    Case("append", "power-loss", severity="critical"),
    Case("kv", "corrupt", node_config=SMALL_SNAPSHOTS, severity="critical"),
    # A node that acknowledges before its fsync: a power cut takes acknowledged writes with it.
    Case("append", "power-loss", expect="invalid", node_config=(("unsafe", "skip-flush"),),
         severity="minor"),
    # Brokers (the heartbeat and fencing proposal, KIP-631): registration, heartbeats and
    # fencing under partitions (a broker cut off from the controllers fences itself) and kills
    # (a restart is a new incarnation); then each fencing defect, caught.
    Case("brokers", "partition,kill", brokers=2, severity="critical"),
    Case("brokers", "partition", brokers=2, partition_shapes="broker", expect="invalid",
         node_config=(("unsafe", "no-self-fence"),), severity="minor", min_time_limit=30,
         nemesis_interval=10),
    Case("brokers", "stale-incarnation", brokers=2, expect="invalid",
         node_config=(("unsafe", "accept-old-incarnation"),), severity="minor"),
    Case("brokers", "kill", brokers=2, expect="invalid",
         node_config=(("unsafe", "unfence-before-caught-up"),), severity="minor"),
]
