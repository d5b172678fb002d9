"""Re-pin the simulator's seeds after a change to the Raft core moved every schedule.

    python scripts/repin.py              # check every pin; search a new seed for each that broke
    python scripts/repin.py --upto 400   # search further

A pin is (switch, seed, invariant): the seed's run with the switch on breaks that invariant
first, and the same seed without the switch is clean (tests/raft/test_raft_simulation.py and
tests/raft/test_sim_brokers.py, `PINNED`). For each pin that no longer holds, this prints the
first seed from 0 that does, or the invariants the switch broke instead, so that the change that
moved the schedules can re-pin in the same commit, as the roadmap asks. The pins are read from
the test modules themselves, and each is judged with the configuration its test uses.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

from reference_node.raft.config import Unsafe
from reference_node.sim.simulation import SimConfig, run_seed

ROOT = Path(__file__).resolve().parents[1]


def suites() -> list[tuple[str, SimConfig, SimConfig, list[tuple[Unsafe, int, str]]]]:
    """(name, configuration with the switch, clean configuration, pins) for each pinned list."""
    sys.path.insert(0, str(ROOT / "tests" / "raft"))
    sys.path.insert(0, str(ROOT))
    from tests.raft import test_raft_simulation as default
    from tests.raft import test_sim_brokers as brokers

    return [("default", SimConfig(), SimConfig(), list(default.PINNED)),
            ("brokers", brokers.BROKERS, brokers.BROKERS, list(brokers.PINNED))]


def holds(seed: int, switch: Unsafe, invariant: str, config: SimConfig,
          clean: SimConfig) -> str | None:
    """None when the pin holds; else what the seed did instead."""
    broken = run_seed(seed, dataclasses.replace(config, unsafe=frozenset({switch})))
    if broken.violation is None:
        return "not caught"
    if broken.violation.invariant != invariant:
        return broken.violation.invariant
    plain = run_seed(seed, clean)
    return None if plain.ok else f"unclean without the switch: {plain.violation}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upto", type=int, default=200, help="last seed searched (default 200)")
    args = parser.parse_args(argv)
    moved = 0
    for name, config, clean, pins in suites():
        for switch, seed, invariant in pins:
            if holds(seed, switch, invariant, config, clean) is None:
                print(f"{name:8} {switch.value:28} seed {seed:4} holds ({invariant})")
                continue
            moved += 1
            instead: Counter[str] = Counter()
            for candidate in range(args.upto + 1):
                why = holds(candidate, switch, invariant, config, clean)
                if why is None:
                    print(f"{name:8} {switch.value:28} seed {seed:4} -> {candidate} ({invariant})")
                    break
                instead[why] += 1
            else:
                print(f"{name:8} {switch.value:28} seed {seed:4} -> none in 0-{args.upto}; "
                      f"instead: {dict(instead.most_common(4))}")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
