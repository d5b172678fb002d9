"""The errors of the wire layer: whose fault, and what a caller may conclude.

`ProtocolError` (and its `UnsupportedVersion`) is raised by the sans-I/O codec for bytes the peer
sent that we cannot accept. The `WireError` family is raised by the clients; each carries
`certainly_not_sent`, which a test harness needs to tell "this operation had no effect" (a `fail`)
from "it may have taken effect" (an `info`).
"""

from __future__ import annotations


class ProtocolError(Exception):
    """The peer sent bytes that are not a valid Kafka message for us.

    `correlation_id` is set when the header was read far enough to know it, so that a server can
    answer that one request (or at least log which one) before closing the connection.
    """

    def __init__(self, message: str, correlation_id: int | None = None) -> None:
        super().__init__(message)
        self.correlation_id = correlation_id


class UnsupportedVersion(ProtocolError):
    """A well-formed request header for an API key or version we do not implement.

    A server answers an ApiVersions request of an unknown version with
    `codec.unsupported_api_versions_response`; for any other API, Kafka closes the connection.
    On the client side it also means: the server does not support any version we could send.
    """

    def __init__(self, api_key: int, api_version: int, correlation_id: int | None = None) -> None:
        super().__init__(
            f"unsupported api key {api_key} version {api_version}", correlation_id
        )
        self.api_key = api_key
        self.api_version = api_version


class WireError(Exception):
    """A request made by a client did not get a response.

    `certainly_not_sent` is True only when no byte of the request left this process (the
    connection could not be made, or failed before the request was written): the request had
    no effect. Otherwise its effect is unknown.
    """

    certainly_not_sent: bool = False

    def __init__(self, message: str, address: str = "", *, certainly_not_sent: bool = False) -> None:
        super().__init__(message)
        self.address = address
        self.certainly_not_sent = certainly_not_sent


class ConnectFailed(WireError):
    """The TCP connection could not be established (refused, unreachable, connect timeout)."""

    def __init__(self, message: str, address: str = "") -> None:
        super().__init__(message, address, certainly_not_sent=True)


class RequestTimeout(WireError):
    """No response within the timeout."""


class ConnectionClosed(WireError):
    """The connection closed (or reset) before the response arrived."""


class BadResponse(WireError):
    """The peer answered with bytes we could not decode; the connection is dropped."""


class VersionMismatch(WireError):
    """The server supports no version of this API that we can speak; nothing was sent."""

    def __init__(self, message: str, address: str = "") -> None:
        super().__init__(message, address, certainly_not_sent=True)
