"""Sans-I/O Kafka framing: bytes in, kio messages out, and back. No sockets here.

A Kafka message on the wire is a 4-byte big-endian size, then a header, then the body. A request
header is v1 (non-flexible API versions) or v2 (flexible ones, with tagged fields); the client id is
always a classic nullable string. A response header is v0 or v1 likewise, except that ApiVersions
responses always use v0 so that a client can read one whatever version it asked for. kio's classes
say which header each message uses (`__header_schema__`), so the rules live in kio's schema.

`ServerCodec` and `ClientCodec` are the h11-style faces: `receive_data(bytes)`, then
`next_request()` / `next_response()` until None; `send...` returns the bytes to write. Whatever the
peer sends, decoding raises `ProtocolError` (or its `UnsupportedVersion`) and nothing else;
an exception of any other type is a bug in this module.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kio.index import KioIndexError
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from ._encode import writer as _writer
from ._guard import checker as _checker
from .apis import API_VERSIONS, SUPPORTED_APIS, VersionRange, api_versions_response
from .apis import request_class as _request_class
from .apis import response_class as _response_class
from .errors import ProtocolError, UnsupportedVersion

MAX_FRAME_SIZE = 100 * 1024 * 1024
"""Largest frame accepted by default: Kafka's socket.request.max.bytes (104857600)."""

_SIZE = struct.Struct(">i")
_HEADER_START = struct.Struct(">hhi")  # api_key, api_version, correlation_id


@dataclass(frozen=True, slots=True)
class Request:
    """One decoded request: its header fields and the kio request object."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


class FrameSplitter:
    """Cuts a byte stream into size-prefixed frames (the size prefix is not part of a frame)."""

    def __init__(self, max_size: int = MAX_FRAME_SIZE) -> None:
        self.max_size = max_size
        self._buffer = bytearray()

    def receive_data(self, data: bytes) -> None:
        self._buffer += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as a frame."""
        return len(self._buffer)

    def incomplete_frame_size(self) -> int | None:
        """Bytes (prefix included) of the frame under way when its prefix is in and the rest is
        not, else None: what a server must be ready to hold before it reads on. ProtocolError on
        a bad size, before a byte more of that frame is read."""
        if len(self._buffer) < _SIZE.size:
            return None
        end = _SIZE.size + self._size()
        return end if len(self._buffer) < end else None

    def _size(self) -> int:
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        if size < 0 or size > self.max_size:
            raise ProtocolError(f"frame size {size} outside 0..{self.max_size}")
        return int(size)

    def next_frame(self) -> bytes | None:
        """The next whole frame, or None until more bytes arrive; ProtocolError on a bad size."""
        if len(self._buffer) < _SIZE.size:
            return None
        end = _SIZE.size + self._size()
        if len(self._buffer) < end:
            return None
        with memoryview(self._buffer) as view:
            frame = bytes(view[_SIZE.size : end])  # one copy: a slice of the bytearray is another
        del self._buffer[:end]
        return frame


def frame(payload: bytes) -> bytes:
    """`payload` with its size prefix."""
    return _SIZE.pack(len(payload)) + payload


_READERS: dict[type, Any] = {}


def _reader(entity_type: type) -> Any:
    reader = _READERS.get(entity_type)
    if reader is None:
        reader = _READERS[entity_type] = entity_reader(entity_type)
    return reader


def _decode_entity(entity_type: type[Any], data: bytes, offset: int, what: str | None,
                   correlation_id: int | None) -> tuple[Any, int]:
    """One entity at `offset` and the offset after it; `what` names it in errors (None: the
    body of its type, a name made only when there is an error to name)."""
    try:
        _checker(entity_type)(data, offset, len(data))
        entity, size = _reader(entity_type)(data, offset)
    except ProtocolError as exc:
        raise ProtocolError(f"malformed {_what(entity_type, what)}: {exc}",
                            correlation_id) from None
    except Exception as exc:
        # kio raises DecodeError, ValueError, UnicodeDecodeError, OverflowError... for bad bytes;
        # the caller only needs to know the peer is at fault.
        raise ProtocolError(f"malformed {_what(entity_type, what)}: {type(exc).__name__}: {exc}",
                            correlation_id) from exc
    return entity, offset + size


def _what(entity_type: type[Any], what: str | None) -> str:
    return f"{entity_type.__name__} body" if what is None else what


def _framed(header: Any, body: Any) -> bytes:
    """Size prefix, header and body, written into one buffer (kio's bytes: `_encode`)."""
    out = bytearray(_SIZE.size)
    _writer(type(header))(out, header)
    _writer(type(body))(out, body)
    _SIZE.pack_into(out, 0, len(out) - _SIZE.size)
    return bytes(out)


