"""The deterministic simulator: many Raft cores, one seeded event queue, faults and invariants.

Theory of operation: `Simulation` (simulation.py) runs one seed as a loop over one queue of events
(events.py). Each `RaftCore` runs behind a host (host.py) the way a server would run it, but with a
simulated disk (flushes and snapshot writes take time; a crash keeps only what was flushed and the
snapshots whose write finished; disk.py: a restart loads the latest valid snapshot), a simulated
RPC layer (rpc.py) and a simulated network (network.py: latency, loss, duplication, reordering,
partitions). Snapshots (KIP-630) are on in every run, with small thresholds, so that followers back
from a partition or a crash install them. Clients (clients.py) append opaque values and kv commands
and read the log or the kv image through any node; the nemesis (nemesis.py) starts one fault of
faults.py at a time until the heal time, after which liveness must follow. With the `membership`
fault the voters live in the log (KIP-853: directory ids, a bootstrap checkpoint), and the
membership nemesis (membership.py) adds and removes voters, restarts and wipes nodes all along,
beside the other faults. With `--brokers N`, N broker nodes follow the log as observers,
register with the leader and heartbeat it (each start a new incarnation), the broker faults of
faults.py cut them off, crash them, shut them down and replay a dead incarnation's registration,
and brokers.py checks fencing, sessions and incarnations. After every event the incremental
checks of invariants.py (and zombies.py for ZombieStepDown, brokers.py for the brokers) run; the first broken one stops the seed with its name and the last
events. Every random choice comes from streams split off the seed, and no set or hash order
reaches the schedule, so a seed's trace is the same byte for byte on every run.
"""
