"""One progress line on the user's terminal, in place of Spark's own console output.

The phase names what the pipeline is doing; on a terminal a background thread adds the tasks done
in Spark's active stages, rewritten in place. Off a terminal only the phases are printed, one per
line, so logs stay readable.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any


class Progress:
    def __init__(self, stream: IO[str] | None = None, interval: float = 0.5) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.interval = interval
        self.phase = ""
        self.started = time.monotonic()
        self._tracker: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def follow(self, spark_context: Any) -> None:
        """Start showing the tasks of `spark_context`'s active stages (on a terminal only)."""
        self._tracker = spark_context.statusTracker()
        if self.tty and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
            self._thread.start()

    def step(self, phase: str) -> None:
        self.phase = phase
        if self.tty:
            self._draw("")
        else:
            print(f"analyze: {phase}", file=self.stream, flush=True)

    def done(self, message: str) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=2)
        if self.tty:
            self.stream.write("\r\033[K")
        print(f"analyze: {message}", file=self.stream, flush=True)

    def _tasks(self) -> str:
        try:
            stages = [self._tracker.getStageInfo(s) for s in self._tracker.getActiveStageIds()]
        except Exception:  # the context is stopping; the line just loses its task counts
            return ""
        done = sum(s.numCompletedTasks for s in stages if s)
        total = sum(s.numTasks for s in stages if s)
        return f" [{done}/{total} tasks]" if total else ""

    def _draw(self, tasks: str) -> None:
        elapsed = time.monotonic() - self.started
        self.stream.write(f"\r\033[Kanalyze: {self.phase}{tasks} {elapsed:.0f}s")
        self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._draw(self._tasks())
