"""The `quorum-state` file: the election state a voter must never forget (KIP-595).

Same format as Kafka's FileQuorumStateStore: one line of compact JSON, the QuorumStateData
fields plus `data_version`:

    {"leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1}],"data_version":1}

Version 0 files (which also carry `clusterId`) are read too. A vote is granted only after the
write returns: the file is written to `quorum-state.tmp`, fsynced, renamed over `quorum-state`
and the directory fsynced, so a crash leaves the old state or the new one, never a mix.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import StorageError
from .fsutil import atomic_write

QUORUM_STATE = "quorum-state"
DATA_VERSION = 1
SUPPORTED_VERSIONS = (0, 1)


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What `quorum-state` holds; -1 means "none" as in Kafka."""

    leader_epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    applied_offset: int = 0
    current_voters: tuple[int, ...] | None = field(default=())
    voted_directory_id: str | None = None

    def to_json(self, data_version: int = DATA_VERSION) -> str:
        obj: dict[str, Any] = {"leaderId": self.leader_id, "leaderEpoch": self.leader_epoch}
        if data_version == 0:
            obj = {"clusterId": "", **obj}
        obj["votedId"] = self.voted_id
        if self.voted_directory_id is not None and data_version >= 1:
            obj["votedDirectoryId"] = self.voted_directory_id
        obj["appliedOffset"] = self.applied_offset
        obj["currentVoters"] = (
            None if self.current_voters is None else [{"voterId": v} for v in self.current_voters]
        )
        obj["data_version"] = data_version
        return json.dumps(obj, separators=(",", ":"))


def _field(obj: dict[str, Any], name: str, default: int | None, path: Path) -> int:
    value = obj.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise StorageError(f"{path}: field {name!r} is {value!r}, expected an integer")
    return value


def parse_quorum_state(text: str, path: Path) -> QuorumState:
    """The state in a quorum-state file's text; StorageError naming `path` if malformed."""
    line = text.split("\n", 1)[0]
    hint = (
        "the node cannot know whom it voted for; restore the file from a backup, or (losing the "
        "vote) delete it and let the node re-join as a follower"
    )
    if not line.strip():
        raise StorageError(f"{path}: quorum-state is empty; {hint}")
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise StorageError(f"{path}: quorum-state is not JSON ({e}); {hint}") from None
    if not isinstance(obj, dict):
        raise StorageError(f"{path}: quorum-state holds {type(obj).__name__}, not an object")
    if "data_version" not in obj:
        raise StorageError(f"{path}: quorum-state has no data_version field; {hint}")
    version = obj["data_version"]
    if version not in SUPPORTED_VERSIONS:
        raise StorageError(
            f"{path}: data_version ({version}) is not within the supported versions "
            f"{SUPPORTED_VERSIONS[0]}..{SUPPORTED_VERSIONS[-1]}"
        )
    voters_raw = obj.get("currentVoters")
    voters: tuple[int, ...] | None = None
    if voters_raw is not None:
        if not isinstance(voters_raw, list):
            raise StorageError(f"{path}: currentVoters is {voters_raw!r}, expected a list")
        try:
            voters = tuple(int(v["voterId"]) for v in voters_raw)
        except (KeyError, TypeError, ValueError):
            raise StorageError(
                f'{path}: currentVoters is {voters_raw!r}, expected [{{"voterId": N}}, ...]'
            ) from None
    directory = obj.get("votedDirectoryId")
    return QuorumState(
        leader_epoch=_field(obj, "leaderEpoch", -1, path),
        leader_id=_field(obj, "leaderId", -1, path),
        voted_id=_field(obj, "votedId", -1, path),
        applied_offset=_field(obj, "appliedOffset", 0, path),
        current_voters=voters,
        voted_directory_id=directory if isinstance(directory, str) else None,
    )


class QuorumStateStore:
    """Reads and durably writes one `quorum-state` file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def read(self) -> QuorumState | None:
        """The stored state, or None when the file does not exist (a fresh node).

        A leftover `quorum-state.tmp` (a crash mid-write) is ignored: the rename never happened,
        so `quorum-state` still holds the last state that was acknowledged.
        """
        try:
            text = self.path.read_text("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise StorageError(f"{self.path}: cannot read quorum-state: {e}") from None
        return parse_quorum_state(text, self.path)

    def write(self, state: QuorumState) -> None:
        """Replace the stored state; durable when this returns."""
        if state.leader_epoch < 0:
            raise ValueError(f"leader epoch must be >= 0, got {state.leader_epoch}")
        atomic_write(self.path, state.to_json().encode("utf-8"))

    def clear(self) -> None:
        """Remove the file (and a leftover temp file), as Kafka's clear() does."""
        for p in (self.path, self.path.with_name(self.path.name + ".tmp")):
            p.unlink(missing_ok=True)
