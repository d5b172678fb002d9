"""Runs a pure generator against client processes, recording invokes and completions.

Jepsen's model: a fixed number of worker threads (the concurrency), each holding one client and
one process number at a time. The interpreter, on the calling thread, asks the generator for an
op with the set of free processes, waits until the op's time (re-asking if a completion arrives
first), records the invoke and hands it to that process's worker. The worker invokes the client,
records the completion, and, when it ends in `info` (the op may or may not have happened), closes
the client and takes a new process number (old + concurrency), as the old process can never
invoke again.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable

from contracts.generator import PENDING, Context, Generator
from contracts.history import History, Op
from contracts.target import Client

POLL = 0.05


class Worker:
    def __init__(self, slot: int, concurrency: int, make_client: Callable[[], Client],
                 node: str, history: History, completions: queue.Queue[tuple[Worker, Op]],
                 op_timeout: float) -> None:
        self.slot = slot
        self.process = slot
        self.concurrency = concurrency
        self.node = node
        self._make_client = make_client
        self._history = history
        self._completions = completions
        self._op_timeout = op_timeout
        self._client: Client | None = None
        self.inbox: queue.Queue[Op | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name=f"worker-{slot}", daemon=True)

    def _run(self) -> None:
        while (op := self.inbox.get()) is not None:
            done = self._record(perform(op, self._client_for, self._op_timeout))
            if done["type"] == "info":
                self._close()
                self.process += self.concurrency
            self._completions.put((self, done))
        self._close()

    def _client_for(self) -> Client:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _record(self, done: Op) -> Op:
        return self._history.record(done)

    def _close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None


def perform(op: Op, client_for: Callable[[], Client], timeout: float) -> Op:
    """Invoke one op; the completion always has the invoke's process and f, never raises."""
    base = {k: v for k, v in op.items() if k not in ("index", "time")}
    try:
        client = client_for()
    except Exception as exc:
        # could not even connect: nothing was sent
        return {**base, "type": "fail", "error": "open-failed",
                "detail": f"{type(exc).__name__}: {exc}"[:200]}
    try:
        done = client.invoke(dict(base), timeout)
    except Exception as exc:
        return {**base, "type": "info", "error": "client-crashed",
                "detail": f"{type(exc).__name__}: {exc}"[:200]}
    if done.get("type") not in ("ok", "fail", "info"):
        return {**base, "type": "info", "error": "client-crashed",
                "detail": f"client returned type {done.get('type')!r}"}
    done = {k: v for k, v in done.items() if k not in ("index", "time")}
    done.update(process=op["process"], f=op["f"])
    if op.get("final"):
        done["final"] = True
    return done


class Interpreter:
    def __init__(self, history: History, workers: list[Worker]) -> None:
        self.history = history
        self.workers = workers
        self.completions: queue.Queue[tuple[Worker, Op]] = workers[0]._completions
        self.in_flight = 0
        self.done = 0
        self.stopping = threading.Event()

    def run(self, gen: Generator, drain_timeout: float) -> None:
        for worker in self.workers:
            worker.thread.start()
        free: dict[int, Worker] = {w.process: w for w in self.workers}
        # a history that can no longer be stored (a full disk) ends the run: ops past it would
        # be unrecorded, and so unchecked
        while not self.stopping.is_set() and self.history.write_error is None:
            ctx = Context(self.history.now(), tuple(sorted(free)))
            op, following = gen.op(ctx)
            if op is None:
                break
            if op is PENDING or not isinstance(op, dict):
                gen = self._wait(gen, free, POLL)
                continue
            delay = (op.get("time", ctx.time) - ctx.time) / 1e9
            if delay > 0:
                gen = self._wait(gen, free, min(delay, POLL))
                continue
            gen = following
            worker = free.pop(op["process"])
            invoke = self.history.record({k: v for k, v in op.items() if k != "time"})
            self.in_flight += 1
            worker.inbox.put(invoke)
        deadline = time.monotonic() + drain_timeout
        while self.in_flight and time.monotonic() < deadline:
            gen = self._wait(gen, free, POLL)
        for worker in self.workers:
            worker.inbox.put(None)

    def _wait(self, gen: Generator, free: dict[int, Worker], timeout: float) -> Generator:
        try:
            worker, done = self.completions.get(timeout=timeout)
        except queue.Empty:
            return gen
        while True:
            self.in_flight -= 1
            self.done += 1
            free[worker.process] = worker
            gen = gen.update(Context(self.history.now(), tuple(sorted(free))), done)
            try:
                worker, done = self.completions.get_nowait()
            except queue.Empty:
                return gen

    def next_process(self) -> int:
        return max(w.process for w in self.workers) + 1
