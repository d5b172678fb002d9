"""The snapshot/log invariants (checkers/snapshots.py) on hand-built runs: each anomaly where it
must be found and its healthy twin where it must not, with real digests (`Image`), and the append
checkers over a log truncated at a snapshot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chk_histories import Builder
from chk_runs import write_run

import checkers
import workloads
from checkers import compose, leaders, node_data, raft_invariants, snapshots, summary
from reference_node.raft.image import Image, encode_cas, encode_write
from reference_node.raft.messages import Entry, EntryKind

Log = list[tuple[int, bytes | None]]  # per offset: (epoch, data value or None for a control record)

# offsets 0-11: a LeaderChange at 0 (epoch 1) and 6 (epoch 2); the data value at o is 100 + o
LOG: Log = [(1 if o < 6 else 2, None if o in (0, 6) else str(100 + o).encode()) for o in range(12)]
START = 6  # where the nodes' snapshot ends, and the log start once retention moved it


def fold(log: Log, end: int, claim: int | None = None) -> Image:
    """The image of log[0:end); `claim`: the end offset the image claims (as under
    snapshot-off-by-one, it may be more than it applied)."""
    image = Image()
    for offset, (epoch, value) in enumerate(log[:end]):
        kind = EntryKind.DATA if value is not None else EntryKind.LEADER_CHANGE
        image.apply(Entry(offset, epoch, kind, value or b""))
    if claim is not None:
        image.end_offset = claim
    return image


def snap_file(image: Image) -> dict[str, Any]:
    return {"file": f"{image.end_offset:020d}-{image.epoch:010d}.checkpoint",
            "end_offset": image.end_offset, "epoch": image.epoch, "valid": True,
            "records": image.records, "digest": image.digest.hex(),
            "kv": [[k, v] for k, v in sorted(image.kv.items(), key=lambda kv: repr(kv[0]))]}


def ev(node: int, type_: str, ts: float, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "node": node, "type": type_, **fields}


def snap_event(node: int, ts: float, image: Image, hw: int | None) -> dict[str, Any]:
    fields = {"end_offset": image.end_offset, "epoch": image.epoch, "records": image.records,
              "digest": image.digest.hex()}
    if hw is not None:
        fields["hw"] = hw
    return ev(node, "snapshot", ts, **fields)


def log_lines(log: Log, start: int = 0) -> list[dict[str, Any]]:
    lines = []
    for offset, (epoch, value) in enumerate(log):
        if offset < start:
            continue
        line: dict[str, Any] = {"offset": offset, "epoch": epoch, "control": value is None,
                                "value": None}
        if value is not None and value.isdigit():
            line["value"] = int(value)
        elif value is not None:
            line["payload"] = value.decode()
        lines.append(line)
    return lines


def node(node_id: int, events: list[dict[str, Any]], log: Log, start: int, hw: int,
         snaps: list[Image] | None) -> dict[str, Any]:
    return {"events": [ev(node_id, "start", 1.0, pid=node_id),
                       ev(node_id, "state", 2.0, state="follower", epoch=2, leader=1,
                          voted_for=None), *events],
            "log": log_lines(log, start),
            "final": {"node_id": node_id, "high_watermark": hw, "epoch": 2, "leader": 1,
                      "log_start_offset": start},
            "snapshots": None if snaps is None else [snap_file(s) for s in snaps]}


def cluster(snapshot: Image | None = None, n2_start: int = 0, log: Log = LOG,
            n3_events: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """n1 (leader) and n2 snapshot at 6; n1 moves its log start there; n3, away meanwhile,
    installs n1's snapshot (FetchSnapshot) and fetches from 6. `snapshot` replaces the true
    image at 6 on every node (they all took or installed the same one)."""
    image = snapshot if snapshot is not None else fold(log, START)
    n1 = node(1, [ev(1, "high-watermark", 10.0, epoch=2, hw=8),
                  snap_event(1, 20.0, image, 8),
                  ev(1, "log-start", 21.0, offset=image.end_offset, epoch=image.epoch),
                  ev(1, "high-watermark", 30.0, epoch=2, hw=12)],
              log, image.end_offset, 12, [image])
    n2_events = [ev(2, "high-watermark", 11.0, epoch=2, hw=8), snap_event(2, 22.0, image, 8)]
    if n2_start:
        n2_events.append(ev(2, "log-start", 23.0, offset=n2_start, epoch=image.epoch))
    n2_events.append(ev(2, "high-watermark", 31.0, epoch=2, hw=12))
    n2 = node(2, n2_events, log, n2_start, 12, [image])
    n3 = node(3, n3_events if n3_events is not None else [
        ev(3, "fetch-snapshot", 24.0, end_offset=image.end_offset, epoch=image.epoch,
           position=0, size=300),
        ev(3, "snapshot-install", 25.0, end_offset=image.end_offset, epoch=image.epoch,
           leader=1),
        ev(3, "log-start", 25.0, offset=image.end_offset, epoch=image.epoch),
        ev(3, "high-watermark", 32.0, epoch=2, hw=12)], log, image.end_offset, 12, [image])
    return {"n1": n1, "n2": n2, "n3": n3}


def records(start: int, end: int, log: Log = LOG) -> list[list[Any]]:
    return [[o, None if v is None else int(v)] for o, (_, v) in enumerate(log) if start <= o < end]


Reads = dict[int, tuple[int, int]]  # after the ack at offset o: a read of [from, hw)


# with every node's log beginning at 6: the reads before the snapshot saw every offset below it but 3
BLIND_READS: Reads = {2: (0, 3), 5: (4, 6)}


def history(reads: Reads | None = None) -> Builder:
    """Appends of 100 + o acknowledged at each data offset o; reads (by default one of [0, 8))
    before the snapshot; final reads that begin at the log start 6 on the truncated nodes (the
    client asked from 0 and got OFFSET_OUT_OF_RANGE)."""
    b = Builder()
    for offset, (_, value) in enumerate(LOG):
        if value is not None:
            b.append(1, int(value), offset)
            start, hw = (reads if reads is not None else {7: (0, 8)}).get(offset, (None, 0))
            if start is not None:
                b.read(2, start, hw, records(start, hw))
    b.nemesis("stop-partition")
    tail = records(START, 12)
    for process, name in ((3, "n1"), (4, "n3")):
        b.read_invoke(process, 0, name, final=True)
        b.read_ok(process, START, 12, tail, name, final=True)
    return b


def check_nodes(tmp_path: Path, nodes: dict[str, dict[str, Any]],
                b: Builder | None = None) -> dict[str, Any]:
    run = write_run(tmp_path, b.ops if b else [], nodes=nodes)
    dirs = {p.name: p for p in (run / "nodes").iterdir()}
    parsed = checkers.append_history.parse(b.ops) if b else None
    return snapshots.check(node_data.read(dirs), parsed)


def check_run(tmp_path: Path, nodes: dict[str, dict[str, Any]], b: Builder) -> dict[str, Any]:
    return workloads.check_run(write_run(tmp_path, b.ops, {"outcome": "complete"}, nodes=nodes))


# healthy ------------------------------------------------------------------------------------------


def test_a_healthy_truncated_run_is_valid_and_its_snapshots_verified(tmp_path: Path) -> None:
    result = check_run(tmp_path, cluster(), history())
    assert result["valid"] is True, result["anomalies"]
    snaps = result["checkers"]["snapshots"]
    # n1, n2 (file and event each, merged) and n3 (the installed file): all folds of the log
    assert (snaps["snapshots"], snaps["verified"], snaps["unverifiable"]) == (3, 3, 0)
    assert snaps["installs"] == 1 and snaps["fetch_snapshot_chunks"] == 1
    assert snaps["log_start_offsets"] == {"n1": 6, "n2": 0, "n3": 6}
    assert result["checkers"]["raft-invariants"]["valid"] is True


def test_final_reads_from_the_log_start_do_not_lose_the_writes_below_it(tmp_path: Path) -> None:
    b = history()
    result = workloads.check(b.ops, {"workload": "append", "outcome": "complete"})
    assert result["valid"] is True, result["anomalies"]
    # the same final reads starting at 0 with nothing below 6 would lose the writes there
    for op in b.ops:
        if op.get("final") and op["type"] == "ok":
            op["value"]["from"] = 0
    result = workloads.check(b.ops, {"workload": "append", "outcome": "complete"})
    assert result["anomaly_types"] == ["lost-write"]


# snapshot-disagreement ----------------------------------------------------------------------------


def test_two_nodes_snapshots_of_one_id_that_differ(tmp_path: Path) -> None:
    nodes = cluster()
    other = list(LOG)
    other[3] = (1, b"999")
    nodes["n2"]["snapshots"] = [snap_file(fold(other, START))]
    # no log and no history: which one is right is unknown, that they differ is not
    for files in nodes.values():
        files["log"] = []
    result = check_nodes(tmp_path, nodes)
    assert result["anomaly_types"] == ["snapshot-disagreement"]
    [anomaly] = result["anomalies"]["snapshot-disagreement"]
    assert anomaly["end_offset"] == 6 and anomaly["nodes"] == ["n1", "n2"]
    assert "node n2 (file 00000000000000000006-0000000001.checkpoint)" in anomaly["explanation"]
    assert result["unverifiable"] == 4 and result["verified"] == 0


def test_snapshots_of_one_id_that_agree_are_no_disagreement(tmp_path: Path) -> None:
    nodes = cluster()
    for files in nodes.values():
        files["log"] = []
    result = check_nodes(tmp_path, nodes)
    assert result["valid"] is True, result["anomalies"]


def test_kv_maps_that_differ_under_one_digest_disagree(tmp_path: Path) -> None:
    nodes = cluster()
    nodes["n2"]["snapshots"][0]["kv"] = [["x", 1]]
    result = check_nodes(tmp_path, nodes)
    assert "snapshot-disagreement" in result["anomaly_types"]
    assert "key 'x': None vs 1" in result["anomalies"]["snapshot-disagreement"][0]["explanation"]


# snapshot-log-mismatch ----------------------------------------------------------------------------


def test_an_off_by_one_snapshot_is_not_the_fold_of_its_prefix(tmp_path: Path) -> None:
    # KAFKA-14618: the snapshot names end offset 6 but holds only [0, 5); every node has it
    result = check_run(tmp_path, cluster(snapshot=fold(LOG, START - 1, claim=START)), history())
    assert result["valid"] is False
    assert result["checkers"]["snapshots"]["anomaly_types"] == ["snapshot-log-mismatch"]
    found = result["anomalies"]["snapshot-log-mismatch"]
    assert {a["nodes"][0] for a in found} == {"n1", "n2", "n3"}
    assert "it holds 4 data records, the log 5" in found[0]["explanation"]


def test_an_off_by_one_snapshot_over_a_control_record_is_caught_by_its_epoch(
        tmp_path: Path) -> None:
    # ending at 7 but holding [0, 6): the missing offset 6 is the epoch-2 LeaderChange, so the
    # records and digest agree; the epoch (1, the last applied) does not match the log's 2
    lying = fold(LOG, 6, claim=7)
    nodes = cluster()
    nodes["n2"]["snapshots"].append(snap_file(lying))
    result = check_nodes(tmp_path, nodes, history())
    assert result["anomaly_types"] == ["snapshot-log-mismatch"]
    [anomaly] = result["anomalies"]["snapshot-log-mismatch"]
    assert "its epoch is 1, the committed entry at offset 6 has epoch 2" in anomaly["explanation"]
    assert result["verified"] == 3


def blind_to_3() -> Builder:
    """No read saw offset 3, and its append is not in the history either."""
    b = history(BLIND_READS)
    b.ops = [op for op in b.ops if not (op["f"] == "append" and op["value"]["value"] == 103)]
    for i, op in enumerate(b.ops):
        op["index"] = i
    return b


def test_an_offset_known_from_nowhere_makes_a_snapshot_unverifiable(tmp_path: Path) -> None:
    # every log begins at 6, and no read saw offset 3: nothing to compare the snapshot with
    nodes = cluster(n2_start=START)
    b = blind_to_3()
    result = check_nodes(tmp_path, nodes, b)
    assert result["valid"] is True, result["anomalies"]
    assert (result["verified"], result["unverifiable"]) == (0, 3)


def test_past_a_gap_snapshots_are_checked_against_the_snapshot_before(tmp_path: Path) -> None:
    nodes = cluster(n2_start=START)
    b = blind_to_3()
    later = fold(LOG, 10)
    nodes["n1"]["snapshots"].append(snap_file(later))
    assert check_nodes(tmp_path / "a", nodes, b)["valid"] is True
    nodes["n1"]["snapshots"][-1] = snap_file(fold(LOG, 9, claim=10))
    result = check_nodes(tmp_path / "b", nodes, b)
    assert result["anomaly_types"] == ["snapshot-log-mismatch"]
    explanation = result["anomalies"]["snapshot-log-mismatch"][0]["explanation"]
    assert "is not the fold of snapshot 6-1" in explanation
    assert "one of the two snapshots" in explanation


def test_a_wrong_snapshot_past_a_gap_is_reported_once_not_at_every_later_one(
        tmp_path: Path) -> None:
    # the snapshot at 6 (unverifiable: offset 3 is known from nowhere) lacks offset 5; the true
    # snapshots at 8 and 10 are each the fold of the one before and the log: only 8 is blamed
    nodes = cluster(snapshot=fold(LOG, START - 1, claim=START), n2_start=START)
    nodes["n1"]["snapshots"] += [snap_file(fold(LOG, 8)), snap_file(fold(LOG, 10))]
    result = check_nodes(tmp_path, nodes, blind_to_3())
    assert result["anomaly_types"] == ["snapshot-log-mismatch"]
    [anomaly] = result["anomalies"]["snapshot-log-mismatch"]
    assert anomaly["end_offset"] == 8
    assert (result["verified"], result["unverifiable"]) == (0, 4)


KV_LOG: Log = [(1, None), (1, encode_write("x", 1)), (1, encode_write("y", 2)),
               (1, encode_cas("x", 1, 3)), (1, encode_cas("y", 9, 4)), (1, b"12"),
               (2, None), (2, encode_write("y", 5))]


def kv_cluster(snapshot: Image) -> dict[str, dict[str, Any]]:
    nodes = cluster(snapshot=snapshot, log=KV_LOG)
    for files in nodes.values():
        files["final"]["high_watermark"] = 8
    return nodes


def kv_history() -> list[dict[str, Any]]:
    b = Builder()
    b.r_write(1, "x", 1)
    b.r_write(1, "y", 2)
    b.invoke(1, "cas", {"key": "x", "from": 1, "to": 3})
    b.complete(1, "ok", {"key": "x", "from": 1, "to": 3, "swapped": True})
    b.r_read(2, "x", 3)
    return b.ops


def test_kv_snapshots_are_checked_in_the_kv_suite(tmp_path: Path) -> None:
    image = fold(KV_LOG, START)
    assert image.kv == {"x": 3, "y": 2}
    run = write_run(tmp_path / "a", kv_history(), {"workload": "kv", "outcome": "complete"},
                    kv_cluster(image))
    result = workloads.check_run(run)
    assert result["valid"] is True, result["anomalies"]
    assert result["checkers"]["snapshots"]["verified"] == 3
    # a map the commands do not give, under the right digest (the map was applied wrongly)
    wrong = fold(KV_LOG, START)
    wrong.kv["y"] = 4
    run = write_run(tmp_path / "b", kv_history(), {"workload": "kv", "outcome": "complete"},
                    kv_cluster(wrong))
    result = workloads.check_run(run)
    assert result["valid"] is False
    assert result["anomaly_types"] == ["snapshot-log-mismatch"]
    assert "key 'y': 4 vs 2" in result["anomalies"]["snapshot-log-mismatch"][0]["explanation"]


def test_kv_log_without_payloads_still_checks_record_counts(tmp_path: Path) -> None:
    nodes = kv_cluster(fold(KV_LOG, START))
    for files in nodes.values():
        for line in files["log"]:
            line.pop("payload", None)
    result = check_nodes(tmp_path / "a", nodes)
    assert result["valid"] is True and result["verified"] == 0
    nodes = kv_cluster(fold(KV_LOG, START - 1, claim=START))
    for files in nodes.values():
        for line in files["log"]:
            line.pop("payload", None)
    result = check_nodes(tmp_path / "b", nodes)
    assert result["anomaly_types"] == ["snapshot-log-mismatch"]


# snapshot-beyond-hw -------------------------------------------------------------------------------


def test_a_snapshot_beyond_the_high_watermark_it_records(tmp_path: Path) -> None:
    nodes = cluster()
    nodes["n1"]["events"][3]["hw"] = 5  # the snapshot event at 6 says the hw was 5
    result = check_nodes(tmp_path, nodes, history())
    assert result["anomaly_types"] == ["snapshot-beyond-hw"]
    assert "beyond the high watermark 5" in result["anomalies"]["snapshot-beyond-hw"][0][
        "explanation"]


def test_a_snapshot_beyond_every_high_watermark_reported_by_then(tmp_path: Path) -> None:
    nodes = cluster()
    del nodes["n1"]["events"][3]["hw"]  # it does not say; the nodes reported at most 8 by then
    assert check_nodes(tmp_path / "a", nodes, history())["valid"] is True
    # snapshot-uncommitted: taken at 10 (the log end) while every reported hw was at most 8
    nodes["n1"]["events"].insert(4, snap_event(1, 20.5, fold(LOG, 10), None))
    result = check_nodes(tmp_path / "b", nodes, history())
    assert result["anomaly_types"] == ["snapshot-beyond-hw"]
    [anomaly] = result["anomalies"]["snapshot-beyond-hw"]
    assert anomaly["hw"] == 8 and anomaly["end_offset"] == 10


def test_a_snapshot_file_beyond_every_high_watermark_of_the_run(tmp_path: Path) -> None:
    log = [*LOG, (2, b"112"), (2, b"113")]
    nodes = cluster(log=log)
    nodes["n2"]["snapshots"].append(snap_file(fold(log, 14)))
    result = check_nodes(tmp_path, nodes)
    assert result["anomaly_types"] == ["snapshot-beyond-hw"]
    assert "ends beyond 12" in result["anomalies"]["snapshot-beyond-hw"][0]["explanation"]


# log-start-without-snapshot -----------------------------------------------------------------------


def test_a_log_start_moved_before_its_snapshot_was_durable(tmp_path: Path) -> None:
    nodes = cluster()
    events = nodes["n1"]["events"]
    events[3], events[4] = events[4], events[3]  # delete-before-snapshot: log-start, then snapshot
    result = check_nodes(tmp_path, nodes, history())
    assert result["anomaly_types"] == ["log-start-without-snapshot"]
    [anomaly] = result["anomalies"]["log-start-without-snapshot"]
    assert anomaly["offset"] == 6 and anomaly["nodes"] == ["n1"]


def test_an_install_may_write_its_log_start_before_or_after_the_install_event(
        tmp_path: Path) -> None:
    nodes = cluster()
    events = nodes["n3"]["events"]
    events[3], events[4] = events[4], events[3]
    assert check_nodes(tmp_path, nodes, history())["valid"] is True


def test_a_final_log_start_with_no_snapshot_file_ending_there(tmp_path: Path) -> None:
    nodes = cluster()
    nodes["n3"]["snapshots"] = []
    result = check_nodes(tmp_path, nodes, history())
    assert result["anomaly_types"] == ["log-start-without-snapshot"]
    assert "final log start offset 6" in result["anomalies"]["log-start-without-snapshot"][0][
        "explanation"]
    # no snapshots.jsonl at all: a target that does not report snapshots is not judged on them
    nodes["n3"]["snapshots"] = None
    assert check_nodes(tmp_path / "b", nodes, history())["valid"] is True


def test_a_log_found_invalid_at_restart_is_evidence(tmp_path: Path) -> None:
    nodes = cluster()
    nodes["n2"]["events"] += [ev(2, "stop", 40.0, pid=2), ev(2, "start", 41.0, pid=22),
                              ev(2, "log-invalid", 41.5, log_start_offset=6,
                                 reason="no valid snapshot ends at or after 6")]
    result = check_nodes(tmp_path, nodes, history())
    assert result["anomaly_types"] == ["log-start-without-snapshot"]
    assert result["anomalies"]["log-start-without-snapshot"][0]["event"]["log_start_offset"] == 6


def test_a_log_reset_after_the_harness_damaged_the_snapshot_is_counted_not_an_anomaly(
        tmp_path: Path) -> None:
    import datetime as dt

    from checkers.compose import damaged_snapshots

    nodes = cluster()
    nodes["n2"]["events"] += [ev(2, "stop", 40.0, pid=2), ev(2, "start", 41.0, pid=22),
                              ev(2, "log-invalid", 41.5, log_start_offset=6,
                                 reason="no valid snapshot ends at or after 6")]
    run = write_run(tmp_path, history().ops, nodes=nodes)
    data = node_data.read({p.name: p for p in (run / "nodes").iterdir()})

    def corrupt_op(at_ms: float, file: str) -> dict[str, Any]:
        wall = dt.datetime.fromtimestamp(at_ms / 1000.0, dt.UTC).isoformat(timespec="milliseconds")
        return {"process": "nemesis", "type": "ok", "f": "start-corrupt", "wall": wall,
                "value": {"nodes": ["n2"], "damage": {"n2": {"file": file}}}}

    damaged = damaged_snapshots([corrupt_op(39.0, "__cluster_metadata-0/"
                                            "00000000000000000006-0000000001.checkpoint")])
    assert damaged == {"n2": [39.0]}
    result = snapshots.check(data, None, damaged)
    assert result["valid"] is True and result["log_reset_after_damage"] == 1
    # damage after the reset, or to another file, excuses nothing
    for history_ops in ([corrupt_op(42.0, "__cluster_metadata-0/x.checkpoint")],
                        [corrupt_op(39.0, "__cluster_metadata-0/00000000000000000000.log")]):
        result = snapshots.check(data, None, damaged_snapshots(history_ops))
        assert result["anomaly_types"] == ["log-start-without-snapshot"]


# lost-write below the log start -------------------------------------------------------------------

def test_a_write_below_the_log_start_proven_present_by_a_verified_snapshot(
        tmp_path: Path) -> None:
    result = check_run(tmp_path, cluster(n2_start=START), history(BLIND_READS))
    assert result["valid"] is True, result["anomalies"]
    snaps = result["checkers"]["snapshots"]
    assert snaps["writes_below_log_start"] == {"acked_below_log_start": 5, "proven_present": 5,
                                               "unverifiable": 0}
    assert snaps["verified"] == 3


def test_a_write_below_the_log_start_missing_from_a_verified_snapshot(tmp_path: Path) -> None:
    # the committed log held 999 at offset 3, not the acknowledged 103: the write was lost, and
    # the final reads (from 6) cannot show it
    lost = list(LOG)
    lost[3] = (1, b"999")
    b = history(BLIND_READS)
    result = check_run(tmp_path, cluster(snapshot=fold(lost, START), n2_start=START, log=lost), b)
    assert result["valid"] is False
    assert result["anomaly_types"] == ["lost-write"]
    [anomaly] = result["anomalies"]["lost-write"]
    assert anomaly["values"] == [103] and anomaly["offsets"] == [3]
    ack = next(op for op in b.ops if op["type"] == "ok" and op["f"] == "append"
               and op["value"]["value"] == 103)
    assert ack["index"] in anomaly["ops"]
    assert result["checkers"]["log-anomalies"]["valid"] is True  # only the snapshot shows it


def test_writes_below_the_log_start_with_no_snapshot_are_unverifiable(tmp_path: Path) -> None:
    nodes = cluster(n2_start=START)
    for files in nodes.values():  # a target that reports no snapshots, only its log start
        files["snapshots"] = None
        files["events"] = [e for e in files["events"] if e["type"] not in ("snapshot", "log-start")]
    result = check_nodes(tmp_path, nodes, history(BLIND_READS))
    assert result["valid"] is True, result["anomalies"]
    assert result["writes_below_log_start"] == {"acked_below_log_start": 5, "proven_present": 0,
                                                "unverifiable": 5}


# the raft invariants over logs that begin at a snapshot --------------------------------------------


def test_raft_invariants_over_logs_starting_at_their_snapshot(tmp_path: Path) -> None:
    nodes = cluster()
    run = write_run(tmp_path, [], nodes=nodes)
    data = node_data.read({p.name: p for p in (run / "nodes").iterdir()})
    acked = [(0, 100 + o, o) for o in range(1, 12) if o != 6]
    assert raft_invariants.check(data, acked)["valid"] is True
    # a committed value differing on an offset two nodes hold is still found
    nodes["n3"]["log"][2]["value"] = 999
    run = write_run(tmp_path / "b", [], nodes=nodes)
    data = node_data.read({p.name: p for p in (run / "nodes").iterdir()})
    assert raft_invariants.check(data, acked)["anomaly_types"] == ["log-divergence"]


def test_committed_kv_commands_that_differ_are_a_divergence(tmp_path: Path) -> None:
    nodes = kv_cluster(fold(KV_LOG, START))
    nodes["n2"]["log"][7]["payload"] = encode_write("y", 6).decode()  # n1 and n3: ("y", 5)
    run = write_run(tmp_path, [], nodes=nodes)
    data = node_data.read({p.name: p for p in (run / "nodes").iterdir()})
    result = raft_invariants.check(data)
    assert result["anomaly_types"] == ["log-divergence"]
    assert '"value": 6' in result["anomalies"]["log-divergence"][0]["explanation"]


def test_truncation_by_a_snapshot_install_is_not_a_committed_truncation(tmp_path: Path) -> None:
    def events(end: int) -> list[dict[str, Any]]:
        return [ev(3, "high-watermark", 5.0, epoch=2, hw=4),
                ev(3, "truncate", 25.0, epoch=2, offset=0, reason="log reset"),
                ev(3, "snapshot-install", 25.0, end_offset=end, epoch=1, leader=1)]
    nodes = cluster(n3_events=events(6))
    run = write_run(tmp_path, [], nodes=nodes)
    data = node_data.read({p.name: p for p in (run / "nodes").iterdir()})
    assert raft_invariants.check(data)["valid"] is True
    # a snapshot that ends below what the node had committed does not cover the truncation
    nodes = cluster(n3_events=events(3))
    run = write_run(tmp_path / "b", [], nodes=nodes)
    data = node_data.read({p.name: p for p in (run / "nodes").iterdir()})
    assert raft_invariants.check(data)["anomaly_types"] == ["committed-truncation"]


# reading snapshots.jsonl --------------------------------------------------------------------------


def test_snapshots_jsonl_torn_tail_is_tolerated_and_bad_lines_are_named(tmp_path: Path) -> None:
    run = write_run(tmp_path, [], nodes=cluster())
    path = run / "nodes" / "n1" / "snapshots.jsonl"
    path.write_text(path.read_text() + json.dumps({"file": "x.checkpoint", "valid": False,
                                                   "error": "bad CRC"}) + '\n{"file": "y')
    [data] = node_data.read({"n1": run / "nodes" / "n1"})
    assert data.torn_snapshot_lines == 1 and len(data.snapshots or []) == 2
    assert snapshots.check([data])["invalid_files"] == 1
    path.write_text(json.dumps({"file": "z", "valid": True, "end_offset": 6, "epoch": 1,
                                "records": "five", "digest": "00" * 16}) + "\n")
    [data] = node_data.read({"n1": run / "nodes" / "n1"})
    result = compose._guard(lambda: snapshots.check([data]))
    assert result["valid"] == "unknown"
    assert "node n1: snapshots.jsonl entry 1: `records` must be an integer" in result["error"]


# what a person sees -------------------------------------------------------------------------------


def test_the_summary_and_the_timeline_show_snapshots_were_exercised(tmp_path: Path) -> None:
    b = history(BLIND_READS)
    result = check_run(tmp_path, cluster(n2_start=START), b)
    text = summary.render(result, b.ops)
    assert "snapshots: 3 checked (3 verified against the log, 0 unverifiable), 1 installed" in text
    assert "log start offsets: n1=6, n2=6, n3=6" in text
    assert "acknowledged writes below a log start: 5 (5 proven present by a snapshot" in text
    run = write_run(tmp_path / "t", [], nodes=cluster())
    [n3] = node_data.read({"n3": run / "nodes" / "n3"})
    _, marks = leaders._walk(n3, {}, 0.0, 1e9)
    assert [(m.kind, m.text) for m in marks if m.kind in ("install", "log-start")] == [
        ("install", "install snapshot 6-1 from leader 1"),
        ("log-start", "log start moves to offset 6")]
