"""The deterministic simulator: many Raft cores, one seeded event queue, faults and invariants.

Theory of operation: `Simulation` (simulation.py) hosts each `RaftCore` the way a server would, but
with a simulated disk (flushes take time; a crash keeps only what was flushed) and a simulated
network (network.py: latency, loss, duplication, reordering, partitions). Clients append and read
through any node; the nemesis (faults.py) starts one fault at a time until the heal time, after
which liveness must follow. After every event the incremental checks of invariants.py run; the
first broken one stops the seed with its name and the last events. Every random choice comes from
streams split off the seed, and no set or hash order reaches the schedule, so a seed's trace is the
same byte for byte on every run.
"""
