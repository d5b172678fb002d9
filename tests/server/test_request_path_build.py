"""`kiobuild.build` (compiled per class) turns a version-free description back into the kio
entity it describes, for every response and request class of every supported version.

An entity from Hypothesis is described as handlers describe one (dicts for nested entities,
lists for arrays, ints for error codes and whole-millisecond durations, extra keys of other
versions), and must come back equal.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.primitive import Records

from reference_node.server.kiobuild import build, has_field
from reference_node.wire import apis

st.register_type_strategy(Records, st.binary(max_size=16))


def describe(value: Any) -> Any:
    """What a handler would write for `value`."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: describe(getattr(value, f.name)) for f in dataclasses.fields(value)}
        out["a_field_of_another_version"] = 1
        return out
    if isinstance(value, tuple):
        return [describe(v) for v in value]
    if isinstance(value, ErrorCode):
        return int(value)
    if isinstance(value, datetime.timedelta) and value % datetime.timedelta(milliseconds=1) == \
            datetime.timedelta(0):
        return int(value / datetime.timedelta(milliseconds=1))
    return value


def _classes() -> list[type[Any]]:
    out: list[type[Any]] = []
    for key, versions in sorted(apis.SUPPORTED_APIS.items()):
        for version in range(versions.min, versions.max + 1):
            out += [apis.response_class(key, version), apis.request_class(key, version)]
    return out


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__module__.split(".", 2)[-1])
def test_a_description_builds_the_entity_it_describes(cls: type[Any]) -> None:
    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    @given(st.from_type(cls))
    def same(entity: Any) -> None:
        assert build(cls, describe(entity)) == entity

    same()


def test_a_field_the_class_requires_but_the_description_lacks_is_a_bug() -> None:
    with pytest.raises(TypeError):
        build(apis.response_class(apis.PRODUCE, 9), {"throttle_time": 0})


def test_has_field() -> None:
    cls = apis.request_class(apis.FETCH, 15)
    assert has_field(cls, "replica_state") and not has_field(cls, "replica_id")
    assert has_field(apis.request_class(apis.FETCH, 14), "replica_id")
