"""Build a kio response of any version from one version-free description.

kio has one set of frozen dataclasses per API version, with fields coming and going between
versions. Handlers describe a response once, as nested dicts with the union of the fields, and
`build(cls, data)` keeps what `cls` has: nested dicts become the nested classes of that version,
an int given for a `timedelta_*` field becomes milliseconds, an int error code an `ErrorCode`. A field `cls` lacks is dropped; a
field `cls` requires but `data` lacks is a bug (TypeError).

Every response is built here, and walking a class's type hints at every build cost more than the
rest of a Produce request's own work. So each class gets its builder generated once (`_compile`):
one line per field, with the one conversion its schema calls for decided then.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode

Builder = Callable[[dict[str, Any]], Any]


@cache
def _fields(cls: Any) -> tuple[tuple[str, Any, str], ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        (f.name, hints[f.name], str(f.metadata.get("kafka_type", "")))
        for f in dataclasses.fields(cls)
    )


@cache
def _nested_class(hint: Any) -> type[Any] | None:
    """The dataclass inside `hint` (X, X | None, tuple[X, ...]), or None."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for arg in typing.get_args(hint):
        found = _nested_class(arg)
        if found is not None:
            return found
    return None


def build(cls: Any, data: dict[str, Any]) -> Any:
    return _builder(cls)(data)


_BUILDERS: dict[type, Builder] = {}


def _builder(cls: Any) -> Builder:
    found = _BUILDERS.get(cls)
    if found is None:
        found = _BUILDERS[cls] = _compile(cls)
    return found


_ABSENT = object()


def _compile(cls: Any) -> Builder:
    """`build` for one class, as generated source: for each field of `cls`, if `data` has it,
    its value converted as the field's schema says (None stays None):

    - an `error_code` field: an int becomes an `ErrorCode`;
    - a `timedelta_*` field: an int is milliseconds;
    - a field holding (a tuple of) a nested class: a dict, or each dict of a list or tuple, is
      built as that class, and a list becomes a tuple;
    - any other field: a list becomes a tuple.
    """
    names: dict[str, Any] = {"_cls": cls, "_ABSENT": _ABSENT, "_ErrorCode": ErrorCode,
                             "_millis": _millis}
    lines = ["def build(data):", "    kwargs = {}", "    get = data.get"]
    for i, (name, hint, kafka_type) in enumerate(_fields(cls)):
        if kafka_type == "error_code":
            value = "v if v is None or isinstance(v, _ErrorCode) else _ErrorCode(int(v))"
        elif kafka_type.startswith("timedelta"):
            value = "None if v is None else _millis(v)"
        elif (nested := _nested_class(hint)) is not None:
            names[f"_nested{i}"] = _nested(nested)
            value = f"None if v is None else _nested{i}(v)"
        else:
            value = "tuple(v) if isinstance(v, list) else v"
        lines += [f"    v = get({name!r}, _ABSENT)",
                  "    if v is not _ABSENT:",
                  f"        kwargs[{name!r}] = {value}"]
    lines.append("    return _cls(**kwargs)")
    code = compile("\n".join(lines) + "\n", f"<kiobuild {cls.__module__}.{cls.__qualname__}>",
                   "exec")
    exec(code, names)  # source generated from the class's fields alone
    return names["build"]  # type: ignore[no-any-return]


_NO_TIME = datetime.timedelta(0)


def _millis(value: Any) -> Any:
    if not isinstance(value, int):
        return value
    # most are throttle times of 0, and a timedelta costs more than the rest of a field
    return _NO_TIME if value == 0 else datetime.timedelta(milliseconds=value)


def _nested(cls: type[Any]) -> Callable[[Any], Any]:
    make = _builder(cls)

    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return make(value)
        if isinstance(value, (list, tuple)):
            return tuple([make(v) if isinstance(v, dict) else v for v in value])
        return value

    return convert


def has_field(obj_or_cls: Any, name: str) -> bool:
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return name in _names(cls)


@cache
def _names(cls: Any) -> frozenset[str]:
    return frozenset(f[0] for f in _fields(cls))
