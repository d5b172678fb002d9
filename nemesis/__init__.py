"""Nemeses: the faults a test injects, and the schedule that injects them.

Vocabulary (Jepsen's): a *fault* is one kind of trouble (a partition, a pause, a kill, a voter
change, a disk fault, ...) that can be started and stopped; `choose` draws what to do from the
run's seeded random source (a shape, a set of nodes), `start` does it and says what it did, `stop`
undoes it, and `heal` undoes anything of its kind unconditionally (at the end of a run, after a
crash of the schedule). Each fault needs powers of the backend or the target (the protocols of
`contracts`) and is offered only where they exist.

Each fault module exports its specs (`nemesis.spec.FaultSpec`: the kind, the powers it needs, how
to build it, its options); the registry (`nemesis.registry`) is their list, and `kraft test` makes
its `--nemesis` choices and option flags from it. The schedule (`nemesis.schedule`) starts and
stops the chosen kinds in a seeded shuffled order and records every start and stop in the history
as ops of the process "nemesis".

Details (the faults and the powers they need, how they share links, brokers, the schedule's ops):
docs/internals/nemesis.md#nemesis
"""
