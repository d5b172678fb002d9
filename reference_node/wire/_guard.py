"""A bounds check run over untrusted bytes before kio's native decoder sees them.

kio's Rust decoder reserves memory for an array from its declared length before reading any
element, so ten bytes claiming four billion elements abort the whole process (not an exception).
This walk follows the same kio schema without building objects and rejects any length that
exceeds the bytes left; a frame that passes has only lengths the decoder can afford. It also
rejects a null (length -1) where the schema allows none, which kio would decode as None: Kafka's
parser refuses such a message ("non-nullable field X was serialized as null") and its server
closes the connection, so no handler here ever meets a None list where it expects a list.
"""

from __future__ import annotations

import struct
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
_I8, _I16, _I32 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i")

# A field's plan: (name, kafka_type or entity type, is_array, is_entity, optional, legacy_string,
# nullable)
_Plan = tuple[str, Any, bool, bool, bool, bool, bool]


def check_entity(entity_type: type[Any], data: bytes, offset: int, end: int) -> int:
    """Walk one `entity_type` at `offset`; the offset after it. ProtocolError when a length
    does not fit before `end`."""
    regular, tagged = _plans(entity_type)
    flexible = bool(entity_type.__flexible__)
    pos = offset
    for plan in regular:
        pos = _check_field(plan, flexible, data, pos, end)
    if flexible:
        count, pos = _uvarint(data, pos, end)
        for _ in range(count):
            tag, pos = _uvarint(data, pos, end)
            size, pos = _uvarint(data, pos, end)
            _need(pos, size, end, "tagged field")
            if tag in tagged:
                _check_field(tagged[tag], flexible, data, pos, pos + size)
            pos += size
    return pos


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


def _check_field(plan: _Plan, flexible: bool, data: bytes, pos: int, end: int) -> int:
    name, target, is_array, is_entity, optional, legacy_string, nullable = plan
    if is_array:
        count, pos = _length(flexible, 4, data, pos, end)
        if count < 0:
            _null(name, nullable)
            return pos
        if count > end - pos:
            raise ProtocolError(f"array {name} claims {count} items in {end - pos} bytes")
        for _ in range(count):
            pos = _check_item(target, is_entity, flexible, data, pos, end)
        return pos
    if is_entity and optional:
        _need(pos, 1, end, name)
        marker = _I8.unpack_from(data, pos)[0]
        pos += 1
        if marker < 0:
            return pos
    return _check_item(target, is_entity, flexible and not legacy_string, data, pos, end,
                       name, nullable)


def _null(name: str, nullable: bool) -> None:
    if not nullable:
        raise ProtocolError(f"non-nullable field {name} was serialized as null")


def _check_item(target: Any, is_entity: bool, flexible: bool, data: bytes, pos: int,
                end: int, name: str = "", nullable: bool = True) -> int:
    if is_entity:
        return check_entity(target, data, pos, end)
    size = _FIXED.get(target)
    if size is not None:
        _need(pos, size, end, target)
        return pos + size
    # string, bytes, records: a length then that many bytes (-1 is null)
    length, pos = _length(flexible, 2 if target == "string" else 4, data, pos, end)
    if length < 0:
        _null(name, nullable)
        return pos
    _need(pos, length, end, target)
    return pos + length


def _length(flexible: bool, width: int, data: bytes, pos: int, end: int) -> tuple[int, int]:
    if flexible:
        value, pos = _uvarint(data, pos, end)
        return value - 1, pos
    _need(pos, width, end, "length")
    value = (_I16 if width == 2 else _I32).unpack_from(data, pos)[0]
    if value < -1:
        raise ProtocolError(f"negative length {value}")
    return value, pos + width


def _uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        _need(pos, 1, end, "varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("unsigned varint longer than 5 bytes")


def _need(pos: int, size: int, end: int, what: str) -> None:
    if pos + size > end:
        raise ProtocolError(f"{what}: need {size} bytes at {pos}, frame ends at {end}")
