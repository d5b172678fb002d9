"""A bounds check run over untrusted bytes before kio's native decoder sees them.

kio's Rust decoder reserves memory for an array from its declared length before reading any
element, so ten bytes claiming four billion elements abort the whole process (not an exception).
This walk follows the same kio schema without building objects and rejects any length that
exceeds the bytes left; a frame that passes has only lengths the decoder can afford. It also
rejects a null (length -1) where the schema allows none, which kio would decode as None: Kafka's
parser refuses such a message ("non-nullable field X was serialized as null") and its server
closes the connection, so no handler here ever meets a None list where it expects a list.

The walk runs over every request and response before it is decoded, so it is compiled: each
entity type's walk is generated once as Python source from its plan (`_compile`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from .errors import ProtocolError

_FIXED: dict[str, int] = {
    "int8": 1, "bool": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "error_code": 2,
    "int32": 4, "uint32": 4, "timedelta_i32": 4,
    "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
    "uuid": 16,
}
_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")

# A field's plan: (name, kafka_type or entity type, is_array, is_entity, optional, legacy_string,
# nullable)
_Plan = tuple[str, Any, bool, bool, bool, bool, bool]


Checker = Callable[[bytes, int, int], int]
"""Walks one entity at `pos` within `end`; the position after it."""


def check_entity(entity_type: type[Any], data: bytes, offset: int, end: int) -> int:
    """Walk one `entity_type` at `offset`; the offset after it. ProtocolError when a length
    does not fit before `end`."""
    return checker(entity_type)(data, offset, end)


_CHECKERS: dict[type, Checker] = {}


def checker(entity_type: type[Any]) -> Checker:
    """The compiled walk of `entity_type` (see `_compile`), built on first use."""
    found = _CHECKERS.get(entity_type)
    if found is None:
        found = _CHECKERS[entity_type] = _compile(entity_type)
    return found


_PLANS: dict[type, tuple[list[_Plan], dict[int, _Plan]]] = {}


def _plans(entity_type: type) -> tuple[list[_Plan], dict[int, _Plan]]:
    cached = _PLANS.get(entity_type)
    if cached is None:
        cached = _PLANS[entity_type] = _make_plans(entity_type)
    return cached


def _make_plans(entity_type: Any) -> tuple[list[_Plan], dict[int, _Plan]]:
    regular: list[_Plan] = []
    tagged: dict[int, _Plan] = {}
    header = entity_type.__name__ == "RequestHeader"
    for f in fields(entity_type):
        kind = classify_field(f)
        tag = get_field_tag(f)
        if isinstance(kind, (EntityField, EntityTupleField)):
            target: Any = kind.type_
        else:
            target = get_schema_field_type(f)
        plan = (f.name, target, kind.is_array, isinstance(kind, (EntityField, EntityTupleField)),
                tag is None and is_optional(f), header and f.name == "client_id", is_optional(f))
        if tag is None:
            regular.append(plan)
        else:
            tagged[int(tag)] = plan
    return regular, tagged


class _Source:
    """The source of one generated walk, with the objects it names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {
            "_uvarint": _uvarint, "_tags": _tags, "_I16": _I16, "_I32": _I32,
            "_short": _short, "_null": _null, "_claims": _claims, "_negative": _negative}
        self._count = 0

    def name_of(self, value: Any, prefix: str) -> str:
        self._count += 1
        name = f"_{prefix}{self._count}"
        self.names[name] = value
        return name

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def function(self, name: str, body: list[str]) -> Checker:
        code = compile("\n".join([f"def {name}(data, pos, end):", *body, "    return pos"]) + "\n",
                       f"<guard {name}>", "exec")
        namespace = dict(self.names)
        exec(code, namespace)  # source generated from kio's schema alone
        return namespace[name]  # type: ignore[no-any-return]


def _compile(entity_type: Any) -> Checker:
    """The walk of `entity_type` as one generated function.

    The same walk as the field-by-field one it replaced (tests/wire/test_request_path_guard.py
    keeps that one and compares them on every request of every supported version, mutated):
    a run of fixed-width fields is one bounds check, a nested entity a call to its own walk,
    and an empty tag section (the common case) one byte looked at.
    """
    regular, tagged = _plans(entity_type)
    flexible = bool(entity_type.__flexible__)
    src = _Source()
    run = 0  # bytes of fixed-width fields not yet checked
    for plan in regular:
        size = _fixed_size(plan)
        if size is not None:
            run += size
            continue
        run = _flush(src, run, plan[0])
        _field(src, 1, plan, flexible)
    _flush(src, run, "fields")
    if flexible:
        table = {tag: _tagged_field(plan, flexible) for tag, plan in tagged.items()}
        known = src.name_of(table, "T")
        src.emit(1, "if pos < end and data[pos] == 0:")
        src.emit(2, "pos += 1  # no tagged fields")
        src.emit(1, "else:")
        src.emit(2, f"pos = _tags(data, pos, end, {known})")
    return src.function(f"check_{entity_type.__name__}", src.lines)


