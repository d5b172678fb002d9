"""The async connection asks ApiVersions first and picks per API the highest common version."""

from __future__ import annotations

import asyncio

import pytest

from reference_node.wire import (
    API_VERSIONS,
    DESCRIBE_QUORUM,
    FETCH,
    METADATA,
    SUPPORTED_APIS,
    VOTE,
    VersionRange,
)
from reference_node.wire.aio import AsyncKafkaConnection, choose_version
from reference_node.wire.errors import VersionMismatch
from reference_node.wire.requests import describe_quorum_request

from .fake_server import FakeServer

OLD = {
    API_VERSIONS: VersionRange(0, 2),
    METADATA: VersionRange(1, 9),
    DESCRIBE_QUORUM: VersionRange(0, 1),
    FETCH: VersionRange(4, 11),
}


def test_handshake_reads_the_servers_ranges() -> None:
    async def run(port: int) -> None:
        async with await AsyncKafkaConnection.open("127.0.0.1", port, "n", 2) as conn:
            assert conn.api_versions is None
            assert await conn.handshake() == SUPPORTED_APIS
            assert conn.version_for(DESCRIBE_QUORUM, SUPPORTED_APIS[DESCRIBE_QUORUM]) == 2

    with FakeServer() as server:
        asyncio.run(run(server.port))
        assert [(r.api_key, r.api_version) for r in server.requests] == [
            (API_VERSIONS, SUPPORTED_APIS[API_VERSIONS].max)]


def test_older_server_kip_511_retry_and_lower_versions() -> None:
    """A server that knows ApiVersions up to v2 answers our v3 with UNSUPPORTED_VERSION (v0) and
    its range: the connection asks again at v2, then sends each API at the server's maximum."""
    async def run(port: int) -> None:
        async with await AsyncKafkaConnection.open("127.0.0.1", port, "n", 2) as conn:
            assert await conn.handshake() == OLD
            version = conn.version_for(DESCRIBE_QUORUM, SUPPORTED_APIS[DESCRIBE_QUORUM])
            assert version == 1
            response = await conn.request(describe_quorum_request(version))
            assert type(response).__module__.split(".")[-2] == "v1"

    with FakeServer(supported=OLD) as server:
        asyncio.run(run(server.port))
        assert [type(e).__name__ for e in server.errors] == ["UnsupportedVersion"]
        assert [(r.api_key, r.api_version) for r in server.requests] == [
            (API_VERSIONS, 2), (DESCRIBE_QUORUM, 1)]


def test_no_common_version_is_refused_before_sending() -> None:
    async def run(port: int) -> None:
        async with await AsyncKafkaConnection.open("127.0.0.1", port, "n", 2) as conn:
            await conn.handshake()
            with pytest.raises(VersionMismatch) as info:
                conn.version_for(FETCH, VersionRange(12, 12))
            message = str(info.value)
            assert "Fetch" in message and "ours 12..12" in message and "theirs 4..11" in message
            assert info.value.certainly_not_sent
            with pytest.raises(VersionMismatch, match="does not support Vote"):
                conn.version_for(VOTE, SUPPORTED_APIS[VOTE])
            # A message of a version the server lacks never leaves; the connection stays usable.
            with pytest.raises(VersionMismatch):
                await conn.request(describe_quorum_request(2))
            assert not conn.closed
            await conn.request(describe_quorum_request(0))

    with FakeServer(supported=OLD) as server:
        asyncio.run(run(server.port))
        assert [(r.api_key, r.api_version) for r in server.requests] == [
            (API_VERSIONS, 2), (DESCRIBE_QUORUM, 0)]
        assert server.errors == [server.errors[0]]  # only the ApiVersions v3 retry


@pytest.mark.parametrize(("ours", "theirs", "expected"), [
    (VersionRange(0, 2), VersionRange(0, 0), 0),
    (VersionRange(0, 2), VersionRange(0, 5), 2),
    (VersionRange(2, 2), VersionRange(0, 1), None),
    (VersionRange(12, 12), VersionRange(4, 12), 12),
    (VersionRange(3, 9), VersionRange(5, 7), 7),
    (VersionRange(3, 9), VersionRange(0, 2), None),
    (VersionRange(0, 1), None, None),
])
def test_version_choice(ours: VersionRange, theirs: VersionRange | None,
                        expected: int | None) -> None:
    table = {} if theirs is None else {VOTE: theirs}
    if expected is not None:
        assert choose_version(VOTE, ours, table) == expected
        return
    with pytest.raises(VersionMismatch) as info:
        choose_version(VOTE, ours, table, "h:1")
    assert info.value.certainly_not_sent
    assert "Vote" in str(info.value) and f"ours {ours.min}..{ours.max}" in str(info.value)
    if theirs is not None:
        assert f"theirs {theirs.min}..{theirs.max}" in str(info.value)


def test_server_without_any_api_versions_we_speak() -> None:
    async def run(port: int) -> None:
        async with await AsyncKafkaConnection.open("127.0.0.1", port, "n", 2) as conn:
            with pytest.raises(VersionMismatch) as info:
                await conn.handshake(ours=VersionRange(3, 3))
            assert info.value.certainly_not_sent

    with FakeServer(supported=OLD) as server:
        asyncio.run(run(server.port))
