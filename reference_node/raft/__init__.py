"""The Raft core of the reference KRaft node (KIP-595, with KIP-996 pre-vote), sans I/O.

Theory of operation: `RaftCore` (core.py) is one node's state machine. It never touches a socket,
a file, a clock or the global random: the host feeds it inputs (`Tick`, `Receive`, `ClientAppend`,
`ClientRead`, `LogFlushed`, `Shutdown`) and collects a `Ready` (quorum state to fsync, log
truncation and appends, a flush, messages, client replies, events), carried out in the order written
on `Ready`, then `advance`s. Because a vote or a new epoch is only in the Ready's quorum state, and
the host fsyncs that before sending any message of the same Ready, nobody hears of a transition
before it is durable (persist-before-transition).

The states (states.py) are small classes holding only their timers and rounds; the epoch, leader
and vote live on the core, because they are the persisted quorum state. Rules shared by every
message (a request from another cluster or a stale epoch is refused; a response's newer epoch, or
a leader for our epoch, is adopted) run once, in `RaftCore.on_message`; Vote/BeginQuorumEpoch/
EndQuorumEpoch are in election.py, Fetch, the high watermark and client requests in
replication.py, both typed against the narrow `CoreOps` Protocol (ops.py). Messages
(messages.py) carry Kafka's fields and error codes. `RaftConfig` (config.py) has Kafka's settings
and the `Unsafe` switches that reproduce known defects for the harness to catch.

Brokers (the early KIP-631 proposal): a broker is an observer of the log that registers with the
active controller (the leader) and heartbeats it (lifecycle.py); the controller's decisions
(controller.py: register, fence, unfence, shutdown) are records of the log (records.py), applied
to every node's image (`Image.brokers`); a broker that cannot reach the controller fences itself.

The deterministic simulator (sim/) runs many cores in one process under a seeded event queue and
faults, checking Raft's invariants after every event; `kraft simulate` is its command line.
"""
