"""A tiny Kafka-protocol server for tests, built only from the wire codec.

It answers ApiVersions, Metadata (itself as the only broker, one topic `__cluster_metadata`) and
DescribeQuorum (from a settable function); any other request closes the connection, as a
`ProtocolError` does. It runs its own event loop in a thread, so blocking clients can use it.
`supported` narrows what it advertises and accepts, to play an older server: a request outside it
closes the connection (an ApiVersions one is answered v0 with UNSUPPORTED_VERSION and that table,
as Kafka does).
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import uuid
from collections.abc import Callable
from dataclasses import fields
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i32Timedelta, i64

from reference_node.wire import (
    API_VERSIONS,
    DESCRIBE_QUORUM,
    METADATA,
    METADATA_TOPIC,
    ProtocolError,
    Request,
    ServerCodec,
    UnsupportedVersion,
    VersionRange,
    api_versions_response,
    encode_response,
    response_module,
)

CLUSTER_ID = "test-cluster-id-000001"


def make(cls: type[Any], **values: Any) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def metadata_response(version: int, node_id: int, host: str, port: int) -> Any:
    m = response_module(METADATA, version)
    partition = make(m.MetadataResponsePartition, error_code=ErrorCode.none,
                     partition_index=i32(0), leader_id=i32(node_id), leader_epoch=i32(1),
                     replica_nodes=(i32(node_id),), isr_nodes=(i32(node_id),),
                     offline_replicas=())
    topic = make(m.MetadataResponseTopic, error_code=ErrorCode.none, name=METADATA_TOPIC,
                 topic_id=uuid.UUID(int=1), is_internal=True, partitions=(partition,),
                 topic_authorized_operations=i32(-2147483648))
    broker = make(m.MetadataResponseBroker, node_id=i32(node_id), host=host, port=i32(port),
                  rack=None)
    return make(m.MetadataResponse,
                throttle_time=i32Timedelta.parse(datetime.timedelta(0)), brokers=(broker,),
                cluster_id=CLUSTER_ID, controller_id=i32(node_id), topics=(topic,),
                cluster_authorized_operations=i32(-2147483648))


def describe_quorum_response(version: int, *, error: ErrorCode = ErrorCode.none,
                             leader_id: int = 1, epoch: int = 5, hw: int = 10,
                             voters: tuple[tuple[int, int], ...] = ((1, 10), (2, 8), (3, 10)),
                             nodes: tuple[tuple[int, str, int], ...] = ()) -> Any:
    """voters: (id, log end offset); nodes (v2): (id, host, port)."""
    m = response_module(DESCRIBE_QUORUM, version)
    now = 1_700_000_000_000
    states = tuple(
        make(m.ReplicaState, replica_id=i32(rid), replica_directory_id=None,
             log_end_offset=i64(leo), last_fetch_timestamp=i64(-1 if rid == leader_id else now),
             last_caught_up_timestamp=i64(now - (hw - leo)))
        for rid, leo in voters)
    partition = make(m.PartitionData, partition_index=i32(0), error_code=error,
                     error_message=None, leader_id=i32(leader_id), leader_epoch=i32(epoch),
                     high_watermark=i64(hw), current_voters=states, observers=())
    node_list = tuple(
        m.Node(node_id=i32(nid), listeners=(m.Listener(name="CONTROLLER", host=h, port=p),))
        for nid, h, p in nodes) if version >= 2 else ()
    return make(m.DescribeQuorumResponse, error_code=ErrorCode.none, error_message=None,
                topics=(m.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),),
                nodes=node_list)


class FakeServer:
    """Start with `with FakeServer() as server:`; `server.port` is the bound port."""

    def __init__(self, node_id: int = 1,
                 supported: dict[int, VersionRange] | None = None) -> None:
        self.node_id = node_id
        self.supported = supported
        self.host = "127.0.0.1"
        self.port = 0
        self.describe_quorum: Callable[[int], Any] = describe_quorum_response
        self.requests: list[Request] = []
        self.errors: list[ProtocolError] = []
        self.delay = 0.0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(5)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        codec = ServerCodec(supported=self.supported)
        try:
            while chunk := await reader.read(65536):
                codec.receive_data(chunk)
                while True:
                    try:
                        request = codec.next_request()
                    except UnsupportedVersion as exc:
                        # Kafka answers an unknown ApiVersions version and keeps the connection.
                        self.errors.append(exc)
                        if exc.api_key != API_VERSIONS or exc.correlation_id is None:
                            return
                        answer = encode_response(exc.correlation_id, api_versions_response(
                            0, ErrorCode.unsupported_version, self.supported))
                        writer.write(answer)
                        continue
                    if request is None:
                        break
                    self.requests.append(request)
                    if self.delay:
                        await asyncio.sleep(self.delay)
                    response = self._answer(request)
                    if response is None:
                        return
                    writer.write(codec.send(request.correlation_id, response))
                await writer.drain()
        except ProtocolError as exc:
            self.errors.append(exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _answer(self, request: Request) -> Any:
        if request.api_key == API_VERSIONS:
            return api_versions_response(request.api_version, supported=self.supported)
        if request.api_key == METADATA:
            return metadata_response(request.api_version, self.node_id, self.host, self.port)
        if request.api_key == DESCRIBE_QUORUM:
            return self.describe_quorum(request.api_version)
        return None
