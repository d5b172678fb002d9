"""`meta.properties` and formatting a log directory, as `kafka-storage format` does.

Kafka writes a Java properties file (MetaProperties v1: cluster.id, directory.id, node.id,
version). A node refuses to start when the file names another node id (a configuration mix-up
would let two voters share one identity) or another cluster (KIP-595: never join a foreign quorum).

`directory.id` (KIP-853) tells two incarnations of one node id apart: a disk wiped and formatted
again comes back as another replica, not as the voter whose log was counted. KIP-853's bootstrap
checkpoint (`kafka-storage format --standalone / --initial-controllers`) is a snapshot at offset
0, epoch 0 in `__cluster_metadata-0` holding only the initial voter set;
`format_storage(..., bootstrap_voters=...)` writes it before `meta.properties`, so that a directory
that looks formatted always has it.

Details (the file as Kafka writes it, where a directory id comes from):
docs/internals/storage.md#meta
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from reference_node import properties
from reference_node.raft.voters import VoterSet

from .errors import StorageError
from .fsutil import atomic_write, fsync_dir
from .snapshot import SnapshotFiles

META_PROPERTIES = "meta.properties"
METADATA_PARTITION_DIR = "__cluster_metadata-0"
VERSION = 1


def random_uuid() -> str:
    """A random Uuid in Kafka's form: URL-safe base64 of 16 bytes, no padding (22 chars).

    Like Kafka's Uuid.randomUuid, never one that starts with '-' (it would read as a command-line
    flag) and never the reserved all-zero id.
    """
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
        if not text.startswith("-") and raw != bytes(16) and raw != bytes(15) + b"\x01":
            return text


def parse_uuid(text: str, where: str) -> bytes:
    """The 16 bytes of a Kafka base64 Uuid; StorageError naming `where` if it is not one."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError):
        raw = b""
    if len(raw) != 16 or len(text) != 22:
        raise StorageError(
            f"{where}: {text!r} is not a Kafka Uuid (22 characters of URL-safe base64, e.g. "
            f"{random_uuid()!r})"
        )
    return raw


