"""The toy target of the harness tests: examples/toy.py (docs/your-own-target.md), with what only
the tests need.

Loadable from the command line as `--target toy_target:ToyTarget` with tests/harness on
PYTHONPATH (and the repository's root, as from there). Beyond the example's settings,
`--node-config down=true` starts no server at all, so that every operation fails.
`LaxToyTarget` claims no durability, and `PackagedToyTarget` lacks its program on the local
backend (contracts/target.py's promises and refusals).
"""

from __future__ import annotations

from contracts.backend import Backend
from contracts.target import DB
from examples import toy


class ToyDB(toy.ToyDB):
    def start(self, backend: Backend, node: str) -> None:
        if self.config.get("down") == "true":
            return  # a cluster that never comes up: every operation fails
        super().start(backend, node)


class ToyTarget(toy.ToyTarget):
    settings = (*toy.ToyTarget.settings, "down")

    def db(self) -> DB:
        return ToyDB()


class LaxToyTarget(ToyTarget):
    """The toy, claiming no durability: what a `lossy=true` node forgets is a finding."""

    promises = ToyTarget.promises - {"acked-writes-durable"}


class PackagedToyTarget(ToyTarget):
    """The toy, as a target whose docker image needs a Debian package of its own, and whose
    program this machine lacks for the local backend."""

    PROBLEM = "toy-server not found on PATH: apt-get install toy-server (or bash scripts/setup.sh)"

    def missing(self, backend: str) -> str | None:
        return self.PROBLEM if backend == "local" else None

    def image_packages(self) -> tuple[str, ...]:
        return ("toy-server", "toy-tools")
