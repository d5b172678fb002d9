"""The node data dump of docs/contracts.md, and `kraft node dump-log` / `dump-snapshot`, read
from a node's files without changing them.

Works on a live directory or a copy of a crashed one: it takes no lock and performs no
recovery writes (a torn tail is left in place and not dumped).

`dump_file` prints a segment or a snapshot as Kafka's `kafka-dump-log.sh --deep-iteration
--print-data-log --cluster-metadata-decoder` does (DumpLogSegments): one line per batch, one
`| offset: ...` line per record, control records decoded (SnapshotHeader / SnapshotFooter, and
KIP-853's KRaftVersion / KRaftVoters, as Kafka's JSON converters print them), data records' values
as text (the image's records and kv commands are JSON). A snapshot's last line names its image,
and its kraft.version and voters (`id@host:port:directoryId`) when it has them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from reference_node.raft.messages import SnapshotId

from .batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_SEQUENCE,
    BatchFormatError,
    BatchHeader,
    ControlType,
    StoredRecord,
    crc_ok,
    decode_records,
    parse_header,
    read_prefix,
)
from .epochs import CHECKPOINT_NAME
from .errors import StorageError
from .kraft_records import describe_voters, kraft_version_json, voters_json
from .log import MetadataLog
from .meta import META_PROPERTIES, METADATA_PARTITION_DIR, MetaProperties
from .quorum_state import QUORUM_STATE, QuorumStateStore
from .segment import segment_base
from .snapshot import (
    SUFFIX,
    SnapshotError,
    SnapshotFiles,
    decode_footer,
    decode_header,
    decode_snapshot,
    parse_snapshot_filename,
)

_DECIMAL = re.compile(rb"-?[0-9]+")


def partition_dir_of(log_dir: str | os.PathLike[str]) -> Path:
    """`<log_dir>/__cluster_metadata-0`, or `log_dir` itself when it is that directory."""
    root = Path(log_dir)
    partition = root / METADATA_PARTITION_DIR
    if partition.is_dir():
        return partition
    if root.is_dir() and (
        root.name == METADATA_PARTITION_DIR
        or any(segment_base(p) is not None for p in root.iterdir())
        or (root / CHECKPOINT_NAME).exists()
    ):
        return root
    raise StorageError(
        f"{root}: neither a node's log directory (no {METADATA_PARTITION_DIR}/ in it) nor a "
        "metadata partition directory; pass the node's metadata.log.dir"
    )


def record_value(record: StoredRecord) -> int | None:
    """The workload value of a record: the ASCII decimal integer in a data record, else None."""
    if record.control_type is not None or record.value is None:
        return None
    # Only the canonical form the workload writes: int() alone would take "+5", " 5" or "1_0".
    if _DECIMAL.fullmatch(record.value) is None:
        return None
    return int(record.value)


def record_line(record: StoredRecord) -> dict[str, Any]:
    """A `log.jsonl` line. A data record whose value is not the decimal `value` (a kv command,
    a foreign record) also carries `payload`, its value as UTF-8 text, so that the checkers can
    fold it into a snapshot's digest; a value that is not UTF-8 has none (counted, not
    digested)."""
    value = record_value(record)
    line: dict[str, Any] = {
        "offset": record.offset,
        "epoch": record.epoch,
        "value": value,
        "control": record.control_type is not None,
    }
    if record.control_type is None and value is None:
        with contextlib.suppress(UnicodeDecodeError):
            line["payload"] = (record.value or b"").decode("utf-8")
    return line


def dump_log_jsonl(log_dir: str | os.PathLike[str], out_path: str | os.PathLike[str]) -> int:
    """Write `log.jsonl` (one record per line, offset order) for the node at `log_dir`.

    Returns the number of records written. StorageError if the log is corrupt (a torn tail is
    not: it is skipped, as the node itself would cut it on restart).
    """
    with MetadataLog.open(partition_dir_of(log_dir), read_only=True) as log:
        count = 0
        with open(out_path, "w", encoding="utf-8") as out:
            for record in log.records():
                out.write(json.dumps(record_line(record)) + "\n")
                count += 1
    return count


def log_summary(log_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """What a node's files say about it, for `final.json` and for people.

    Keys: node_id and cluster_id (None if there is no meta.properties), log_start_offset (from
    `log-start-offset-checkpoint`, raised to the first segment's base), log_end_offset,
    last_epoch, records (readable ones: end - start), epochs ([[epoch, start_offset], ...]),
    segments, torn_tail_bytes, snapshots (the `.checkpoint` files' names, by end offset), and
    quorum_state (leader_epoch, leader_id, voted_id; None if no file).
    """
    partition = partition_dir_of(log_dir)
    root = partition.parent if partition.name == METADATA_PARTITION_DIR else partition
    meta: MetaProperties | None = None
    if (root / META_PROPERTIES).exists():
        meta = MetaProperties.load(root)
    state = QuorumStateStore(partition / QUORUM_STATE).read()
    with MetadataLog.open(partition, read_only=True) as log:
        summary: dict[str, Any] = {
            "node_id": meta.node_id if meta else None,
            "cluster_id": meta.cluster_id if meta else None,
            "log_start_offset": log.start_offset,
            "log_end_offset": log.end_offset,
            "last_epoch": log.last_epoch,
            "records": log.end_offset - log.start_offset,
            "epochs": [[e.epoch, e.start_offset] for e in log.epochs],
            "segments": [p.name for p in log.segment_paths],
            "torn_tail_bytes": sum(c.bytes_removed for c in log.recovery.tail_cuts),
            "snapshots": [
                SnapshotFiles(partition, read_only=True).path(i).name
                for i in SnapshotFiles(partition, read_only=True).ids()
            ],
        }
    summary["quorum_state"] = (
        None
        if state is None
        else {
            "leader_epoch": state.leader_epoch,
            "leader_id": None if state.leader_id < 0 else state.leader_id,
            "voted_id": None if state.voted_id < 0 else state.voted_id,
        }
    )
    return summary


# --- snapshots ------------------------------------------------------------------------------------


def snapshot_line(path: Path) -> dict[str, Any]:
    """The `snapshots.jsonl` line of one `.checkpoint` file (docs/contracts.md)."""
    snapshot_id = parse_snapshot_filename(path.name)
    try:
        image = decode_snapshot(path.read_bytes(), snapshot_id)
    except SnapshotError as e:
        return {"file": path.name, "valid": False, "error": str(e)}
    except OSError as e:
        return {"file": path.name, "valid": False, "error": f"unreadable: {e.strerror}"}
    return {
        "file": path.name,
        "end_offset": image.end_offset,
        "epoch": image.epoch,
        "valid": True,
        "records": image.records,
        "digest": image.digest.hex(),
        "kv": [[key, image.kv[key]]
               for key in sorted(image.kv, key=lambda k: (isinstance(k, str), k))],
    }


def dump_snapshots_jsonl(
    log_dir: str | os.PathLike[str], out_path: str | os.PathLike[str]
) -> int:
    """Write `snapshots.jsonl` for the node at `log_dir` (its `metadata.log.dir`, or the
    partition directory): one line per `.checkpoint` file, by end offset. Returns the count."""
    files = SnapshotFiles(partition_dir_of(log_dir), read_only=True)
    count = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for snapshot_id in files.ids():
            out.write(json.dumps(snapshot_line(files.path(snapshot_id))) + "\n")
            count += 1
    return count


# --- kafka-dump-log.sh ----------------------------------------------------------------------------


def dump_file(path: str | os.PathLike[str]) -> Iterator[str]:
    """The lines `kafka-dump-log.sh --deep-iteration --print-data-log
    --cluster-metadata-decoder --files PATH` prints for a segment (`.log`) or a snapshot
    (`.checkpoint`), and for a snapshot a last line saying whether it is valid and what
    image it holds. StorageError for any other file."""
    file = Path(path)
    data = _read(file)
    yield f"Dumping {file}"
    if file.name.endswith(".log") and segment_base(file) is not None:
        yield f"Log starting offset: {segment_base(file)}"
    elif file.name.endswith(SUFFIX) and parse_snapshot_filename(file.name) is not None:
        snapshot_id = parse_snapshot_filename(file.name)
        assert snapshot_id is not None
        yield f"Snapshot end offset: {snapshot_id.end_offset}, epoch: {snapshot_id.epoch}"
    else:
        raise StorageError(
            f"{file}: neither a segment (<offset %020d>.log) nor a snapshot "
            "(<end offset %020d>-<epoch %010d>.checkpoint); pass one of a node's "
            f"{METADATA_PARTITION_DIR}/ files"
        )
    yield from _batch_lines(file, data)
    if snapshot_id_of(file) is not None:
        try:
            image = decode_snapshot(data, snapshot_id_of(file))
        except SnapshotError as e:
            yield f"Snapshot is INVALID: {e}"
        else:
            quorum = ""
            if image.voters is not None or image.kraft_version:
                voters = "none" if image.voters is None else describe_voters(image.voters)
                quorum = f", kraft.version {image.kraft_version}, voters {voters}"
            yield (f"Snapshot is valid: end offset {image.end_offset}, epoch {image.epoch}, "
                   f"{image.records} data records applied, digest {image.digest.hex()}, "
                   f"{len(image.kv)} keys{quorum}")


def dump_snapshot(path: str | os.PathLike[str]) -> list[str]:
    """`dump_file` of a snapshot, as a list of lines."""
    if snapshot_id_of(Path(path)) is None:
        raise StorageError(f"{path}: not a snapshot file (<end offset %020d>-<epoch "
                           "%010d>.checkpoint)")
    return list(dump_file(path))


def snapshot_id_of(path: Path) -> SnapshotId | None:
    return parse_snapshot_filename(path.name)


def _read(file: Path) -> bytes:
    try:
        return file.read_bytes()
    except OSError as e:
        raise StorageError(f"{file}: cannot read it: {e.strerror}") from None


def _batch_lines(file: Path, data: bytes) -> Iterator[str]:
    pos = 0
    while pos < len(data):
        left = len(data) - pos
        if left < HEADER_SIZE or pos + read_prefix(data, pos)[1] + LOG_OVERHEAD > len(data):
            break
        try:
            header = parse_header(data, pos)
        except BatchFormatError as e:
            yield f"Stopped at byte {pos} of {file.name}: {e}"
            return
        yield _batch_line(data, pos, header)
        try:
            records = decode_records(data, pos, header)
        except BatchFormatError as e:
            yield f"| records unreadable: {e}"
        else:
            yield from (_record_line(header, r) for r in records)
        pos += header.size
    if pos < len(data):
        yield f"Found {len(data) - pos} invalid bytes at the end of {file.name}"


def _batch_line(data: bytes, pos: int, h: BatchHeader) -> str:
    return (
        f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.record_count} "
        f"baseSequence: {NO_SEQUENCE} lastSequence: {NO_SEQUENCE} producerId: -1 "
        f"producerEpoch: -1 partitionLeaderEpoch: {h.epoch} isTransactional: false "
        f"isControl: {str(h.is_control).lower()} deleteHorizonMs: OptionalLong.empty "
        f"position: {pos} CreateTime: {h.max_timestamp} size: {h.size} magic: {h.magic} "
        f"compresscodec: none crc: {h.crc} isvalid: {str(crc_ok(data, pos, h)).lower()}"
    )


def _record_line(h: BatchHeader, r: StoredRecord) -> str:
    key_size = 4 if r.control_type is not None else -1
    value_size = -1 if r.value is None else len(r.value)
    line = (f"| offset: {r.offset} CreateTime: {r.timestamp_ms} keySize: {key_size} "
            f"valueSize: {value_size} sequence: -1 headerKeys: []")
    if r.control_type is None:
        return f"{line} payload: {_text(r.value)}"
    return f"{line} {_control(r)}"


def _control(r: StoredRecord) -> str:
    value = r.value or b""
    try:
        if r.control_type == ControlType.SNAPSHOT_HEADER:
            header = decode_header(value)
            return ("SnapshotHeader " + json.dumps(
                {"version": int(header.version),
                 "lastContainedLogTimestamp": int(header.last_contained_log_timestamp)},
                separators=(",", ":")))
        if r.control_type == ControlType.SNAPSHOT_FOOTER:
            footer = decode_footer(value)
            return "SnapshotFooter " + json.dumps({"version": int(footer.version)},
                                                  separators=(",", ":"))
        if r.control_type == ControlType.KRAFT_VERSION:
            return "KRaftVersion " + json.dumps(kraft_version_json(value), separators=(",", ":"))
        if r.control_type == ControlType.KRAFT_VOTERS:
            return "KRaftVoters " + json.dumps(voters_json(value), separators=(",", ":"))
    except Exception as e:  # kio raises several types for bytes that are not the message
        return f"controlType: {_control_name(r.control_type)} (unreadable: {e!r})"
    return f"controlType: {_control_name(r.control_type)}"


def _control_name(control_type: int | None) -> str:
    try:
        return f"{ControlType(control_type or 0).name}({control_type})"
    except ValueError:
        return f"UNKNOWN({control_type})"


def _text(value: bytes | None) -> str:
    if value is None:
        return "null"
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + value.hex()
