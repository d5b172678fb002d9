"""The sans-I/O codec: framing, header versions, and that bad bytes only ever raise ProtocolError."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from reference_node.wire import (
    API_VERSIONS,
    DESCRIBE_QUORUM,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    SUPPORTED_APIS,
    ClientCodec,
    FrameSplitter,
    ProtocolError,
    ServerCodec,
    UnsupportedVersion,
    api_versions_response,
    decode_request,
    encode_request,
    encode_response,
    request_module,
)
from reference_node.wire.records import build_append_batch
from reference_node.wire.requests import (
    describe_quorum_request,
    fetch_request,
    list_offsets_request,
    metadata_request,
    produce_request,
)

from .fake_server import describe_quorum_response

BUILDERS = {
    METADATA: lambda v: metadata_request(v, ["t"]),
    DESCRIBE_QUORUM: describe_quorum_request,
    PRODUCE: lambda v: produce_request(v, build_append_batch([7])),
    FETCH: lambda v: fetch_request(v, 3, replica_id=2, last_fetched_epoch=1),
    LIST_OFFSETS: list_offsets_request,
}


def _all_versions() -> list[tuple[int, int]]:
    return [(key, v) for key in BUILDERS for v in range(SUPPORTED_APIS[key].min,
                                                         SUPPORTED_APIS[key].max + 1)]


@pytest.mark.parametrize(("api_key", "version"), _all_versions())
def test_every_supported_request_round_trips(api_key: int, version: int) -> None:
    message = BUILDERS[api_key](version)
    data = encode_request(41, message, "harness")
    request = decode_request(data[4:])
    assert (request.api_key, request.api_version, request.correlation_id) == (api_key, version, 41)
    assert request.client_id == "harness"
    assert request.body == message


def test_header_v2_for_flexible_versions_and_v1_otherwise() -> None:
    flexible = encode_request(1, metadata_request(9), "ab")
    classic = encode_request(1, metadata_request(8), "ab")
    # Both keep the classic client id string (int16 length); v2 adds an empty tag buffer.
    assert flexible[4 + 8:4 + 12] == b"\x00\x02ab" and flexible[4 + 12] == 0
    assert classic[4 + 8:4 + 12] == b"\x00\x02ab"


def test_api_versions_response_always_has_header_v0() -> None:
    data = encode_response(9, api_versions_response(3))
    # size, correlation id, then straight to the error code: no tagged-field byte in between.
    assert struct.unpack(">ih", data[4:10]) == (9, 0)
    other = encode_response(9, describe_quorum_response(0))
    assert other[8] == 0  # header v1: an empty tag buffer after the correlation id


def test_client_and_server_codecs_talk() -> None:
    client, server = ClientCodec("c"), ServerCodec()
    ids = []
    for version in (0, 3):
        cid, data = client.send(request_module(API_VERSIONS, version).ApiVersionsRequest(
            **({"client_software_name": "x", "client_software_version": "1"} if version else {})))
        ids.append(cid)
        # Byte by byte: the splitter must wait for whole frames.
        for i in range(len(data)):
            server.receive_data(data[i:i + 1])
    requests = [server.next_request(), server.next_request()]
    assert server.next_request() is None
    for request in requests:
        assert request is not None
        client.receive_data(server.send(request.correlation_id,
                                        api_versions_response(request.api_version)))
    got = [client.next_response(), client.next_response()]
    assert [g[0] for g in got if g] == ids
    assert client.next_response() is None


def test_frame_size_limits() -> None:
    splitter = FrameSplitter(max_size=10)
    splitter.receive_data(struct.pack(">i", 11))
    with pytest.raises(ProtocolError, match="frame size 11"):
        splitter.next_frame()
    splitter = FrameSplitter()
    splitter.receive_data(struct.pack(">i", -1))
    with pytest.raises(ProtocolError):
        splitter.next_frame()


def test_unsupported_version_carries_key_version_and_correlation_id() -> None:
    data = struct.pack(">hhih", METADATA, 13, 77, -1)
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(data)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (3, 13, 77)
    with pytest.raises(UnsupportedVersion):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


def test_unsupported_api_versions_is_answered_in_v0() -> None:
    server = ServerCodec()
    server.receive_data(struct.pack(">ihhih", 10, API_VERSIONS, 5, 5, -1) + b"\x00")
    with pytest.raises(UnsupportedVersion) as info:
        server.next_request()
    answer = server.send_unsupported(info.value)
    assert answer is not None
    client = ClientCodec("c")
    client._next_id = 5
    client.send(request_module(API_VERSIONS, 3).ApiVersionsRequest(
        client_software_name="x", client_software_version="1"))
    client.receive_data(answer)
    result = client.next_response()
    assert result is not None
    assert result[1].error_code == ErrorCode.unsupported_version
    assert {k.api_key for k in result[1].api_keys} == set(SUPPORTED_APIS)


def test_huge_array_length_is_an_error_not_a_crash() -> None:
    # kio's native decoder would reserve memory for 4 billion elements and abort the process.
    header = struct.pack(">hhih", METADATA, 12, 7, -1) + b"\x00"
    with pytest.raises(ProtocolError) as info:
        decode_request(header + b"\xff\xff\xff\xff\x0f")
    assert info.value.correlation_id == 7
    with pytest.raises(ProtocolError):
        decode_request(struct.pack(">hhih", METADATA, 1, 7, -1) + struct.pack(">i", 2**31 - 1))


SAMPLES = [encode_request(3, BUILDERS[k](v), "fuzz")[4:] for k, v in _all_versions()]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_frames_raise_only_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request(data)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SAMPLES), st.data())
def test_mutated_requests_raise_only_protocol_error(sample: bytes, data: st.DataObject) -> None:
    raw = bytearray(sample)
    cut = data.draw(st.integers(0, len(raw)))
    raw = raw[:cut] if data.draw(st.booleans()) else raw
    for _ in range(data.draw(st.integers(0, 4))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_request(bytes(raw))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_server_codec_stream_raises_only_protocol_error(stream: bytes) -> None:
    server = ServerCodec(max_frame_size=1 << 16)
    server.receive_data(stream)
    try:
        while server.next_request() is not None:
            pass
    except ProtocolError:
        pass
