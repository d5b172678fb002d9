"""Benchmark of the deterministic simulator: simulated events per second, and the wall time of the
200-seed run of `kraft simulate --nodes 5 --seeds 0-199 --faults all`.

Usage: python bench/bench_simulator.py [--seeds N] [--quick]
"""

from __future__ import annotations

import argparse
import time

from reference_node.sim.simulation import SimConfig, run_seed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=200, help="seeds in the full run (200)")
    parser.add_argument("--quick", action="store_true", help="5 seeds only")
    args = parser.parse_args()
    seeds = 5 if args.quick else args.seeds

    config = SimConfig()
    started = time.perf_counter()
    cpu_started = time.process_time()
    events = 0
    for seed in range(seeds):
        result = run_seed(seed, config)
        if not result.ok:
            raise SystemExit(f"seed {seed} violated {result.violation}")
        events += result.events
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    print(f"seeds:               {seeds} (5 voters, 1 observer, all faults, "
          f"{config.time_ms / 1000:g} s simulated each)")
    print(f"events:              {events}")
    print(f"wall time:           {wall:.1f} s ({wall / seeds:.2f} s per seed)")
    print(f"cpu time:            {cpu:.1f} s")
    print(f"events/s (wall):     {events / wall:,.0f}")
    print(f"events/s (cpu):      {events / cpu:,.0f}")


if __name__ == "__main__":
    main()
