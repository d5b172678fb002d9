"""The blocking and asyncio clients over real sockets on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from reference_node.wire import (
    API_VERSIONS,
    DESCRIBE_QUORUM,
    METADATA,
    SUPPORTED_APIS,
    AsyncKafkaConnection,
    ConnectFailed,
    ConnectionClosed,
    KafkaClient,
    RequestTimeout,
    VersionMismatch,
    VersionRange,
)
from reference_node.wire.requests import describe_quorum_request, metadata_request

from .fake_server import CLUSTER_ID, FakeServer


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_call_negotiates_the_highest_common_version() -> None:
    with FakeServer() as server, KafkaClient("127.0.0.1", server.port, "t", 5) as client:
        response = client.call(METADATA, lambda v: metadata_request(v, []))
        assert response.cluster_id == CLUSTER_ID
        assert client.version_for(DESCRIBE_QUORUM) == SUPPORTED_APIS[DESCRIBE_QUORUM].max
        assert [r.api_key for r in server.requests] == [API_VERSIONS, METADATA]
        assert server.requests[1].api_version == SUPPORTED_APIS[METADATA].max


def test_fixed_version_request_and_unsupported_version() -> None:
    with FakeServer() as server, KafkaClient("127.0.0.1", server.port) as client:
        assert client.request(describe_quorum_request(0)).topics[0].partitions[0].leader_id == 1
        with pytest.raises(VersionMismatch) as info:
            client.request(metadata_request(13))
        assert info.value.certainly_not_sent


def test_kip_511_fallback_when_server_does_not_know_our_api_versions() -> None:
    # a server that knows ApiVersions up to v3 (Kafka before KIP-853's v4), asked at our v4
    theirs = {**SUPPORTED_APIS, API_VERSIONS: VersionRange(0, 3)}
    ours = {**SUPPORTED_APIS, API_VERSIONS: VersionRange(0, 4)}
    with FakeServer(supported=theirs) as server, \
            KafkaClient("127.0.0.1", server.port, supported=ours) as c:
        assert METADATA in c.api_versions()
        assert [r.api_version for r in server.requests] == [3]
        assert server.errors and getattr(server.errors[0], "api_version", None) == 4


def test_connection_refused_is_certainly_not_sent() -> None:
    port = _free_port()
    with pytest.raises(ConnectFailed) as info:
        KafkaClient("127.0.0.1", port, timeout=2).call(METADATA, metadata_request)
    assert info.value.certainly_not_sent
    assert f"127.0.0.1:{port}" in str(info.value)


def test_timeout_after_sending_is_unknown_and_the_client_reconnects() -> None:
    with FakeServer() as server, KafkaClient("127.0.0.1", server.port, timeout=2) as client:
        client.api_versions()
        server.delay = 0.5
        with pytest.raises(RequestTimeout) as info:
            client.request(metadata_request(12), timeout=0.1)
        assert not info.value.certainly_not_sent
        server.delay = 0
        assert client.request(metadata_request(12)).cluster_id == CLUSTER_ID


def test_closed_connection_is_reported() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def accept_and_close() -> None:
        conn, _ = listener.accept()
        conn.recv(100)
        conn.close()

    thread = threading.Thread(target=accept_and_close)
    thread.start()
    try:
        with pytest.raises(ConnectionClosed) as info:
            KafkaClient("127.0.0.1", listener.getsockname()[1], timeout=2).call(
                METADATA, metadata_request)
        # The handshake failed, so the Metadata request itself never went out.
        assert info.value.certainly_not_sent
    finally:
        thread.join()
        listener.close()


def test_async_connection_pipelines_requests() -> None:
    async def run(port: int) -> None:
        async with await AsyncKafkaConnection.open("127.0.0.1", port, "node-2", 2) as conn:
            responses = await asyncio.gather(
                *(conn.request(describe_quorum_request(v % 3)) for v in range(10)))
            assert [type(r).__module__.split(".")[-2] for r in responses] == [
                f"v{v % 3}" for v in range(10)]

    with FakeServer() as server:
        asyncio.run(run(server.port))
        assert [r.correlation_id for r in server.requests] == list(range(10))


def test_async_timeout_then_close() -> None:
    async def run(server: FakeServer) -> None:
        conn = await AsyncKafkaConnection.open("127.0.0.1", server.port, "n", 2)
        server.delay = 0.3
        with pytest.raises(RequestTimeout):
            await conn.request(metadata_request(12), timeout=0.05)
        server.delay = 0
        # The late answer to the forgotten request is dropped; the next one still works.
        assert (await conn.request(metadata_request(12))).cluster_id == CLUSTER_ID
        await conn.close()
        with pytest.raises(ConnectionClosed):
            await conn.request(metadata_request(12))

    with FakeServer() as server:
        asyncio.run(run(server))


def test_async_connect_refused() -> None:
    with pytest.raises(ConnectFailed):
        asyncio.run(AsyncKafkaConnection.open("127.0.0.1", _free_port(), "n", 1))
