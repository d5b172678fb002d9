"""A blocking Kafka client over one socket: one request at a time, for threads and CLIs.

The connection opens lazily on the first request and asks ApiVersions once; after any error it is
dropped, and the next request reconnects. Errors say whether the request certainly never left
(`WireError.certainly_not_sent`): a connect failure, or a failure of the ApiVersions handshake
before the request was written, means the operation had no effect.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from ssl import SSLContext, SSLError
from typing import Any

from kio.schema.errors import ErrorCode

from .apis import API_VERSIONS, CLIENT_APIS, VersionRange, negotiate, request_module
from .codec import MAX_FRAME_SIZE, ClientCodec
from .errors import (
    BadResponse,
    ConnectFailed,
    ConnectionClosed,
    ProtocolError,
    RequestTimeout,
    VersionMismatch,
    WireError,
)

_RECV_SIZE = 65536


class KafkaClient:
    """Blocking client of one Kafka-protocol server.

    `request(message)` sends a kio request object of a fixed version. `call(api_key, build)`
    picks the highest version both sides support and sends `build(version)`. Both return the kio
    response or raise a `WireError`; a response's own error codes are the caller's to read.
    Safe to share between threads (requests are serialised), though one per thread is simpler.
    `supported` is what we speak (default `apis.CLIENT_APIS`: Fetch names topics, up to v12).
    With `ssl` the connection is TLS (`reference_node.wire.tls.client_context`), and the server's
    certificate must name `host` unless that context's hostname check is off.
    """

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "kraft",
        timeout: float = 5.0,
        *,
        max_frame_size: int = MAX_FRAME_SIZE,
        supported: dict[int, VersionRange] | None = None,
        ssl: SSLContext | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout = timeout
        self.address = f"{host}:{port}"
        self._max_frame_size = max_frame_size
        self._ours = CLIENT_APIS if supported is None else supported
        self._ssl = ssl
        self._sock: socket.socket | None = None
        self._codec: ClientCodec | None = None
        self._theirs: dict[int, VersionRange] | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
                self._codec = None
                self._theirs = None

    def api_versions(self, timeout: float | None = None) -> dict[int, VersionRange]:
        """The server's supported versions (connecting and asking if not yet known)."""
        with self._lock:
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
            self._ensure_connected(deadline)
            assert self._theirs is not None
            return dict(self._theirs)

    def version_for(self, api_key: int, timeout: float | None = None) -> int:
        """The highest version of `api_key` both sides support; VersionMismatch if none."""
        theirs = self.api_versions(timeout).get(api_key)
        ours = self._ours.get(api_key)
        if theirs is None or ours is None:
            raise VersionMismatch(f"{self.address} or we do not support api key {api_key}",
                                  self.address)
        try:
            return negotiate(ours, theirs, api_key)
        except ValueError as exc:
            raise VersionMismatch(str(exc), self.address) from None

    def call(self, api_key: int, build: Callable[[int], Any], timeout: float | None = None) -> Any:
        """Send `build(version)` at the best common version of `api_key`; its response."""
        start = time.monotonic()
        version = self.version_for(api_key, timeout)
        remaining = None if timeout is None else max(0.0, timeout - (time.monotonic() - start))
        return self.request(build(version), timeout=remaining)

    def request(self, message: Any, timeout: float | None = None) -> Any:
        """Send one kio request object and wait for its response."""
        with self._lock:
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
            self._ensure_connected(deadline)
            theirs = self._theirs or {}
            versions = theirs.get(int(message.__api_key__))
            if versions is None or int(message.__version__) not in versions:
                raise VersionMismatch(
                    f"{self.address} does not support api key {message.__api_key__} "
                    f"version {message.__version__}", self.address)
            return self._exchange(message, deadline)

    # -- internals; callers hold the lock

    def _ensure_connected(self, deadline: float) -> None:
        if self._sock is not None:
            return
        try:
            sock = socket.create_connection((self.host, self.port),
                                            timeout=max(0.001, deadline - time.monotonic()))
        except ConnectionRefusedError:
            raise ConnectFailed(f"connection to {self.address} refused", self.address) from None
        except TimeoutError:
            raise ConnectFailed(f"connecting to {self.address} timed out", self.address) from None
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {self.address}: {exc}", self.address) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self._ssl is not None:
            sock = self._tls_handshake(sock, deadline)
        self._sock = sock
        self._codec = ClientCodec(self.client_id, self._max_frame_size)
        try:
            self._theirs = self._handshake(deadline)
        except WireError as exc:
            # The caller's request has not been written yet, whatever happened to ApiVersions.
            exc.certainly_not_sent = True
            raise

    def _tls_handshake(self, sock: socket.socket, deadline: float) -> socket.socket:
        """The TLS socket over `sock`; ConnectFailed (nothing sent) when the handshake fails.

        With TLS 1.3 a server refuses our certificate only after our side has finished: that
        refusal arrives as a failed first read (ConnectionClosed of the ApiVersions request)."""
        assert self._ssl is not None
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            return self._ssl.wrap_socket(sock, server_hostname=self.host)
        except TimeoutError:
            sock.close()
            raise ConnectFailed(f"TLS handshake with {self.address} timed out",
                                self.address) from None
        except (SSLError, OSError) as exc:
            sock.close()
            raise ConnectFailed(f"TLS handshake with {self.address} failed: {exc}",
                                self.address) from None

    def _handshake(self, deadline: float) -> dict[int, VersionRange]:
        ours = self._ours.get(API_VERSIONS, VersionRange(0, 3))
        version = ours.max
        for _ in range(2):
            module = request_module(API_VERSIONS, version)
            if version >= 3:
                message = module.ApiVersionsRequest(client_software_name="kraft-jepsen",
                                                    client_software_version="0.1.0")
            else:
                message = module.ApiVersionsRequest()
            response = self._exchange(message, deadline)
            if response.error_code == ErrorCode.unsupported_version:
                # KIP-511: the server answered v0 with its own range; retry within it.
                theirs = {int(k.api_key): k for k in response.api_keys}
                entry = theirs.get(API_VERSIONS)
                if entry is None:
                    break
                version = min(ours.max, int(entry.max_version))
                continue
            if response.error_code != ErrorCode.none:
                self.close()
                raise BadResponse(f"{self.address} answered ApiVersions with "
                                  f"{response.error_code.name}", self.address)
            return {
                int(k.api_key): VersionRange(int(k.min_version), int(k.max_version))
                for k in response.api_keys
                if 0 <= k.min_version <= k.max_version
            }
        self.close()
        raise VersionMismatch(f"{self.address} supports no ApiVersions version we speak",
                              self.address)

    def _exchange(self, message: Any, deadline: float) -> Any:
        sock, codec = self._sock, self._codec
        assert sock is not None and codec is not None
        correlation_id, data = codec.send(message)
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            sock.sendall(data)
        except TimeoutError:
            self.close()
            raise RequestTimeout(f"sending to {self.address} timed out", self.address) from None
        except OSError as exc:
            self.close()
            raise ConnectionClosed(f"connection to {self.address} lost while sending: {exc}",
                                   self.address) from None
        while True:
            try:
                answer = codec.next_response()
            except ProtocolError as exc:
                self.close()
                raise BadResponse(f"bad response from {self.address}: {exc}",
                                  self.address) from None
            if answer is not None:
                got_id, response = answer
                if got_id != correlation_id:
                    self.close()
                    raise BadResponse(f"{self.address} answered correlation id {got_id}, "
                                      f"expected {correlation_id}", self.address)
                return response
            self._receive_some(sock, codec, deadline)

    def _receive_some(self, sock: socket.socket, codec: ClientCodec, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self.close()
            raise RequestTimeout(f"no response from {self.address} in time", self.address)
        try:
            sock.settimeout(remaining)
            chunk = sock.recv(_RECV_SIZE)
        except TimeoutError:
            self.close()
            raise RequestTimeout(f"no response from {self.address} in time",
                                 self.address) from None
        except OSError as exc:
            self.close()
            raise ConnectionClosed(f"connection to {self.address} lost: {exc}",
                                   self.address) from None
        if not chunk:
            self.close()
            raise ConnectionClosed(f"{self.address} closed the connection", self.address)
        codec.receive_data(chunk)