def _check_cluster_id(cluster_id: str) -> None:
    if not cluster_id or any(c.isspace() for c in cluster_id) or "=" in cluster_id:
        raise StorageError(
            f"cluster id {cluster_id!r} is empty or holds whitespace or '='; use a Kafka Uuid "
            f"such as {random_uuid()!r} (what `kafka-storage random-uuid` prints)"
        )


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The identity of a log directory: which node of which cluster owns it."""

    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = VERSION

    def to_text(self) -> str:
        stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y", time.gmtime())
        lines = ["#", f"#{stamp}", f"cluster.id={self.cluster_id}"]
        if self.directory_id is not None:
            lines.append(f"directory.id={self.directory_id}")
        lines += [f"node.id={self.node_id}", f"version={self.version}"]
        return "\n".join(lines) + "\n"

    @property
    def directory_uuid(self) -> uuid.UUID | None:
        """`directory_id` as a UUID (the form the Raft core and the wire use)."""
        if self.directory_id is None:
            return None
        return uuid.UUID(bytes=parse_uuid(self.directory_id, "directory.id"))

    def write(self, log_dir: Path) -> None:
        """Write `<log_dir>/meta.properties` atomically and durably."""
        atomic_write(Path(log_dir) / META_PROPERTIES, self.to_text().encode("utf-8"))

    @classmethod
    def load(
        cls,
        log_dir: str | os.PathLike[str],
        *,
        node_id: int | None = None,
        cluster_id: str | None = None,
    ) -> MetaProperties:
        """Read `<log_dir>/meta.properties`; check it against the configured ids if given."""
        path = Path(log_dir) / META_PROPERTIES
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            raise StorageError(
                f"{path} does not exist: the log directory is not formatted; run "
                "`kraft node format` (like `kafka-storage format`) first"
            ) from None
        except (OSError, UnicodeDecodeError) as e:
            raise StorageError(f"{path}: cannot read meta.properties: {e}") from None
        meta = cls._from_props(properties.parse(text), path)
        meta.check(node_id=node_id, cluster_id=cluster_id, path=path)
        return meta

    @classmethod
    def _from_props(cls, props: dict[str, str], path: Path) -> MetaProperties:
        version_text = props.get("version", "0")
        if version_text != str(VERSION):
            raise StorageError(
                f"{path}: version={version_text}, only version 1 (KRaft) is supported; a version 0 "
                "file comes from a ZooKeeper-mode broker: format a fresh directory"
            )
        missing = [k for k in ("cluster.id", "node.id") if not props.get(k)]
        if missing:
            raise StorageError(f"{path}: missing {', '.join(missing)}; re-format the directory")
        try:
            node_id = int(props["node.id"])
        except ValueError:
            raise StorageError(f"{path}: node.id={props['node.id']!r} is not an integer") from None
        directory_id = props.get("directory.id")
        if directory_id is not None:
            parse_uuid(directory_id, f"{path}: directory.id")
        return cls(props["cluster.id"], node_id, directory_id, VERSION)

    def check(
        self,
        *,
        node_id: int | None = None,
        cluster_id: str | None = None,
        path: Path | None = None,
    ) -> None:
        """StorageError when the directory belongs to another node or another cluster."""
        where = str(path) if path is not None else META_PROPERTIES
        if node_id is not None and node_id != self.node_id:
            raise StorageError(
                f"{where}: the directory belongs to node.id={self.node_id} but this node is "
                f"configured with node.id={node_id}; fix the configuration or use the right "
                "directory"
            )
        if cluster_id is not None and cluster_id != self.cluster_id:
            raise StorageError(
                f"{where}: the directory belongs to cluster {self.cluster_id!r}, not to the "
                f"configured cluster {cluster_id!r}; refusing to join a foreign cluster"
            )


def ensure_directory_id(log_dir: str | os.PathLike[str], meta: MetaProperties) -> MetaProperties:
    """`meta` with a directory.id: a file without one (formatted before KIP-853) gets a random one,
    written back durably before the node uses it (Kafka does so at start)."""
    if meta.directory_id is not None:
        return meta
    updated = MetaProperties(meta.cluster_id, meta.node_id, random_uuid(), meta.version)
    updated.write(Path(log_dir))
    return updated


def format_storage(
    log_dir: str | os.PathLike[str],
    cluster_id: str,
    node_id: int,
    directory_id: str | None = None,
    bootstrap_voters: VoterSet | None = None,
) -> MetaProperties:
    """Prepare `log_dir` for a node, as `kafka-storage format` does.

    Writes `meta.properties` (version 1, node.id, cluster.id, directory.id; a random Uuid when
    `directory_id` is None) and creates `__cluster_metadata-0/`; with `bootstrap_voters`, first
    the bootstrap checkpoint (KIP-853: `00000000000000000000-0000000000.checkpoint`, kraft.version
    1 and those voters). Formatting again with the same node and cluster is a no-op that returns
    the existing properties (and writes no checkpoint, as Kafka skips a formatted directory); a
    directory formatted for another node or cluster is refused with StorageError.
    """
    _check_cluster_id(cluster_id)
    if node_id < 0:
        raise StorageError(f"node id must be >= 0, got {node_id}")
    if directory_id is not None:
        parse_uuid(directory_id, "directory id")
    root = Path(log_dir)
    root.mkdir(parents=True, exist_ok=True)
    partition = root / METADATA_PARTITION_DIR
    if (root / META_PROPERTIES).exists():
        existing = MetaProperties.load(root)
        try:
            existing.check(node_id=node_id, cluster_id=cluster_id, path=root / META_PROPERTIES)
        except StorageError as e:
            raise StorageError(f"{e} (the directory is already formatted)") from None
        if directory_id is not None and existing.directory_id != directory_id:
            raise StorageError(
                f"{root / META_PROPERTIES}: already formatted with directory.id="
                f"{existing.directory_id}, not {directory_id}"
            )
        partition.mkdir(exist_ok=True)
        return existing
    meta = MetaProperties(cluster_id, node_id, directory_id or random_uuid())
    partition.mkdir(exist_ok=True)
    fsync_dir(root)
    if bootstrap_voters is not None:
        SnapshotFiles(partition).write_bootstrap(bootstrap_voters)
    meta.write(root)
    return meta
