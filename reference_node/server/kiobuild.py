"""Build a kio response of any version from one version-free description.

kio has one set of frozen dataclasses per API version, with fields coming and going between
versions. Handlers describe a response once, as nested dicts with the union of the fields, and
`build(cls, data)` keeps what `cls` has: nested dicts become the nested classes of that version,
an int given for a `timedelta_*` field becomes milliseconds, an int error code an `ErrorCode`. A field `cls` lacks is dropped; a
field `cls` requires but `data` lacks is a bug (TypeError).
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode


@cache
def _fields(cls: Any) -> tuple[tuple[str, Any, str], ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, hints[f.name], str(f.metadata.get("kafka_type", "")))
        for f in dataclasses.fields(cls)
    )


@cache
def _nested_class(hint: Any) -> type[Any] | None:
    """The dataclass inside `hint` (X, X | None, tuple[X, ...]), or None. Cached: a response is
    built for every request, and walking the hint costs more than the rest of `build`."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for arg in typing.get_args(hint):
        found = _nested_class(arg)
        if found is not None:
            return found
    return None


def build(cls: Any, data: dict[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for name, hint, kafka_type in _fields(cls):
        if name not in data:
            continue
        kwargs[name] = _convert(hint, kafka_type, data[name])
    return cls(**kwargs)


def _convert(hint: Any, kafka_type: str, value: Any) -> Any:
    if value is None:
        return None
    if kafka_type == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    if kafka_type.startswith("timedelta") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    nested = _nested_class(hint)
    if nested is None:
        return tuple(value) if isinstance(value, list) else value
    if isinstance(value, dict):
        return build(nested, value)
    if isinstance(value, (list, tuple)):
        return tuple(build(nested, v) if isinstance(v, dict) else v for v in value)
    return value


def has_field(obj_or_cls: Any, name: str) -> bool:
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return any(f[0] == name for f in _fields(cls))
