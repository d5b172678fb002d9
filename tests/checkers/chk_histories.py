"""Building histories by hand for the checker tests: ops in the format of docs/architecture.md."""

from __future__ import annotations

from typing import Any

Op = dict[str, Any]


class Builder:
    """Appends ops with consecutive indices and times 1 ms apart; returns each op's index."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._pending: dict[Any, str] = {}

    def _add(self, **fields: Any) -> int:
        index = len(self.ops)
        op = {"index": index, "time": index * 1_000_000, **{k: v for k, v in fields.items() if v is not None}}
        self.ops.append(op)
        return index

    def invoke(self, process: int, f: str, value: Any, node: str | None = "n1", final: bool | None = None) -> int:
        self._pending[process] = f
        return self._add(process=process, type="invoke", f=f, value=value, node=node, final=final)

    def complete(self, process: int, type_: str, value: Any = None, node: str | None = "n1",
                 error: str | None = None, final: bool | None = None) -> int:
        f = self._pending.pop(process)
        if type_ != "ok" and error is None:
            error = "timeout" if type_ == "info" else "not-leader"
        return self._add(process=process, type=type_, f=f, value=value, node=node, error=error, final=final)

    # append workload -------------------------------------------------------------------------

    def append_invoke(self, process: int, value: int, node: str = "n1") -> int:
        return self.invoke(process, "append", {"value": value}, node)

    def append_ok(self, process: int, value: int, offset: int, node: str = "n1") -> int:
        return self.complete(process, "ok", {"value": value, "offset": offset}, node)

    def append(self, process: int, value: int, offset: int | None, type_: str = "ok", node: str = "n1") -> tuple[int, int]:
        start = self.append_invoke(process, value, node)
        if type_ == "ok":
            assert offset is not None
            return start, self.append_ok(process, value, offset, node)
        return start, self.complete(process, type_, {"value": value}, node)

    def read_invoke(self, process: int, start: int = 0, node: str = "n1", final: bool | None = None) -> int:
        return self.invoke(process, "read", {"from": start}, node, final)

    def read_ok(self, process: int, start: int, hw: int, records: list[list[Any]], node: str = "n1",
                final: bool | None = None) -> int:
        return self.complete(process, "ok", {"from": start, "hw": hw, "records": records}, node, final=final)

    def read(self, process: int, start: int, hw: int, records: list[list[Any]], node: str = "n1",
             final: bool | None = None) -> tuple[int, int]:
        return (self.read_invoke(process, start, node, final),
                self.read_ok(process, start, hw, records, node, final))

    def nemesis(self, f: str, value: Any = None) -> int:
        return self._add(process="nemesis", type="info", f=f, value=value)

    # register workload -----------------------------------------------------------------------

    def r_read(self, process: int, key: Any, value: Any, type_: str = "ok") -> tuple[int, int]:
        start = self.invoke(process, "read", {"key": key})
        body = {"key": key, "value": value} if type_ == "ok" else None
        return start, self.complete(process, type_, body)

    def r_write(self, process: int, key: Any, value: Any, type_: str = "ok") -> tuple[int, int]:
        start = self.invoke(process, "write", {"key": key, "value": value})
        return start, self.complete(process, type_, {"key": key, "value": value})
