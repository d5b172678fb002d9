"""The Kafka wire protocol for the reference node, its harness client and `kraft quorum`.

Theory of operation
-------------------
Message types come from kio (classes generated from Kafka's own JSON schemas, one per API
version); this package only frames them and moves them.

- `codec` is sans-I/O, in the manner of h11: it cuts the byte stream into frames and turns them
  into requests and responses; anything the peer sends that we cannot accept raises
  `ProtocolError` (details: docs/internals/node.md#wire).
- `apis` holds the one table of what the node implements (`SUPPORTED_APIS`) and builds the
  ApiVersions response from it.
- `client.KafkaClient` is blocking (harness threads, CLIs); `aio.AsyncKafkaConnection` pipelines
  requests on an event loop (node-to-node RPCs). Their errors are `WireError`s whose
  `certainly_not_sent` says whether the request may have taken effect.
- `records` builds and reads RecordBatch v2 for the `append` workload (docs/contracts.md).
- `requests` builds the few requests the harness and the CLI send, for any supported version
  (KIP-853's voter changes among them).
"""

from .aio import AsyncKafkaConnection
from .apis import (
    ADD_RAFT_VOTER,
    API_NAMES,
    API_VERSIONS,
    BEGIN_QUORUM_EPOCH,
    BROKER_HEARTBEAT,
    BROKER_REGISTRATION,
    CLIENT_APIS,
    DESCRIBE_QUORUM,
    END_QUORUM_EPOCH,
    FETCH,
    FETCH_SNAPSHOT,
    LIST_OFFSETS,
    METADATA,
    METADATA_PARTITION,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    PRODUCE,
    REMOVE_RAFT_VOTER,
    SUPPORTED_APIS,
    UPDATE_RAFT_VOTER,
    VOTE,
    VersionRange,
    api_versions_response,
    request_class,
    request_module,
    response_class,
    response_module,
)
from .client import KafkaClient
from .codec import (
    MAX_FRAME_SIZE,
    ClientCodec,
    FrameSplitter,
    Request,
    ServerCodec,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    unsupported_api_versions_response,
)
from .errors import (
    BadResponse,
    ConnectFailed,
    ConnectionClosed,
    ProtocolError,
    RequestTimeout,
    UnsupportedVersion,
    VersionMismatch,
    WireError,
)

__all__ = [
    "ADD_RAFT_VOTER",
    "API_NAMES",
    "API_VERSIONS",
    "BEGIN_QUORUM_EPOCH",
    "BROKER_HEARTBEAT",
    "BROKER_REGISTRATION",
    "CLIENT_APIS",
    "DESCRIBE_QUORUM",
    "END_QUORUM_EPOCH",
    "FETCH",
    "FETCH_SNAPSHOT",
    "LIST_OFFSETS",
    "MAX_FRAME_SIZE",
    "METADATA",
    "METADATA_PARTITION",
    "METADATA_TOPIC",
    "METADATA_TOPIC_ID",
    "PRODUCE",
    "REMOVE_RAFT_VOTER",
    "SUPPORTED_APIS",
    "UPDATE_RAFT_VOTER",
    "VOTE",
    "AsyncKafkaConnection",
    "BadResponse",
    "ClientCodec",
    "ConnectFailed",
    "ConnectionClosed",
    "FrameSplitter",
    "KafkaClient",
    "ProtocolError",
    "Request",
    "RequestTimeout",
    "ServerCodec",
    "UnsupportedVersion",
    "VersionMismatch",
    "VersionRange",
    "WireError",
    "api_versions_response",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "request_class",
    "request_module",
    "response_class",
    "response_module",
    "unsupported_api_versions_response",
]
