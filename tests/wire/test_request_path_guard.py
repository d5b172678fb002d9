"""The compiled bounds check (wire/_guard.py) takes and refuses exactly what the field-by-field
walk it replaced did.

That walk is kept here as the reference (`walk`): the same plans, one field at a time. Each
request and response class of every supported version is encoded from Hypothesis' examples,
then cut and overwritten at random; both walks must end at the same offset or both refuse.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.static.primitive import Records

from reference_node.wire import _encode, _guard, apis
from reference_node.wire.codec import decode_request
from reference_node.wire.errors import ProtocolError

st.register_type_strategy(Records, st.binary(max_size=48))

_I16, _I32 = struct.Struct(">h"), struct.Struct(">i")


# --- the reference: the walk as it was before it was compiled --------------------------------

def walk(entity_type: Any, data: bytes, pos: int, end: int) -> int:
    regular, tagged = _guard._plans(entity_type)
    flexible = bool(entity_type.__flexible__)
    for plan in regular:
        pos = _field(plan, flexible, data, pos, end)
    if flexible:
        count, pos = _uvarint(data, pos, end)
        for _ in range(count):
            tag, pos = _uvarint(data, pos, end)
            size, pos = _uvarint(data, pos, end)
            _need(pos, size, end)
            if tag in tagged:
                _field(tagged[tag], flexible, data, pos, pos + size)
            pos += size
    return pos


def _field(plan: Any, flexible: bool, data: bytes, pos: int, end: int) -> int:
    _name, target, is_array, is_entity, optional, legacy_string, nullable = plan
    if is_array:
        count, pos = _length(flexible, 4, data, pos, end)
        if count < 0:
            _null(nullable)
            return pos
        if count > end - pos:
            raise ProtocolError("claims")
        for _ in range(count):
            pos = _item(target, is_entity, flexible, data, pos, end)
        return pos
    if is_entity and optional:
        _need(pos, 1, end)
        pos += 1
        if data[pos - 1] >= 0x80:
            return pos
    return _item(target, is_entity, flexible and not legacy_string, data, pos, end, nullable)


def _item(target: Any, is_entity: bool, flexible: bool, data: bytes, pos: int, end: int,
          nullable: bool = True) -> int:
    if is_entity:
        return walk(target, data, pos, end)
    size = _guard._FIXED.get(target)
    if size is not None:
        _need(pos, size, end)
        return pos + size
    length, pos = _length(flexible, 2 if target == "string" else 4, data, pos, end)
    if length < 0:
        _null(nullable)
        return pos
    _need(pos, length, end)
    return pos + length


def _length(flexible: bool, width: int, data: bytes, pos: int, end: int) -> tuple[int, int]:
    if flexible:
        value, pos = _uvarint(data, pos, end)
        return value - 1, pos
    _need(pos, width, end)
    value = (_I16 if width == 2 else _I32).unpack_from(data, pos)[0]
    if value < -1:
        raise ProtocolError("negative")
    return value, pos + width


def _uvarint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        _need(pos, 1, end)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolError("varint")


def _null(nullable: bool) -> None:
    if not nullable:
        raise ProtocolError("null")


def _need(pos: int, size: int, end: int) -> None:
    if pos + size > end:
        raise ProtocolError("short")


# --- the comparison ----------------------------------------------------------------------------

def _classes() -> list[type[Any]]:
    out: list[type[Any]] = []
    for key, versions in sorted(apis.SUPPORTED_APIS.items()):
        for version in range(versions.min, versions.max + 1):
            out += [apis.request_class(key, version), apis.response_class(key, version)]
    return out + sorted({c.__header_schema__ for c in out}, key=lambda c: c.__module__)


def _outcome(check: Any, cls: type[Any], data: bytes) -> int | str:
    try:
        return int(check(cls, data, 0, len(data)))
    except ProtocolError:
        return "refused"


@pytest.mark.parametrize("cls", _classes(), ids=lambda c: c.__module__.split(".", 2)[-1])
def test_compiled_walk_agrees_with_the_field_by_field_walk(cls: type[Any]) -> None:
    rng = random.Random(cls.__module__ + cls.__name__)

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    @given(st.from_type(cls))
    def agree(entity: Any) -> None:
        try:
            sample = _encode.encode(entity)
        except Exception:  # a value the writer refuses (kio's types allow some)
            return
        assert _outcome(_guard.check_entity, cls, sample) == len(sample)
        for _ in range(40):
            raw = bytearray(sample)
            if rng.random() < 0.5:
                raw = raw[:rng.randint(0, len(raw))]
            for _ in range(rng.randint(0, 4)):
                if raw:
                    raw[rng.randrange(len(raw))] = rng.choice((0, 0x7F, 0x80, 0xFF,
                                                               rng.randrange(256)))
            data = bytes(raw)
            assert _outcome(_guard.check_entity, cls, data) == _outcome(walk, cls, data), data

    agree()


def test_huge_claims_are_refused_before_kio_sees_them() -> None:
    # ten bytes claiming four billion topics: kio's decoder would reserve them and abort
    frame = struct.pack(">hhih", apis.METADATA, 12, 7, -1) + b"\x00" + b"\xff\xff\xff\xff\x0f"
    with pytest.raises(ProtocolError, match=r"claims|varint|need"):
        decode_request(frame)
