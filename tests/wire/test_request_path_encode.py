"""The compiled writers (wire/_encode.py) write kio's bytes exactly, for every message we send.

kio's own writer is the reference: each request and response class of every supported version,
and the headers, filled by Hypothesis from the classes' types (tagged fields off and on their
defaults, nulls, arrays), must come out byte for byte the same, or fail as kio fails.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer
from kio.static.primitive import Records

from reference_node.wire import _encode, apis
from reference_node.wire.codec import decode_request, encode_request, encode_response
from reference_node.wire.records import build_append_batch
from reference_node.wire.requests import produce_request

st.register_type_strategy(Records, st.binary(max_size=48))


def _classes() -> list[type[Any]]:
    out: list[type[Any]] = []
    for key, versions in sorted(apis.SUPPORTED_APIS.items()):
        for version in range(versions.min, versions.max + 1):
            out += [apis.request_class(key, version), apis.response_class(key, version)]
    return out + sorted({c.__header_schema__ for c in out}, key=lambda c: c.__module__)


CLASSES = _classes()


def _kio(entity: Any) -> bytes | type[BaseException]:
    buffer = io.BytesIO()
    try:
        entity_writer(type(entity))(buffer, entity)
    except Exception as exc:
        return type(exc)
    return buffer.getvalue()


def _ours(entity: Any) -> bytes | type[BaseException]:
    try:
        return _encode.encode(entity)
    except Exception as exc:
        return type(exc)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__.split('.', 2)[-1]}")
def test_every_message_class_is_written_as_kio_writes_it(cls: type[Any]) -> None:
    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck),
              database=None)
    @given(st.from_type(cls))
    def same(entity: Any) -> None:
        want = _kio(entity)
        got = _ours(entity)
        if isinstance(want, bytes):
            assert got == want
        else:
            assert not isinstance(got, bytes), f"kio fails with {want.__name__}, we wrote {got!r}"

    same()


def test_frames_round_trip_through_kio_reader() -> None:
    request = produce_request(apis.SUPPORTED_APIS[apis.PRODUCE].max, build_append_batch([5, 6]))
    frame = encode_request(9, request, "client")
    decoded = decode_request(frame[4:])
    assert (decoded.correlation_id, decoded.client_id, decoded.body) == (9, "client", request)
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    response = apis.api_versions_response(3)
    framed = encode_response(12, response)  # ApiVersions: response header v0, the id alone
    assert framed[4:8] == (12).to_bytes(4, "big")
    assert framed[8:] == _kio(response)


def test_a_correlation_id_outside_int32_is_refused() -> None:
    with pytest.raises(Exception):  # noqa: B017 - struct.error, as kio's i32() refused it
        encode_response(2**31, apis.api_versions_response(0))


def test_uvarint() -> None:
    assert [_encode.uvarint(n) for n in (0, 1, 127, 128, 300, 2**31 - 1)] == [
        b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xac\x02", b"\xff\xff\xff\xff\x07"]
    with pytest.raises(ValueError):
        _encode.uvarint(-1)
