"""Snapshot write and install time (KIP-630), for images after 10^5 and 10^6 applied records.

For each image it times, on real files:

- encode: `encode_snapshot` alone (the image's records into Kafka's batches);
- write: `SnapshotFiles.write`, what a node does when it snapshots its image: encode, write
  `<name>.checkpoint.part`, fsync, rename, fsync the directory;
- install: `SnapshotFiles.write_bytes` on the file's bytes, what a follower does with a
  snapshot it downloaded: decode and check it (which yields the image it installs), then the
  same durable write;
- load: `SnapshotFiles.load`, what a restart does with its latest snapshot (read and decode).

The images are built by applying real records (`Image.apply`): `kv` is N writes spread over
--keys keys (the kv workload's commands; its default is 4 keys, the larger key spaces show how
the file grows with the image, not with N), `append` is N of the append workload's decimal
values (a counter and a digest: the file stays tiny whatever N). Usage:

    python bench/bench_snapshot.py [--dir DIR] [--records 100000,1000000] [--keys 1000,100000]

Use --dir on the disk the nodes will use: tmpfs makes fsync free.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from reference_node.raft.image import Image
from reference_node.raft.messages import Entry, EntryKind
from reference_node.storage.snapshot import SnapshotFiles, encode_snapshot

EPOCH = 5


def kv_image(records: int, keys: int, seed: int = 1) -> Image:
    """`records` kv writes of unique values to keys drawn uniformly from `keys`."""
    rng = random.Random(seed)
    image = Image()
    for offset in range(records):
        key = rng.randrange(keys)
        # encode_write's bytes (json.dumps with sorted keys), formatted directly for speed.
        payload = b'{"key": %d, "op": "write", "value": %d}' % (key, offset)
        image.apply(Entry(offset, EPOCH, EntryKind.DATA, payload))
    return image


def append_image(records: int) -> Image:
    image = Image()
    for offset in range(records):
        image.apply(Entry(offset, EPOCH, EntryKind.DATA, str(offset).encode()))
    return image


def timed(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` calls."""
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def images(counts: list[int], key_spaces: list[int]) -> Iterator[tuple[str, int, Image, float]]:
    for count in counts:
        for keys in key_spaces:
            began = time.perf_counter()
            image = kv_image(count, keys)
            yield f"kv {keys} keys", count, image, time.perf_counter() - began
        began = time.perf_counter()
        image = append_image(count)
        yield "append", count, image, time.perf_counter() - began


def measure(base: Path, image: Image, repeat: int) -> dict[str, float]:
    """The timings of one image, and its file's size."""
    snapshot_id = image.snapshot_id
    leader = SnapshotFiles(base / "leader")
    follower = SnapshotFiles(base / "follower")
    for files in (leader, follower):
        files.directory.mkdir()
    try:
        encode = timed(lambda: encode_snapshot(snapshot_id, image), repeat)
        write = timed(lambda: leader.write(snapshot_id, image), repeat)
        data = leader.read_all(snapshot_id)
        installed: list[Image] = []
        install = timed(lambda: installed.append(follower.write_bytes(snapshot_id, data)),
                        repeat)
        if installed[-1] != image:
            raise SystemExit(f"{snapshot_id}: the installed image differs from the written one")
        load = timed(lambda: follower.load(snapshot_id), repeat)
    finally:
        shutil.rmtree(leader.directory)
        shutil.rmtree(follower.directory)
    return {"bytes": len(data), "encode": encode, "write": write, "install": install,
            "load": load}


def bench(base: Path, counts: list[int], key_spaces: list[int], repeat: int) -> None:
    print(f"{'image':>16} {'applied':>9} {'keys':>7} {'file KiB':>9} {'encode s':>9} "
          f"{'write s':>8} {'install s':>10} {'load s':>7} {'build s':>8}")
    for name, count, image, build in images(counts, key_spaces):
        r = measure(base, image, repeat)
        print(f"{name:>16} {count:>9} {len(image.kv):>7} {r['bytes'] / 1024:>9.1f} "
              f"{r['encode']:>9.3f} {r['write']:>8.3f} {r['install']:>10.3f} {r['load']:>7.3f} "
              f"{build:>8.1f}", flush=True)


def filesystem_of(path: Path) -> str:
    try:
        out = subprocess.run(["df", "--output=fstype", str(path)], capture_output=True,
                             text=True, check=True).stdout.split()
        return out[-1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp "
                        "dir)")
    parser.add_argument("--records", default="100000,1000000",
                        help="applied records per image, comma-separated")
    parser.add_argument("--keys", default="4,1000,100000",
                        help="kv key spaces, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="timings are the median of this "
                        "many runs")
    args = parser.parse_args()
    counts = [int(x) for x in args.records.split(",")]
    key_spaces = [int(x) for x in args.keys.split(",")]
    base = Path(tempfile.mkdtemp(prefix="bench-snapshot-", dir=args.dir))
    try:
        print(f"# {base} on {filesystem_of(base)}, {os.cpu_count()} CPUs, median of "
              f"{args.repeat}; build = applying the records (not part of the snapshot cost)")
        bench(base, counts, key_spaces, args.repeat)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