def peek_request_header(data: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request frame: the fields every header has."""
    if len(data) < _HEADER_START.size:
        raise ProtocolError(f"request frame of {len(data)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _HEADER_START.unpack_from(data, 0)
    return api_key, api_version, correlation_id


def decode_request(data: bytes, supported: dict[int, VersionRange] | None = None) -> Request:
    """Decode one request frame into a `Request`.

    Raises `UnsupportedVersion` when the header names an API key or version outside `supported`
    (default SUPPORTED_APIS) or unknown to kio, and `ProtocolError` for anything malformed.
    """
    table = SUPPORTED_APIS if supported is None else supported
    api_key, api_version, correlation_id = peek_request_header(data)
    versions = table.get(api_key)
    if versions is None or api_version not in versions:
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    try:
        body_type = _request_class(api_key, api_version)
    except KioIndexError:
        raise UnsupportedVersion(api_key, api_version, correlation_id) from None
    header, offset = _decode_entity(body_type.__header_schema__, data, 0, "request header",
                                    correlation_id)
    # Bytes after the body are ignored, as Kafka's brokers do: librdkafka 2.x sends three
    # extra bytes after a Metadata v12 request for all topics.
    body, offset = _decode_entity(body_type, data, offset, None,
                                  correlation_id)
    return Request(api_key, api_version, correlation_id, header.client_id, body)


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A framed response (size prefix, header of the version the response class names, body)."""
    # a correlation id outside int32 fails in the writer's struct, as kio's i32() would fail
    return _framed(response.__header_schema__(correlation_id=correlation_id), response)


def encode_request(correlation_id: int, request: Any, client_id: str | None) -> bytes:
    """A framed request for a kio request object (its class fixes the API key and version)."""
    header = request.__header_schema__(
        request_api_key=request.__api_key__,
        request_api_version=request.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return _framed(header, request)


def response_correlation_id(data: bytes) -> int:
    """The correlation id of a response frame (the first field of every response header)."""
    if len(data) < 4:
        raise ProtocolError(f"response frame of {len(data)} bytes is shorter than a header")
    (correlation_id,) = _SIZE.unpack_from(data, 0)
    return int(correlation_id)


def decode_response(data: bytes, response_type: type[Any]) -> tuple[int, Any]:
    """(correlation_id, kio response) of a response frame known to be of `response_type`."""
    correlation_id = response_correlation_id(data)
    _, offset = _decode_entity(response_type.__header_schema__, data, 0, "response header",
                               correlation_id)
    body, _ = _decode_entity(response_type, data, offset, None, correlation_id)
    return correlation_id, body


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """Kafka's answer to an ApiVersions request of a version it does not know (KIP-511):
    a v0 response with UNSUPPORTED_VERSION and the supported list."""
    return encode_response(
        correlation_id, api_versions_response(0, ErrorCode.unsupported_version)
    )


def _fallback_type(response_type: type[Any], data: bytes) -> type[Any]:
    # A server that does not know the ApiVersions version we asked for answers in v0 with
    # UNSUPPORTED_VERSION (KIP-511); its header is v0 whatever the version, so the error code
    # sits right after the correlation id.
    if (response_type.__api_key__ == API_VERSIONS and response_type.__version__ > 0
            and len(data) >= 6
            and struct.unpack_from(">h", data, 4)[0] == ErrorCode.unsupported_version):
        return _response_class(API_VERSIONS, 0)
    return response_type


class ServerCodec:
    """One server connection's codec: feed bytes, take requests, turn responses into bytes."""

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE,
                 supported: dict[int, VersionRange] | None = None) -> None:
        self._frames = FrameSplitter(max_frame_size)
        self._supported = supported

    def receive_data(self, data: bytes) -> None:
        self._frames.receive_data(data)

    def incomplete_frame_size(self) -> int | None:
        """See `FrameSplitter.incomplete_frame_size`."""
        return self._frames.incomplete_frame_size()

    def next_request(self) -> Request | None:
        """The next whole request, or None until more bytes arrive.

        After a `ProtocolError` from a bad size the stream is lost and the connection should
        close; after one from a bad frame, the frame is consumed and the next one can be read
        (Kafka still closes; the choice is the server's).
        """
        data = self._frames.next_frame()
        return None if data is None else decode_request(data, self._supported)

    def send(self, correlation_id: int, response: Any) -> bytes:
        return encode_response(correlation_id, response)

    def send_unsupported(self, error: UnsupportedVersion) -> bytes | None:
        """Bytes answering an `UnsupportedVersion`, or None when Kafka would just close."""
        if error.api_key == API_VERSIONS and error.correlation_id is not None:
            return unsupported_api_versions_response(error.correlation_id)
        return None


class ClientCodec:
    """One client connection's codec: numbers requests and matches responses to them.

    Responses may be awaited out of order by the caller, but Kafka answers one connection's
    requests in order; the codec only needs each in-flight id's response class.
    """

    def __init__(self, client_id: str | None, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self.client_id = client_id
        self._frames = FrameSplitter(max_frame_size)
        self._next_id = 0
        self._in_flight: dict[int, type[Any]] = {}

    def send(self, request: Any) -> tuple[int, bytes]:
        """(correlation_id, bytes to write) for a kio request object."""
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF
        data = encode_request(correlation_id, request, self.client_id)
        self._in_flight[correlation_id] = _response_class(request.__api_key__, request.__version__)
        return correlation_id, data

    def forget(self, correlation_id: int) -> None:
        """Stop waiting for a response (its request timed out); a late one is then dropped."""
        if correlation_id in self._in_flight:
            self._in_flight[correlation_id] = type(None)

    def receive_data(self, data: bytes) -> None:
        self._frames.receive_data(data)

    def next_response(self) -> tuple[int, Any] | None:
        """(correlation_id, response) of the next whole response frame, or None.

        A late response to a forgotten request is consumed and skipped. An id never sent is
        a `ProtocolError`.
        """
        while (data := self._frames.next_frame()) is not None:
            correlation_id = response_correlation_id(data)
            response_type = self._in_flight.pop(correlation_id, None)
            if response_type is None:
                raise ProtocolError(f"response to unknown correlation id {correlation_id}",
                                    correlation_id)
            if response_type is type(None):
                continue
            return decode_response(data, _fallback_type(response_type, data))
        return None

    @property
    def in_flight(self) -> int:
        return sum(1 for t in self._in_flight.values() if t is not type(None))
