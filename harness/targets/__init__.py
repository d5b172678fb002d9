"""Targets: the implementations under test, by name (the interface is `contracts/target.py`).

`get(name)` builds a target. Names are those of TARGETS; a name of the form `module:attribute`
loads a target from any importable module (a plugin, `examples.toy:ToyTarget`, a test's own toy):
the attribute may be a Target instance, a Target class, or a factory that makes one. The current
directory is searched for the module too, after the import path, as `python -m` would search it
(a console script's own path does not hold it), so that `kraft test --target mine:Target` finds
`mine.py` where it is run. Writing one: docs/your-own-target.md.
"""

from __future__ import annotations

import importlib
import os
import sys
from types import ModuleType

from contracts.target import Target

TARGETS: dict[str, str] = {
    "reference": "harness.targets.reference:ReferenceTarget",
    "etcd": "harness.targets.etcd:EtcdTarget",  # etcd 3.4 from Debian's etcd-server (issue 14)
    "nats": "harness.targets.nats:NatsTarget",  # NATS JetStream 2.9 from Debian's nats-server
}


class UnknownTarget(KeyError):
    pass


def get(name: str) -> Target:
    spec = TARGETS.get(name, name if ":" in name else None)
    if spec is None:
        raise UnknownTarget(f"unknown target {name!r}; one of: {', '.join(TARGETS)}")
    module_name, _, attribute = spec.partition(":")
    try:
        made = getattr(_import(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UnknownTarget(f"target {name!r} cannot be loaded: {exc}") from exc
    if isinstance(made, Target):
        return made
    if not callable(made):
        raise UnknownTarget(f"target {name!r}: {spec} is not a Target, a Target class or a "
                            f"factory of one (it is a {type(made).__name__})")
    try:
        target = made()
    except Exception as exc:
        raise UnknownTarget(f"target {name!r}: {spec}() failed: {type(exc).__name__}: {exc}"
                            ) from exc
    if not isinstance(target, Target):
        raise UnknownTarget(f"target {name!r}: {spec}() made a {type(target).__name__}, "
                            "not a Target")
    return target


def _import(module_name: str) -> ModuleType:
    """The module, found on the import path or else in the current directory (appended to the
    path, so that it never hides an installed module of the same name)."""
    here = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.append(here)
        importlib.invalidate_caches()
    return importlib.import_module(module_name)
