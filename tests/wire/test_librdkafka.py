"""The codec against a real third-party client: librdkafka's ApiVersions + Metadata handshake."""

from __future__ import annotations

import pytest

from .fake_server import FakeServer

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_module = pytest.importorskip("confluent_kafka.admin")


def test_librdkafka_lists_topics_from_our_server() -> None:
    with FakeServer() as server:
        admin = admin_module.AdminClient({
            "bootstrap.servers": f"127.0.0.1:{server.port}",
            "socket.timeout.ms": 5000,
        })
        metadata = admin.list_topics(timeout=5)
        assert "__cluster_metadata" in metadata.topics
        assert metadata.cluster_id == "test-cluster-id-000001"
        assert [b.id for b in metadata.brokers.values()] == [1]
        apis = {(r.api_key, r.api_version) for r in server.requests}
        assert any(key == 18 for key, _ in apis), apis
        assert any(key == 3 for key, _ in apis), apis
        # librdkafka sends ApiVersions v4, which we do not know; the KIP-511 fallback must
        # have brought it down to a version we answer.
        assert all(getattr(e, "api_key", None) == 18 for e in server.errors), server.errors
