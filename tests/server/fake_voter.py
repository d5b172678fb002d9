"""A scripted voter on the event loop of the test: it advertises narrowed version ranges, records
every request as it decoded it, and answers the Raft RPCs (granting every vote).

It plays an older Kafka controller: its ServerCodec accepts only the versions it advertises, so a
request above them is recorded in `refused` and closes the connection (as Kafka does), and an
ApiVersions request it does not know is answered v0 with UNSUPPORTED_VERSION and its table.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kio.schema.errors import ErrorCode

from reference_node.config import Endpoint
from reference_node.raft import messages as m
from reference_node.server import translate
from reference_node.wire import apis
from reference_node.wire.codec import Request, ServerCodec, encode_response
from reference_node.wire.errors import ProtocolError, UnsupportedVersion


class FakeVoter:
    def __init__(self, node_id: int, supported: dict[int, apis.VersionRange],
                 port: int = 0) -> None:
        self.node_id = node_id
        self.supported = supported
        self.port = port
        self.requests: list[Request] = []
        self.refused: list[UnsupportedVersion] = []
        self.leader_epoch = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint("127.0.0.1", self.port)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()

    def received(self, api_key: int) -> list[tuple[int, m.Request]]:
        """(version, decoded message) of each Raft request of `api_key`, in arrival order."""
        return [(r.api_version, translate.request_from_kio(r.api_key, r.body))
                for r in self.requests if r.api_key == api_key]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        codec = ServerCodec(supported=self.supported)
        self._writers.add(writer)
        try:
            while chunk := await reader.read(65536):
                codec.receive_data(chunk)
                while True:
                    try:
                        request = codec.next_request()
                    except UnsupportedVersion as exc:
                        self.refused.append(exc)
                        if exc.api_key != apis.API_VERSIONS or exc.correlation_id is None:
                            return
                        writer.write(encode_response(exc.correlation_id, apis.api_versions_response(
                            0, ErrorCode.unsupported_version, self.supported)))
                        continue
                    if request is None:
                        break
                    self.requests.append(request)
                    writer.write(codec.send(request.correlation_id, self._answer(request)))
                await writer.drain()
        except (ProtocolError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _answer(self, request: Request) -> Any:
        if request.api_key == apis.API_VERSIONS:
            return apis.api_versions_response(request.api_version, supported=self.supported)
        msg = translate.request_from_kio(request.api_key, request.body)
        response: m.Response
        if isinstance(msg, m.VoteRequest):
            # A pre-vote asks in the prospective's own epoch (Kafka's buildVoteRequest), as a
            # Vote does in the candidate's: the voter answers in that epoch either way.
            response = m.VoteResponse(ErrorCode.none, -1, msg.candidate_epoch, True)
        elif isinstance(msg, m.BeginQuorumEpochRequest):
            response = m.BeginQuorumEpochResponse(ErrorCode.none, msg.leader_id, msg.leader_epoch)
        elif isinstance(msg, m.EndQuorumEpochRequest):
            response = m.EndQuorumEpochResponse(ErrorCode.none, msg.leader_id, msg.leader_epoch)
        else:
            # A Fetch: the fake leads nothing, so it refuses it as a voter that is not the leader
            # does, naming no leader. (A node that knows no leader fetches from any voter, as
            # Kafka's unattached voters do: an answer naming the fake would make it a follower.)
            response = m.FetchResponse(ErrorCode.not_leader_or_follower, -1, self.leader_epoch,
                                       -1, 0)
        return translate.response_to_kio(request.api_key, request.api_version, response,
                                         self.node_id, self.endpoint)
