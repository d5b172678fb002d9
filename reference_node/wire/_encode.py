"""Compiled kio writers: one generated function per entity type, kio's bytes exactly.

kio's `entity_writer` walks an entity's fields at every call, with one BytesIO write and one
`struct.pack` per field and a temporary buffer for the tagged fields; on the node that cost more
than everything else of a Produce request's own work (a Produce response: ~16 us, a Raft Fetch
request ~25 us). Here each entity type's writer is generated once, as Python source, from the
same schema kio reads (each field's `kafka_type`, tag and optionality): consecutive fixed-width
fields are packed by one `struct.Struct`, a nested entity is a call to its own generated writer,
and an entity whose tagged fields are all at their defaults writes its empty tag section as one
byte. The rules are kio's (kio/serial/_serialize.py and writers.py):

- a flexible version writes compact strings, bytes and arrays (unsigned varint length + 1, 0 for
  null), a classic one int16 (strings) or int32 (bytes, arrays) lengths, -1 for null; the
  request header's client id is always a classic nullable string;
- an optional nested entity that is not tagged is a marker byte (-1 null, 1 present) first;
- a tagged field is written only when it differs from its default (the field's, else kio's
  implicit default for its type), in tag order, each as tag, size, then the value.

`tests/wire/test_request_path_encode.py` compares the output with kio's writer for every request
and response class of every supported version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from dataclasses import Field, fields
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

Writer = Callable[[bytearray, Any], None]
"""Appends the encoding of one entity to the buffer."""

_FORMATS = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
    "float64": "d", "bool": "?", "error_code": "h",
    "timedelta_i32": "i", "timedelta_i64": "q", "datetime_i64": "q", "uuid": "16s",
}
_VARIABLE = ("string", "bytes", "records")
_ZERO_UUID = uuid.UUID(int=0).bytes
_SMALL = tuple(bytes((n,)) for n in range(128))
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def uvarint(value: int) -> bytes:
    """Kafka's unsigned varint (7 bits a byte, low bits first)."""
    if 0 <= value < 128:
        return _SMALL[value]
    if value < 0:
        raise ValueError(f"unsigned varint of {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_WRITERS: dict[type, Writer] = {}


def writer(entity_type: type) -> Writer:
    """The compiled writer of `entity_type` (built on first use, then cached)."""
    found = _WRITERS.get(entity_type)
    if found is None:
        found = _WRITERS[entity_type] = _compile(entity_type)
    return found


def encode(entity: Any) -> bytes:
    """One entity's bytes, as kio's `entity_writer(type(entity))` writes them."""
    out = bytearray()
    writer(type(entity))(out, entity)
    return bytes(out)


class _Source:
    """The source of one generated writer, with the objects it names."""

    def __init__(self, name: str) -> None:
        self.lines = [f"def {name}(out, e):"]
        self.names: dict[str, Any] = {"_uv": uvarint, "_SMALL": _SMALL, "_I16": _I16,
                                      "_I32": _I32, "_ZERO_UUID": _ZERO_UUID}
        self._run: list[tuple[str, str]] = []  # fixed-width fields not yet packed
        self._count = 0

    def name_of(self, value: Any, prefix: str) -> str:
        self._count += 1
        name = f"_{prefix}{self._count}"
        self.names[name] = value
        return name

    def local(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def fixed(self, fmt: str, expr: str) -> None:
        self._run.append((fmt, expr))

    def flush(self, indent: int) -> None:
        """Pack the pending run of fixed-width fields with one struct."""
        if not self._run:
            return
        packer = self.name_of(struct.Struct(">" + "".join(f for f, _ in self._run)), "S")
        self.emit(indent, f"out += {packer}.pack({', '.join(e for _, e in self._run)})")
        self._run = []


def _compile(entity_type: Any) -> Writer:
    name = f"write_{entity_type.__name__}"
    src = _Source(name)
    flexible = bool(entity_type.__flexible__)
    is_request_header = entity_type.__name__ == "RequestHeader"
    tagged: list[tuple[int, Field[Any]]] = []
    for f in fields(entity_type):
        tag = get_field_tag(f)
        if tag is not None:
            tagged.append((int(tag), f))
            continue
        legacy = is_request_header and f.name == "client_id"
        _field(src, 1, f, f"e.{f.name}", flexible and not legacy, is_optional(f) or legacy,
               allow_fixed_run=True)
    src.flush(1)
    if tagged and not flexible:
        raise ValueError("Found tagged fields on a non-flexible model")
    if flexible:
        _tagged(src, sorted(tagged, key=lambda t: t[0]))
    if len(src.lines) == 1:
        src.emit(1, "pass")
    code = compile("\n".join(src.lines) + "\n",
                   f"<kio writer {entity_type.__module__}.{entity_type.__qualname__}>", "exec")
    namespace = dict(src.names)
    exec(code, namespace)  # source generated above from kio's schema alone
    return namespace[name]  # type: ignore[no-any-return]


def _tagged(src: _Source, tagged: list[tuple[int, Field[Any]]]) -> None:
    if not tagged:
        src.emit(1, "out += b'\\x00'")
        return
    src.emit(1, "nt = 0")
    src.emit(1, "tb = bytearray()")
    for tag, f in tagged:
        default = src.name_of(get_tagged_field_default(f), "D")
        value = src.local("t")
        src.emit(1, f"{value} = e.{f.name}")
        # kio skips a field equal to its default with `==`; the same test here
        src.emit(1, f"if not ({value} == {default}):")
        src.emit(2, "nt += 1")
        src.emit(2, "b = bytearray()")
        # a tagged field is never null-marked: its absence is its null
        _field(src, 2, f, value, True, False, allow_fixed_run=False, out="b")
        src.emit(2, f"tb += _uv({tag})")
        src.emit(2, "tb += _uv(len(b))")
        src.emit(2, "tb += b")
    src.emit(1, "out += _uv(nt)")
    src.emit(1, "out += tb")


def _field(src: _Source, indent: int, f: Field[Any], value: str, flexible: bool,
           optional: bool, *, allow_fixed_run: bool, out: str = "out") -> None:
    kind = classify_field(f)
    if isinstance(kind, PrimitiveField):
        kafka_type = get_schema_field_type(f)
        fmt = _FORMATS.get(kafka_type)
        if fmt is not None:
            expr = _fixed_expr(kafka_type, optional, value, f.name)
            if allow_fixed_run and out == "out":
                src.fixed(fmt, expr)
            else:
                packer = src.name_of(struct.Struct(">" + fmt), "S")
                src.emit(indent, f"{out} += {packer}.pack({expr})")
            return
        src.flush(indent)
        _variable(src, indent, kafka_type, value, flexible, optional, out)
        return
    src.flush(indent)
    if isinstance(kind, EntityField):
        nested = src.name_of(writer(kind.type_), "W")
        if optional:
            v = src.local("v")
            src.emit(indent, f"{v} = {value}")
            src.emit(indent, f"if {v} is None:")
            src.emit(indent + 1, f"{out} += b'\\xff'")
            src.emit(indent, "else:")
            src.emit(indent + 1, f"{out} += b'\\x01'")
            src.emit(indent + 1, f"{nested}({out}, {v})")
        else:
            src.emit(indent, f"{nested}({out}, {value})")
        return
    items = src.local("a")
    src.emit(indent, f"{items} = {value}")
    src.emit(indent, f"if {items} is None:")
    src.emit(indent + 1, f"{out} += {_null_length(flexible, 4)}")
    src.emit(indent, "else:")
    if flexible:
        src.emit(indent + 1, f"{out} += _uv(len({items}) + 1)")
    else:
        src.emit(indent + 1, f"{out} += _I32.pack(len({items}))")
    item = src.local("x")
    src.emit(indent + 1, f"for {item} in {items}:")
    if isinstance(kind, EntityTupleField):
        nested = src.name_of(writer(kind.type_), "W")
        src.emit(indent + 2, f"{nested}({out}, {item})")
        return
    assert isinstance(kind, PrimitiveTupleField)
    kafka_type = get_schema_field_type(f)
    fmt = _FORMATS.get(kafka_type)
    if fmt is not None:
        packer = src.name_of(struct.Struct(">" + fmt), "S")
        src.emit(indent + 2,
                 f"{out} += {packer}.pack({_fixed_expr(kafka_type, False, item, f.name)})")
    else:
        _variable(src, indent + 2, kafka_type, item, flexible, False, out)


def _fixed_expr(kafka_type: str, optional: bool, value: str, name: str) -> str:
    if optional and kafka_type not in ("datetime_i64", "uuid"):
        raise NotImplementedError(f"no writer for optional {kafka_type} field {name}")
    if kafka_type.startswith("timedelta"):
        return f"round({value}.total_seconds() * 1000)"
    if kafka_type == "datetime_i64":
        expr = f"round({value}.timestamp() * 1000)"
        return f"(-1 if {value} is None else {expr})" if optional else expr
    if kafka_type == "uuid":
        return f"(_ZERO_UUID if {value} is None else {value}.bytes)"
    return value  # an int, or an ErrorCode (an IntEnum: packed as its value)


def _null_length(flexible: bool, width: int) -> str:
    if flexible:
        return "b'\\x00'"
    return "b'\\xff\\xff'" if width == 2 else "b'\\xff\\xff\\xff\\xff'"


def _variable(src: _Source, indent: int, kafka_type: str, value: str, flexible: bool,
              optional: bool, out: str) -> None:
    """A string, bytes or records value: its length, then its bytes."""
    if kafka_type not in _VARIABLE:
        raise NotImplementedError(f"no writer for kafka type {kafka_type!r}")
    is_string = kafka_type == "string"
    v = src.local("s")
    src.emit(indent, f"{v} = {value}")
    src.emit(indent, f"if {v} is None:")
    if optional:
        src.emit(indent + 1, f"{out} += {_null_length(flexible, 2 if is_string else 4)}")
    else:
        src.emit(indent + 1, "raise TypeError('Unexpectedly received None value')")
    src.emit(indent, "else:")
    if flexible:
        # kio's compact writer takes str or bytes for strings and bytes alike
        src.emit(indent + 1, f"if isinstance({v}, str):")
        src.emit(indent + 2, f"{v} = {v}.encode()")
        src.emit(indent + 1, f"{out} += _uv(len({v}) + 1)")
    elif is_string:
        src.emit(indent + 1, f"{v} = {v}.encode()")
        src.emit(indent + 1, f"{out} += _I16.pack(len({v}))")
    else:
        src.emit(indent + 1, f"{out} += _I32.pack(len({v}))")
    src.emit(indent + 1, f"{out} += {v}")

