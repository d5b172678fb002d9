"""The reference KRaft node.

Theory of operation: `raft/` is a pure state machine (KIP-595 elections, pull replication, high
watermark, check-quorum) that takes messages, ticks and client requests and returns what to
persist, what to send and what is committed; `storage/` keeps Kafka's on-disk layout and fsyncs;
`server/` is a thin asyncio host that speaks the Kafka wire protocol (with `kio`) and drives the
core. The same core runs in the deterministic simulator (`sim/`, beside it as etcd keeps `rafttest/`).
"""
