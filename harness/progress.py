"""The progress line on stderr while a test runs: ops done, faults active, time left.

On a terminal it rewrites one line every second; otherwise (CI logs) it prints a line every ten.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO


class Progress:
    def __init__(self, status: Callable[[], str], out: TextIO = sys.stderr) -> None:
        self._status = status
        self._out = out
        self._tty = out.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self._tty:
            self._out.write("\n")
            self._out.flush()

    def _run(self) -> None:
        period = 1.0 if self._tty else 10.0
        last = time.monotonic()
        while not self._stop.wait(period if self._tty else 1.0):
            if not self._tty and time.monotonic() - last < period:
                continue
            last = time.monotonic()
            try:
                line = self._status()
            except Exception:
                continue
            if self._tty:
                self._out.write("\r\x1b[2K" + line)
            else:
                self._out.write(line + "\n")
            self._out.flush()
