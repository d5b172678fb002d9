"""What the network faults prove their cuts by: probes across the links (`CanProbeLink`).

A cut is made by a backend's bookkeeping (a proxy's set, iptables rules); a probe asks the network
itself. After a cut, `prove_cut` probes a few of the links cut (each must be `blocked`) and one
link cut in neither direction (it must `pass`: without it, a blocked probe could be a broken
probe), all at once, so that a start takes about one probe timeout. After a heal, `prove_restored`
probes a few of the links restored that no other fault still cuts (each must pass). A probe that
contradicts the cuts raises RuntimeError: the step completes `info`, `fault-failed`. A backend
that cannot probe leaves the cuts `unproven` (the step goes on as before).

The evidence, in the completion's `evidence`: {"cut": {"n1->n2": "blocked"}, "open": {"n1->n3":
"passes"}} at a start, {"restored": {"n1->n2": "passes"}} at a stop (with "still cut": the links
other faults hold), or UNPROVEN.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from contracts.backend import PROBE_TIMEOUT_S, Backend, CanProbeLink
from nemesis.base import on_each
from nemesis.links import Link

UNPROVEN = "unproven: backend cannot probe links"
BLOCKED, PASSES = "blocked", "passes"
TIMEOUT_S = PROBE_TIMEOUT_S  # each probe's


def prove_cut(backend: Backend, nodes: Sequence[str], cut: Collection[Link],
              held: Collection[Link]) -> dict[str, Any] | str:
    """Evidence that the links `cut` (now in effect, among all the links `held` cut) are cut,
    and that a link between `nodes` cut in neither direction is not; RuntimeError otherwise."""
    if not isinstance(backend, CanProbeLink):
        return UNPROVEN
    sample = _sample(sorted(cut))
    control = _open_link(nodes, held, sample[0][0] if sample else None)
    seen = _probe(backend, [*sample, *([control] if control else [])])
    evidence: dict[str, Any] = {"cut": {_name(link): seen[link] for link in sample},
                                "open": {_name(control): seen[control]} if control else {}}
    passing = [_name(link) for link in sample if seen[link] == PASSES]
    if passing:
        raise RuntimeError(f"the cut did not take effect: {', '.join(passing)} passes "
                           f"({_said(evidence)})")
    if control is not None and seen[control] == BLOCKED:
        raise RuntimeError(f"{_name(control)}, not cut, is blocked too: the probes cannot tell "
                           f"the cut ({_said(evidence)})")
    return evidence


def prove_restored(backend: Backend, restored: Collection[Link],
                   held: Collection[Link]) -> dict[str, Any] | str:
    """Evidence that links `restored` pass again, of those that no fault still cuts (`held`)
    either way; RuntimeError when one is still blocked."""
    if not isinstance(backend, CanProbeLink):
        return UNPROVEN
    cut_still = {(a, b) for a, b in held}
    free = [link for link in sorted(restored)
            if link not in cut_still and (link[1], link[0]) not in cut_still]
    sample = _sample(free)
    seen = _probe(backend, sample)
    evidence: dict[str, Any] = {"restored": {_name(link): seen[link] for link in sample}}
    kept = sorted(set(restored) - set(free))
    if kept:
        evidence["still cut"] = [_name(link) for link in kept]
    blocked = [_name(link) for link in sample if seen[link] == BLOCKED]
    if blocked:
        raise RuntimeError(f"{', '.join(blocked)} still blocked after the heal")
    return evidence


def _sample(links: list[Link]) -> list[Link]:
    """At most two of `links`, as each blocked probe waits out its timeout (in parallel, but a
    backend over SSH opens a channel per probe): the first, and its reverse if there (both ways
    of a two-way cut), else the last."""
    if not links:
        return []
    first = links[0]
    second = (first[1], first[0]) if (first[1], first[0]) in links else links[-1]
    return [first] if second == first else [first, second]


def _open_link(nodes: Sequence[str], held: Collection[Link], near: str | None) -> Link | None:
    """A link cut in neither direction; one from `near` (the probed cut's source) when there is
    one: that host reaches others, only the cut link fails."""
    cut = {(a, b) for a, b in held}
    free = [(a, b) for a in nodes for b in nodes
            if a != b and (a, b) not in cut and (b, a) not in cut]
    return next((link for link in free if link[0] == near), free[0] if free else None)


def _probe(backend: CanProbeLink, links: list[Link]) -> dict[Link, str]:
    names = {_name(link): link for link in links}
    seen = on_each(list(names), lambda name: backend.probe(*names[name], TIMEOUT_S))
    return {names[name]: PASSES if passed else BLOCKED for name, passed in seen.items()}


def _name(link: Link) -> str:
    return f"{link[0]}->{link[1]}"


def _said(evidence: dict[str, Any]) -> str:
    return "; ".join(f"{kind} {name} {seen}" for kind, links in evidence.items()
                     for name, seen in links.items())