def _tagged_field(plan: _Plan, flexible: bool) -> Checker:
    src = _Source()
    size = _fixed_size(plan)
    if size is not None:
        _flush(src, size, plan[0])
    else:
        _field(src, 1, plan, flexible)
    return src.function(f"check_tag_{plan[0]}", src.lines)


def _fixed_size(plan: _Plan) -> int | None:
    _name, target, is_array, is_entity, _optional, _legacy, _nullable = plan
    if is_array or is_entity:
        return None
    return _FIXED.get(target)


def _flush(src: _Source, run: int, what: str) -> int:
    if run:
        src.emit(1, f"if pos + {run} > end:")
        src.emit(2, f"raise _short({what!r}, {run}, pos, end)")
        src.emit(1, f"pos += {run}")
    return 0


def _field(src: _Source, indent: int, plan: _Plan, flexible: bool) -> None:
    name, target, is_array, is_entity, optional, legacy_string, nullable = plan
    if is_array:
        _length(src, indent, flexible, 4)
        src.emit(indent, "if n < 0:")
        _null_check(src, indent + 1, name, nullable)
        src.emit(indent, "elif n > end - pos:")
        src.emit(indent + 1, f"raise _claims({name!r}, n, end - pos)")
        src.emit(indent, "else:")
        size = None if is_entity else _FIXED.get(target)
        if size is not None:
            src.emit(indent + 1, f"pos += n * {size}")
            src.emit(indent + 1, "if pos > end:")
            src.emit(indent + 2, f"raise _short({name!r}, n * {size}, pos - n * {size}, end)")
            return
        src.emit(indent + 1, "for _ in range(n):")
        # an array's items: no legacy string, and a null item is let through
        _item(src, indent + 2, target, is_entity, flexible, "", True)
        return
    if is_entity and optional:
        src.emit(indent, "if pos + 1 > end:")
        src.emit(indent + 1, f"raise _short({name!r}, 1, pos, end)")
        src.emit(indent, "pos += 1")
        src.emit(indent, "if data[pos - 1] < 0x80:  # a non-negative marker: present")
        _item(src, indent + 1, target, True, flexible, name, nullable)
        return
    _item(src, indent, target, is_entity, flexible and not legacy_string, name, nullable)


def _item(src: _Source, indent: int, target: Any, is_entity: bool, flexible: bool, name: str,
          nullable: bool) -> None:
    if is_entity:
        walk = src.name_of(checker(target), "C")
        src.emit(indent, f"pos = {walk}(data, pos, end)")
        return
    size = _FIXED.get(target)
    if size is not None:
        src.emit(indent, f"if pos + {size} > end:")
        src.emit(indent + 1, f"raise _short({target!r}, {size}, pos, end)")
        src.emit(indent, f"pos += {size}")
        return
    # string, bytes, records: a length then that many bytes (-1 is null)
    _length(src, indent, flexible, 2 if target == "string" else 4)
    src.emit(indent, "if n < 0:")
    _null_check(src, indent + 1, name, nullable)
    src.emit(indent, "elif pos + n > end:")
    src.emit(indent + 1, f"raise _short({target!r}, n, pos, end)")
    src.emit(indent, "else:")
    src.emit(indent + 1, "pos += n")


def _length(src: _Source, indent: int, flexible: bool, width: int) -> None:
    """`n`: a compact length (unsigned varint - 1) or a classic int16 / int32 one."""
    if flexible:
        src.emit(indent, "n, pos = _uvarint(data, pos, end)")
        src.emit(indent, "n -= 1")
        return
    src.emit(indent, f"if pos + {width} > end:")
    src.emit(indent + 1, f"raise _short('length', {width}, pos, end)")
    src.emit(indent, f"n = {'_I16' if width == 2 else '_I32'}.unpack_from(data, pos)[0]")
    src.emit(indent, f"pos += {width}")
    src.emit(indent, "if n < -1:")
    src.emit(indent + 1, "raise _negative(n)")


def _null_check(src: _Source, indent: int, name: str, nullable: bool) -> None:
    if nullable:
        src.emit(indent, "pass")
    else:
        src.emit(indent, f"raise _null({name!r})")


def _tags(data: bytes, pos: int, end: int, known: dict[int, Checker]) -> int:
    """A tag section: each tag's size must fit, and a tag we know is walked within it."""
    count, pos = _uvarint(data, pos, end)
    for _ in range(count):
        tag, pos = _uvarint(data, pos, end)
        size, pos = _uvarint(data, pos, end)
        if pos + size > end:
            raise _short("tagged field", size, pos, end)
        walk = known.get(tag)
        if walk is not None:
            walk(data, pos, pos + size)
        pos += size
    return pos


def _short(what: str, size: int, pos: int, end: int) -> ProtocolError:
    return ProtocolError(f"{what}: need {size} bytes at {pos}, frame ends at {end}")


def _claims(name: str, count: int, left: int) -> ProtocolError:
    return ProtocolError(f"array {name} claims {count} items in {left} bytes")


def _negative(value: int) -> ProtocolError:
    return ProtocolError(f"negative length {value}")


def _null(name: str) -> ProtocolError:
    return ProtocolError(f"non-nullable field {name} was serialized as null")


def _uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise _short("varint", 1, pos, end)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")
