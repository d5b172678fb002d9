"""The Raft core of the reference KRaft node (KIP-595, with KIP-996 pre-vote), sans I/O.

Theory of operation: `RaftCore` (core.py) is one node's state machine. It never touches a socket,
a file, a clock or the global random: the host feeds it inputs (`Tick`, `Receive`, `ClientAppend`,
`ClientRead`, `LogFlushed`, `Shutdown`) and collects a `Ready` (quorum state to fsync, log
truncation and appends, a flush, messages, client replies, events), carried out in the order written
on `Ready`, then `advance`s. Because a vote or a new epoch is only in the Ready's quorum state, and
the host fsyncs that before sending any message of the same Ready, nobody hears of a transition
before it is durable (persist-before-transition).

The states are small classes; rules shared by every message run once, in `RaftCore.on_message`,
and the handlers see the core through the narrow `CoreOps` Protocol (ops.py). Brokers (the early
KIP-631 proposal) are observers of the log that register with the active controller and heartbeat
it. The deterministic simulator (reference_node/sim/) runs many cores in one process under a seeded
event queue and faults, checking Raft's invariants after every event; `kraft simulate` is its
command line. Which module holds what, and the brokers' design: docs/internals/raft.md#raft
"""
