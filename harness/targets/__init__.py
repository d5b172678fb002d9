"""Targets: the implementations under test, by name (the interface is `contracts/target.py`).

`get(name)` builds a target. Names are those of TARGETS; a name of the form `module:attribute`
loads a target from any importable module (a plugin, or a test's own toy target).
"""

from __future__ import annotations

import importlib

from contracts.target import Target

TARGETS: dict[str, str] = {"reference": "harness.targets.reference:ReferenceTarget"}


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
    target = factory()
    if not isinstance(target, Target):
        raise UnknownTarget(f"{name!r} is not a Target")
    return target
