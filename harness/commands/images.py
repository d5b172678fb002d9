"""`kraft images`: build (or find cached) the node images of the docker backend.

`kraft images build` prints each step of the build on stderr and the node image's tag on stdout,
so that a script can write `image=$(kraft images build)`. A second run with the same inputs is a
lookup. With `--target NAME` (repeatable) it builds that target's layer on the node image (the
Debian packages of `Target.image_packages()`, e.g. etcd-server) and prints its tag instead, one
line per target in the order given (a target with no packages runs in the node image itself). Exit codes: 0 built or cached, 3 the build failed (what and how to fix on stderr),
64 bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time

EXIT_FAILED = 3
EXIT_USAGE = 64


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kraft images",
                                description="node images for the docker backend, no registry")
    sub = p.add_subparsers(dest="action", required=True)
    build = sub.add_parser("build", help="build the base and node images (cached by input hash)")
    build.add_argument("--base", choices=("debootstrap", "registry"), default="debootstrap",
                       help="debootstrap: a Debian root made here (default); registry: FROM "
                            "python:3.11-slim, where a registry answers")
    build.add_argument("--release", default="bookworm",
                       help="Debian release for debootstrap (needs Python 3.11+)")
    build.add_argument("--mirror", default=None,
                       help="Debian mirror for debootstrap (default: the one apt uses here)")
    build.add_argument("--with", dest="extra", action="append", default=[], metavar="DIST",
                       help="another installed distribution to put in the node image")
    build.add_argument("--target", dest="targets", action="append", default=[], metavar="NAME",
                       help="also build this target's layer (its Debian packages) and print its "
                            "tag instead of the node image's; repeatable")
    build.add_argument("--force", action="store_true", help="rebuild even if cached")
    build.add_argument("--quiet", action="store_true", help="print only the tag")
    return p


def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else EXIT_USAGE
    from harness import images

    try:
        layers = [(name, _packages_of(name)) for name in args.targets]
    except ValueError as exc:
        print(f"kraft images build: {exc}", file=sys.stderr)
        return EXIT_USAGE
    options = images.BuildOptions(base=args.base, release=args.release, mirror=args.mirror,
                           extra_distributions=tuple(args.extra), force=args.force)
    started = time.monotonic()

    def progress(line: str) -> None:
        if not args.quiet:
            print(f"[{time.monotonic() - started:6.1f}s] {line}", file=sys.stderr, flush=True)

    try:
        client = images.docker_client()
        try:
            node = images.ensure_images(options, progress, client)
            tags = [node]
            if layers:
                tags = []
                for name, packages in layers:
                    progress(f"target {name}: packages "
                             f"{' '.join(packages) or '(none: the node image)'}")
                    tags.append(images.ensure_target_layer(client, node, packages, options,
                                                           progress) if packages else node)
        finally:
            client.close()
    except images.ImageError as exc:
        print(f"kraft images build: {exc}", file=sys.stderr)
        return EXIT_FAILED
    progress(f"done: {' '.join(tags)}")
    print("\n".join(tags))
    return 0


def _packages_of(name: str) -> tuple[str, ...]:
    """The Debian packages target `name` needs on a node; ValueError (one line) if unknown."""
    from harness import targets

    try:
        target = targets.get(name)
    except targets.UnknownTarget as exc:
        raise ValueError(exc.args[0] if exc.args else str(exc)) from None
    return tuple(target.image_packages())
