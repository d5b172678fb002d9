"""The toy's server: one append-only log of integers, line-delimited JSON over TCP.

Requests and replies, one JSON object a line: `{"op": "append", "value": V}` -> `{"offset": O}`;
`{"op": "read", "from": F}` -> `{"hw": H, "records": [[O, V], ...]}` (every offset in [F, H)).
The log is `<data>/log.txt`, one value a line, fsynced before an append is acknowledged; a last
line torn by a power cut (no newline) is cut off at start, as a checksummed log would drop it.

Three switches make it wrong, each in a way a checker catches (docs/your-own-target.md):
`--lossy` keeps the log in memory only (a kill loses acknowledged appends), `--no-fsync` never
fsyncs (only a power cut loses them), `--crash-after S` crashes S seconds after the start (a
fatal line in its log, exit status 70).
"""

from __future__ import annotations

import argparse
import json
import os
import socketserver
import sys
import threading
from pathlib import Path

LOCK = threading.Lock()
LOG: list[int] = []


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--lossy", action="store_true")
    parser.add_argument("--no-fsync", action="store_true")
    parser.add_argument("--crash-after", type=float)
    args = parser.parse_args()
    if args.crash_after is not None:
        threading.Timer(args.crash_after, crash).start()
    Path(args.data).mkdir(parents=True, exist_ok=True)
    path = Path(args.data) / "log.txt"
    if path.exists() and not args.lossy:
        text = path.read_text()
        whole = text[: text.rfind("\n") + 1]
        if whole != text:
            with open(path, "r+") as torn:
                torn.truncate(len(whole.encode()))
        LOG.extend(int(line) for line in whole.split())
    out = open(path, "a")  # noqa: SIM115

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            for line in self.rfile:
                request = json.loads(line)
                with LOCK:
                    if request["op"] == "append":
                        LOG.append(request["value"])
                        if not args.lossy:
                            out.write(f"{request['value']}\n")
                            out.flush()
                            if not args.no_fsync:
                                os.fsync(out.fileno())
                        reply: dict[str, object] = {"offset": len(LOG) - 1}
                    else:
                        start = request["from"]
                        reply = {"hw": len(LOG),
                                 "records": [[o, LOG[o]] for o in range(start, len(LOG))]}
                self.wfile.write(json.dumps(reply).encode() + b"\n")
                self.wfile.flush()

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer((args.host, args.port), Handler) as server:
        server.serve_forever()


def crash() -> None:
    print("toy: fatal: the log is inconsistent, giving up", file=sys.stderr, flush=True)
    os._exit(70)


if __name__ == "__main__":
    main()
