"""The server: a thin asyncio host that runs the sans-I/O Raft core as a Kafka-protocol node.

Theory of operation
-------------------
`node.NodeHost` owns one `RaftCore` and composes one part per job (node.py lists them). Its
`pump.Pump` feeds the core every input on the event-loop thread: clock ticks (when the core's next
deadline is due: an idle node sleeps), Raft messages from peers, client appends and reads, and
`LogFlushed` when a flush finishes; the pump (a loop callback) carries out each `Ready` in the order
written on it: the quorum state is fsynced before any message of that Ready leaves; a Ready's
reset, truncation, appends and flush go as one job to one disk thread (`disk_jobs`,
`storage_adapter.Disk`, group commit), so the loop keeps serving while fsync runs. `process` runs
the `kraft node` process.

- `listener` accepts connections and frames requests (`wire.codec`); requests of one connection
  run concurrently, responses go back in request order; bad bytes close only that connection.
- `routing.Routing.dispatch` sends Vote, BeginQuorumEpoch, EndQuorumEpoch and replica Fetches
  (replica id >= 0) to the core through `translate` (kio <-> core messages), the rest to
  `client_api` (ApiVersions, Metadata, Produce, consumer Fetch, ListOffsets, DescribeQuorum).
- `peer_rpc` sends the core's requests to the other nodes through `peers`, which holds one
  outbound connection per voter, at its `controller.quorum.voters` address.
- `events` writes events.jsonl (docs/contracts.md); `metrics` serves the KIP-595 raft-manager
  metrics in Prometheus text format on `metrics.port`.
"""
