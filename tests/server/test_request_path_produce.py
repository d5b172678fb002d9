"""The Produce path's wait for the commit (client_api `_committed`): the answer at the commit, or
REQUEST_TIMED_OUT at the request's timeout, the append left to go on when the request is
cancelled, a failed append failing the request, and no task per request."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from reference_node.raft.api import AppendReply
from reference_node.raft.messages import ErrorCode
from reference_node.server.client_api import ClientApi
from reference_node.wire import PRODUCE, SUPPORTED_APIS
from reference_node.wire.codec import Request
from reference_node.wire.records import build_append_batch
from reference_node.wire.requests import produce_request

from .fake_node import NodeApiFake

VERSION = SUPPORTED_APIS[PRODUCE].max


class Node(NodeApiFake):
    """A leader whose appends commit when the test says so."""

    node_id = 1
    cluster_id = "MkU3OEVBNTcwNTJENDM2Qk"

    def __init__(self) -> None:
        self.appends: list[asyncio.Future[AppendReply]] = []

    def leader_id(self) -> int:
        return 1

    def log_start_offset(self) -> int:
        return 0

    def append(self, payloads: tuple[bytes, ...]) -> asyncio.Future[AppendReply]:
        self.appends.append(asyncio.get_running_loop().create_future())
        return self.appends[-1]


def client_api(node: Node) -> ClientApi:
    return ClientApi(node)


def produce(api: ClientApi, timeout_ms: int = 5000) -> asyncio.Task[Any]:
    body = produce_request(VERSION, build_append_batch([1]), timeout_ms=timeout_ms)
    return asyncio.ensure_future(api.handlers[PRODUCE](Request(PRODUCE, VERSION, 1, "t", body)))


def partition(response: Any) -> Any:
    return response.responses[0].partition_responses[0]


def test_answered_at_the_commit() -> None:
    async def run() -> Any:
        node = Node()
        asked = produce(client_api(node))
        await asyncio.sleep(0.01)
        assert not asked.done()
        node.appends[0].set_result(AppendReply(0, ErrorCode.none, (41,)))
        return partition(await asked)

    part = asyncio.run(run())
    assert (part.error_code, part.base_offset) == (ErrorCode.none, 41)


def test_timed_out_when_the_commit_does_not_come_in_time() -> None:
    async def run() -> tuple[Any, asyncio.Future[AppendReply]]:
        node = Node()
        part = partition(await produce(client_api(node), timeout_ms=100))
        return part, node.appends[0]

    part, append = asyncio.run(run())
    assert part.error_code == ErrorCode.request_timed_out
    assert not append.cancelled()  # the append itself goes on: it may still commit


def test_leadership_lost_before_the_commit_is_may_have_been_written() -> None:
    async def run() -> Any:
        node = Node()
        asked = produce(client_api(node))
        await asyncio.sleep(0)
        node.appends[0].set_result(AppendReply(0, ErrorCode.not_leader_or_follower,
                                               indeterminate=True))
        return partition(await asked)

    assert asyncio.run(run()).error_code == ErrorCode.request_timed_out


def test_a_cancelled_request_leaves_the_append_and_nothing_unretrieved(
        caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        node = Node()
        asked = produce(client_api(node))
        await asyncio.sleep(0)
        asked.cancel()  # its connection closed
        await asyncio.sleep(0)
        assert not node.appends[0].cancelled()
        node.appends[0].set_exception(RuntimeError("the node stopped"))
        await asyncio.sleep(0.01)

    asyncio.run(run())
    gc.collect()
    assert "never retrieved" not in caplog.text


def test_a_failed_append_fails_the_request() -> None:
    async def run() -> None:
        node = Node()
        asked = produce(client_api(node))
        await asyncio.sleep(0)
        node.appends[0].set_exception(RuntimeError("a bug"))
        with pytest.raises(RuntimeError, match="a bug"):
            await asked

    asyncio.run(run())


def test_a_produce_and_its_wait_cost_no_task() -> None:
    async def run() -> int:
        node = Node()
        api = client_api(node)
        asked = [produce(api) for _ in range(50)]
        await asyncio.sleep(0)
        created = len(asyncio.all_tasks())
        for n, append in enumerate(node.appends):
            append.set_result(AppendReply(0, ErrorCode.none, (n,)))
        assert [partition(r).base_offset for r in await asyncio.gather(*asked)] == list(range(50))
        return created

    assert asyncio.run(run()) == 1  # the test itself: the requests are futures
