"""Nemeses: the faults a test injects, and the schedule that injects them.

Vocabulary (Jepsen's): a *fault* is one kind of trouble (`partition`, `pause`, `kill`,
`lagging-follower`, `membership`, the disk faults, `stale-incarnation` for brokers) that can be
started and stopped; `choose` draws what to do from the run's seeded random source (a shape, a set
of nodes), `start` does it and says what it did, `stop` undoes it, and `heal` undoes anything of its
kind unconditionally (at the end of a run, after a crash of the schedule). Each fault needs powers
of the backend or the target (the protocols of `contracts`: CanPartition, CanKill, CanPause,
HasLeader, CanChangeMembership for a target whose voters live in the log, ...) and is offered only
where they exist. Each fault module exports its specs (`nemesis.spec.FaultSpec`: the kind, the
powers it needs, how to build it, its options); the registry (`nemesis.registry`) is their list, and
`kraft test` makes its `--nemesis` choices and option flags from it. The network faults share their
cut links (`nemesis.links`), so that one's stop does not heal the other's cuts. A membership change
is not undone by its stop: voters added and removed stay so (`nemesis.membership`). With brokers,
the faults that speak of the quorum draw over the controllers only (`Env.controllers`), and
`stale-incarnation` (`nemesis.brokers`) restarts a broker and replays its old incarnation's
registration to the active controller. `targeted` (`nemesis.targeted`) is a fault whose turn is a
whole sequence of cuts, kills and restarts, steered by what the nodes' quorum-state files say, into
the states where weaker defects do harm (local backend).

The schedule (`nemesis.schedule`) sleeps, starts a fault, sleeps, stops it, cycling through the
chosen kinds in a seeded shuffled order, and records every start and stop in the history as ops of
the process "nemesis" (`start-partition` ... `stop-kill`), their completion carrying what was done.
"""
