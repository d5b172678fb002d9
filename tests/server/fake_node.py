"""`NodeApiFake`: every method of `client_api.NodeApi`, for the client-API tests' fakes to override.

A fake answers what its test reaches and inherits the rest: a node of the controller role only
(`is_controller`, and no broker status), and any other method raises, naming
itself, so that a test never passes on an answer nobody wrote for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import NoReturn

from reference_node.config import Endpoint
from reference_node.raft.api import (
    AddVoter,
    AppendReply,
    QuorumDescription,
    ReadReply,
    RemoveVoter,
    VoterChangeReply,
)
from reference_node.raft.lifecycle import BrokerStatus
from reference_node.raft.records import BrokerInfo
from reference_node.raft.voters import VoterSet


class NodeApiFake:
    node_id: int
    cluster_id: str

    def _unused(self, name: str) -> NoReturn:
        raise AssertionError(f"{type(self).__name__}.{name} is not part of this test")

    def leader_id(self) -> int | None:
        self._unused("leader_id")

    def epoch(self) -> int:
        self._unused("epoch")

    def high_watermark(self) -> int:
        self._unused("high_watermark")

    def log_start_offset(self) -> int:
        self._unused("log_start_offset")

    def log_end_offset(self) -> int:
        self._unused("log_end_offset")

    def voter_ids(self) -> list[int]:
        self._unused("voter_ids")

    def client_address(self, node_id: int) -> Endpoint | None:
        self._unused("client_address")

    def describe_quorum(self) -> QuorumDescription:
        self._unused("describe_quorum")

    def voter_set(self) -> VoterSet:
        self._unused("voter_set")

    def controller_listener(self) -> str:
        self._unused("controller_listener")

    def change_voters(self, make: Callable[[int], AddVoter | RemoveVoter]
                      ) -> Awaitable[VoterChangeReply]:
        self._unused("change_voters")

    def append(self, payloads: tuple[bytes, ...]) -> Awaitable[AppendReply]:
        self._unused("append")

    def read(self, from_offset: int) -> Awaitable[ReadReply]:
        self._unused("read")

    def read_image(self) -> Awaitable[ReadReply]:
        self._unused("read_image")

    def hw_changed(self) -> asyncio.Future[None]:
        self._unused("hw_changed")

    def is_controller(self) -> bool:
        return True

    def broker_status(self) -> BrokerStatus | None:
        return None

    def brokers_view(self) -> dict[int, BrokerInfo]:
        self._unused("brokers_view")
