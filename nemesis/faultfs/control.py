"""The control channel: one JSON object per line in, one per line out, over a unix socket.

Theory of operation. The filesystem process serves its socket from a thread of its own
(`ControlServer`, one more thread per connection, so that a client that hangs blocks nobody);
each line is parsed and checked here (`answer`) and carried out by the filesystem's `Levers`.
Whatever goes wrong with one line (bad JSON, an unknown op, a bad argument, an exception in the
lever) becomes `{"error": "..."}` on that line: the filesystem under a node must never die of
its remote control. `request` is the client side, importable without FUSE.

Commands (docs in `nemesis.faultfs`): ping, stall, slow, heal, lose-unsynced, corrupt, repair,
status.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import socketserver
import threading
from typing import Any, Protocol

log = logging.getLogger("faultfs.control")

CORRUPT_MODES = ("bitflip", "truncate")
MAX_LINE = 1 << 20


class Levers(Protocol):
    """What the filesystem does for the control commands."""

    def stall(self, seconds: float) -> None: ...
    def slow(self, ms: float) -> None: ...
    def heal(self) -> None: ...
    def lose_unsynced(self, torn: bool, seed: int) -> dict[str, Any]: ...
    def corrupt(self, globs: list[str], mode: str, seed: int) -> dict[str, Any]: ...
    def repair(self) -> dict[str, Any]: ...
    def status(self) -> dict[str, Any]: ...


class BadCommand(ValueError):
    """The command is malformed (the client's fault)."""


def _number(command: dict[str, Any], key: str) -> float:
    value = command.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise BadCommand(f"{command['op']}: {key!r} must be a number >= 0, not {value!r}")
    return float(value)


def _seed(command: dict[str, Any]) -> int:
    value = command.get("seed", 0)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadCommand(f"{command['op']}: 'seed' must be an integer, not {value!r}")
    return value


def _run(levers: Levers, command: dict[str, Any]) -> dict[str, Any]:
    op = command.get("op")
    if op == "ping":
        return {"ok": True}
    if op == "stall":
        levers.stall(_number(command, "seconds"))
        return {"ok": True}
    if op == "slow":
        levers.slow(_number(command, "ms"))
        return {"ok": True}
    if op == "heal":
        levers.heal()
        return {"ok": True}
    if op == "status":
        return levers.status()
    if op == "lose-unsynced":
        torn = command.get("torn", False)
        if not isinstance(torn, bool):
            raise BadCommand(f"lose-unsynced: 'torn' must be true or false, not {torn!r}")
        return levers.lose_unsynced(torn, _seed(command))
    if op == "corrupt":
        globs = command.get("globs")
        if not isinstance(globs, list) or not globs or not all(
                isinstance(g, str) and g for g in globs):
            raise BadCommand(f"corrupt: 'globs' must be a non-empty list of globs, not {globs!r}")
        mode = command.get("mode", "bitflip")
        if mode not in CORRUPT_MODES:
            raise BadCommand(f"corrupt: 'mode' must be one of {', '.join(CORRUPT_MODES)}, "
                             f"not {mode!r}")
        return levers.corrupt(globs, mode, _seed(command))
    if op == "repair":
        return levers.repair()
    raise BadCommand(f"unknown op {op!r}; one of ping, stall, slow, heal, lose-unsynced, "
                     "corrupt, repair, status")


def answer(levers: Levers, line: bytes) -> dict[str, Any]:
    """The answer to one request line; never raises."""
    try:
        command = json.loads(line)
    except ValueError as exc:
        return {"error": f"not JSON: {exc}"}
    if not isinstance(command, dict):
        return {"error": f"a command is a JSON object, not {type(command).__name__}"}
    try:
        return _run(levers, command)
    except BadCommand as exc:
        return {"error": str(exc)}
    except Exception as exc:
        log.exception("control command %r failed", command)
        return {"error": f"{command.get('op')}: {type(exc).__name__}: {exc}"}


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        while True:
            line = self.rfile.readline(MAX_LINE)
            if not line:
                return
            if not line.strip():
                continue
            reply = answer(self.server.levers, line)
            log.info("control %s -> %s", line.strip().decode("utf-8", "replace"),
                     json.dumps(reply)[:400])
            self.wfile.write(json.dumps(reply).encode() + b"\n")
            self.wfile.flush()


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True

    def __init__(self, path: str, levers: Levers) -> None:
        self.levers = levers
        super().__init__(path, _Handler)


class ControlServer:
    """Serves `levers` on the unix socket `path` from a daemon thread."""

    def __init__(self, path: str, levers: Levers) -> None:
        self.path = path
        # A socket file left by a filesystem that died: nobody answers on it any more.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._server = _Server(path, levers)
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,),
                                        name="faultfs-control", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def request(sock: str, command: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """Send one command to the filesystem answering on `sock`; its answer. OSError (e.g.
    FileNotFoundError, ConnectionRefusedError, TimeoutError) or ConnectionError when nothing
    answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock)
        s.sendall(json.dumps(command).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                raise ConnectionError(f"{sock}: the filesystem closed the connection unanswered")
            data += chunk
    reply = json.loads(data)
    if not isinstance(reply, dict):
        raise ConnectionError(f"{sock}: answered {reply!r}, not a JSON object")
    return reply
