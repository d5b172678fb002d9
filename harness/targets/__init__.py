"""Targets: the implementations under test, by name (the interface is `contracts/target.py`).

`get(name)` builds a target. Names are those of TARGETS; a name of the form `module:attribute`
loads a target from any importable module (a plugin, or a test's own toy target).
"""

from __future__ import annotations

import importlib

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
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UnknownTarget(f"target {name!r} cannot be loaded: {exc}") from exc
    if not callable(factory):
        raise UnknownTarget(f"target {name!r}: {spec} is not a Target class or factory "
                            f"(it is a {type(factory).__name__})")
    try:
        target = factory()
    except Exception as exc:
        raise UnknownTarget(f"target {name!r}: {spec}() failed: {type(exc).__name__}: {exc}"
                            ) from exc
    if not isinstance(target, Target):
        raise UnknownTarget(f"target {name!r}: {spec}() made a {type(target).__name__}, "
                            "not a Target")
    return target
