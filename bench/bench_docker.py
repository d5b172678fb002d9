"""Figures of the docker backend on this machine: image lookup, cluster start, SSH command cost.

    python bench/bench_docker.py [--nodes 3 5] [--commands 50] [--cold]

Prints one JSON object. `--cold` first forces a rebuild of both images (debootstrap included),
which takes minutes and needs root. Times are wall-clock seconds (commands: milliseconds).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from contracts.backend import ClusterSpec
from harness import images
from harness.backends.docker import DockerBackend


def timed(action: Any) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def measure_images(cold: bool) -> tuple[str, dict[str, float]]:
    figures: dict[str, float] = {}
    if cold:
        figures["images_cold_s"] = timed(lambda: images.ensure_images(
            images.BuildOptions(force=True)))
    figures["images_first_s"] = timed(images.ensure_images)  # rebuilds the node if code changed
    tag = ""

    def lookup() -> None:
        nonlocal tag
        tag = images.ensure_images()

    figures["images_cached_s"] = timed(lookup)
    return tag, figures


def measure_cluster(image: str, nodes: int, commands: int, run_dir: Path) -> dict[str, float]:
    backend = DockerBackend(image=image)
    spec = ClusterSpec(run_id=f"bench-{nodes}-{int(time.time())}",
                       nodes=[f"n{i}" for i in range(1, nodes + 1)], ports={"p": 8000},
                       run_dir=run_dir)
    figures = {f"start_{nodes}_nodes_s": timed(lambda: backend.setup(spec))}
    try:
        samples = []
        for _ in range(commands):
            samples.append(timed(lambda: backend.exec("n1", ["true"])) * 1000)
        figures["exec_ms_median"] = statistics.median(samples)
        figures["exec_ms_p95"] = sorted(samples)[int(len(samples) * 0.95) - 1]
        figures["spawn_ms"] = timed(lambda: backend.spawn("n1", ["sleep", "600"], "s.log")) * 1000
        figures["signal_ms"] = timed(lambda: backend.signal("n1", signal.SIGSTOP)) * 1000
        figures["is_running_ms"] = timed(lambda: backend.is_running("n1")) * 1000
        figures["kill_ms"] = timed(lambda: backend.signal("n1", signal.SIGKILL)) * 1000
        figures["partition_ms"] = timed(lambda: backend.partition([("n1", "n2")])) * 1000
        figures["heal_ms"] = timed(backend.heal) * 1000
        payload = b"x" * 1_000_000
        figures["write_1MB_ms"] = timed(lambda: backend.write_file("n1", "/tmp/b", payload)) * 1000
        figures["read_1MB_ms"] = timed(lambda: backend.read_file("n1", "/tmp/b")) * 1000
    finally:
        figures[f"teardown_{nodes}_nodes_s"] = timed(backend.teardown)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--commands", type=int, default=50)
    parser.add_argument("--cold", action="store_true")
    args = parser.parse_args()
    image, figures = measure_images(args.cold)
    with tempfile.TemporaryDirectory(prefix="kraft-jepsen-bench-") as tmp:
        for count in args.nodes:
            for key, value in measure_cluster(image, count, args.commands,
                                              Path(tmp) / str(count)).items():
                figures[key if key.endswith("nodes_s") else f"{key}@{count}"] = value
    print(json.dumps({key: round(value, 3) for key, value in figures.items()}, indent=2))


if __name__ == "__main__":
    main()
