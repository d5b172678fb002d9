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

Around the host: `listener` (connections and framing), `routing` (Raft requests to the core through
`translate`, the rest to `client_api`), `peer_rpc` and `peers` (the other nodes), `events` and
`metrics`.

Details (what each of those modules does): docs/internals/node.md#server
"""
