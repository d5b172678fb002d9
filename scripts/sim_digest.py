"""Digest the simulator's event traces, seed by seed, to prove a refactor changes no behaviour.

    python scripts/sim_digest.py > before.txt      # on the old code
    python scripts/sim_digest.py > after.txt       # on the new code
    diff before.txt after.txt                      # empty: byte-identical traces

Each line is `<case> <seed> <sha256 of the trace> <events>`. The cases cover the default run
(5 voters, 1 observer, every fault), pre-vote off, every unsafe switch, and the broker run (3
controllers, 2 brokers) with and without each broker switch, so that a change to a rule a switch
guards shows up too.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import sys

from reference_node.raft.config import Unsafe
from reference_node.sim.simulation import SimConfig, run_seed

# the switches whose defects only a run with brokers reaches
BROKER_SWITCHES = (Unsafe.NO_SELF_FENCE, Unsafe.ACCEPT_OLD_INCARNATION,
                   Unsafe.UNFENCE_BEFORE_CAUGHT_UP)


def cases(seeds: int, per_switch: int) -> list[tuple[str, SimConfig, range]]:
    out = [
        ("default", SimConfig(trace=True), range(seeds)),
        ("no-prevote", SimConfig(trace=True, pre_vote=False), range(per_switch)),
        ("3-voters", SimConfig(voters=3, observers=0, trace=True), range(per_switch)),
    ]
    for switch in Unsafe:
        config = SimConfig(trace=True, unsafe=frozenset({switch}))
        out.append((f"unsafe={switch.value}", config, range(per_switch)))
    brokers = SimConfig(voters=3, observers=0, brokers=2, time_ms=20_000, trace=True)
    out.append(("brokers", brokers, range(per_switch)))
    for switch in BROKER_SWITCHES:
        config = dataclasses.replace(brokers, unsafe=frozenset({switch}))
        out.append((f"brokers,unsafe={switch.value}", config, range(per_switch)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200, help="seeds of the default case (200)")
    parser.add_argument("--per-switch", type=int, default=20, help="seeds of the other cases (20)")
    args = parser.parse_args()
    for name, config, seeds in cases(args.seeds, args.per_switch):
        for seed in seeds:
            result = run_seed(seed, config)
            assert result.trace is not None
            digest = hashlib.sha256("\n".join(result.trace).encode()).hexdigest()
            print(f"{name} {seed} {digest} {result.events}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
