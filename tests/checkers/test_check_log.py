"""The append-workload checkers on hand-built histories: each anomaly, and valid cases that are
easy to get wrong (concurrency, indeterminate appends, reads racing appends)."""

from __future__ import annotations

from typing import Any

import pytest
from chk_histories import Builder

import workloads


def verdict(b: Builder) -> dict[str, Any]:
    return workloads.check(b.ops, {"workload": "append"})


def kinds(result: dict[str, Any]) -> list[str]:
    return list(result["anomaly_types"])


def ops_of(result: dict[str, Any], kind: str) -> list[list[int]]:
    return [a["ops"] for a in result["anomalies"][kind]]


# valid ------------------------------------------------------------------------------------------


def test_sequential_appends_and_reads_are_valid() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.append(1, 11, 1)
    b.read(2, 0, 2, [[0, 10], [1, 11]])
    b.read(2, 1, 2, [[1, 11]])
    result = verdict(b)
    assert result["valid"] is True, result["anomalies"]
    assert set(result["checkers"]) == {"log-linearizable", "log-anomalies", "completeness"}


def test_concurrent_appends_may_take_offsets_in_either_order() -> None:
    b = Builder()
    b.append_invoke(1, 10)
    b.append_invoke(2, 11)
    b.append_ok(1, 10, 1)  # the later invoke got the earlier offset: fine, they overlapped
    b.append_ok(2, 11, 0)
    b.read(3, 0, 2, [[0, 11], [1, 10]])
    assert verdict(b)["valid"] is True


def test_read_racing_an_append_may_miss_it_or_see_it() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.append_invoke(1, 11)
    b.read(2, 0, 1, [[0, 10]])  # misses 11: concurrent
    b.read(3, 0, 2, [[0, 10], [1, 11]])  # sees 11 before its ack: concurrent too
    b.append_ok(1, 11, 1)
    assert verdict(b)["valid"] is True


def test_indeterminate_append_that_lands_is_valid() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.append(2, 11, None, "info")
    b.read(3, 0, 2, [[0, 10], [1, 11]])
    assert verdict(b)["valid"] is True


def test_indeterminate_append_that_never_lands_is_valid() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.append(2, 11, None, "info")
    b.append(3, 12, 1)
    b.read(4, 0, 2, [[0, 10], [1, 12]])
    assert verdict(b)["valid"] is True


def test_indeterminate_append_may_land_long_after_its_info() -> None:
    b = Builder()
    b.append(1, 10, None, "info")
    b.read(2, 0, 0, [])
    b.append(3, 11, 0)
    b.read(2, 0, 2, [[0, 11], [1, 10]])  # 10 took effect after a later append: allowed
    assert verdict(b)["valid"] is True


def test_control_records_and_reads_from_an_offset_are_skipped() -> None:
    b = Builder()
    b.append(1, 10, 1)
    b.append(1, 11, 3)
    b.read(2, 0, 4, [[0, None], [1, 10], [2, None], [3, 11]])
    b.read(2, 2, 4, [[2, None], [3, 11]])
    assert verdict(b)["valid"] is True


def test_failed_append_that_is_not_visible_is_valid() -> None:
    b = Builder()
    b.append(1, 10, None, "fail")
    b.append(2, 11, 0)
    b.read(3, 0, 1, [[0, 11]])
    assert verdict(b)["valid"] is True


def test_replaced_processes_after_info_keep_their_own_order() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 1, [[0, 10]])
    b.read_invoke(2, 0)
    b.complete(2, "info", None)
    b.read(7, 0, 1, [[0, 10]])  # process 7 replaces 2; same view again is fine
    assert verdict(b)["valid"] is True


# anomalies --------------------------------------------------------------------------------------


def test_lost_write_acknowledged_value_missing_from_covering_read() -> None:
    b = Builder()
    _, ack = b.append(1, 10, 0)
    b.append(1, 11, 1)
    _, read = b.read(2, 0, 2, [[0, None], [1, 11]])
    result = verdict(b)
    assert result["valid"] is False
    assert "lost-write" in kinds(result)
    assert [ack, read] == [i for i in ops_of(result, "lost-write")[0] if i in (ack, read)]


def test_lost_write_from_the_final_read() -> None:
    b = Builder()
    b.nemesis("start-partition")
    _, ack = b.append(1, 10, 0)
    b.nemesis("stop-partition")
    _, final = b.read(2, 0, 0, [], node="n2")
    result = verdict(b)
    assert "lost-write" in kinds(result)
    lost = result["anomalies"]["lost-write"][0]
    assert ack in lost["ops"] and final in lost["ops"]
    assert "final read" in lost["explanation"]


def test_final_reads_of_nothing_after_acknowledged_appends_lose_every_one() -> None:
    # every node answers "the log does not exist" (NATS's stream not found after a power loss
    # of every node): definite reads of nothing, which lose each acknowledged append
    b = Builder()
    acks = [b.append(1, value, offset)[1] for offset, value in enumerate((10, 11, 12))]
    b.nemesis("start-power-loss")
    b.nemesis("stop-power-loss")
    finals = []
    for process, node in enumerate(("n1", "n2", "n3"), start=2):
        b.invoke(process, "read", {"from": 0}, node, final=True)
        finals.append(b.complete(process, "ok", {"from": 0, "hw": 0, "records": [],
                                                 "absent": True}, node, final=True))
    result = verdict(b)
    assert result["valid"] is False
    assert result["checkers"]["completeness"]["valid"] is True  # the reads succeeded
    # each acknowledged value is lost once, witnessed by every final read, the first the proof
    lost = {a["value"]: (a["witnesses"], a["first_witness"], a["ops"][-1])
            for a in result["anomalies"]["lost-write"]}
    assert lost == {value: (3, finals[0], finals[0]) for value in (10, 11, 12)}
    assert all(a["ops"][1] in acks for a in result["anomalies"]["lost-write"])


def test_final_flag_picks_the_final_reads() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.append_invoke(1, 11)
    # the last read of the node, not flagged final, races the append of 11: no judgement there
    b.read(3, 0, 1, [[0, 10]], final=True)
    b.append_ok(1, 11, 1)
    b.read(2, 0, 1, [[0, 10]])
    result = verdict(b)
    final_lost = [a for a in result["anomalies"].get("lost-write", []) if "final" in a["explanation"]]
    assert final_lost == []
    # the unflagged last read is stale (it began after the ack of 11), and says so
    assert "stale-read" in kinds(result)


def test_stale_read_misses_an_append_acknowledged_before_it_began() -> None:
    b = Builder()
    b.append(1, 10, 0)
    _, ack = b.append(1, 11, 1)
    start, done = b.read(2, 0, 1, [[0, 10]])
    b.read(3, 0, 2, [[0, 10], [1, 11]])
    result = verdict(b)
    assert kinds(result) == ["stale-read"]
    assert ops_of(result, "stale-read") == [[ack, start, done]]


def test_stale_read_against_an_earlier_read_of_another_process() -> None:
    b = Builder()
    b.append(1, 10, None, "info")
    _, first = b.read(2, 0, 1, [[0, 10]])
    start, done = b.read(3, 0, 0, [])
    b.read(4, 0, 1, [[0, 10]])  # the final read sees it
    result = verdict(b)
    assert kinds(result) == ["stale-read"]
    assert ops_of(result, "stale-read") == [[first, start, done]]


def test_nonmonotonic_read_within_one_process() -> None:
    b = Builder()
    b.append(1, 10, None, "info")
    _, first = b.read(2, 0, 1, [[0, 10]], node="n1")
    start, done = b.read(2, 0, 0, [], node="n2")
    b.read(3, 0, 1, [[0, 10]])
    result = verdict(b)
    assert "nonmonotonic-read" in kinds(result)
    assert ops_of(result, "nonmonotonic-read") == [[first, start, done]]


def test_duplicate_value_at_two_offsets() -> None:
    b = Builder()
    _, ack = b.append(1, 10, 0)
    _, read = b.read(2, 0, 2, [[0, 10], [1, 10]])
    result = verdict(b)
    assert kinds(result) == ["duplicate"]
    assert ops_of(result, "duplicate") == [[ack, read]]


def test_inconsistent_offsets_two_values_at_one_offset() -> None:
    b = Builder()
    _, ack10 = b.append(1, 10, 0)
    _, ack11 = b.append(2, 11, 0)
    result = verdict(b)
    assert "inconsistent-offsets" in kinds(result)
    assert ops_of(result, "inconsistent-offsets") == [[ack10, ack11]]


def test_inconsistent_offsets_between_two_reads() -> None:
    b = Builder()
    b.append(1, 10, None, "info")
    b.append(2, 11, None, "info")
    _, r1 = b.read(3, 0, 1, [[0, 10]])
    _, r2 = b.read(4, 0, 1, [[0, 11]])
    result = verdict(b)
    assert "inconsistent-offsets" in kinds(result)
    assert ops_of(result, "inconsistent-offsets") == [[r1, r2]]
    assert result["anomalies"]["inconsistent-offsets"][0]["offset"] == 0


def test_phantom_value_never_appended() -> None:
    b = Builder()
    b.append(1, 10, 0)
    _, read = b.read(2, 0, 2, [[0, 10], [1, 99]])
    result = verdict(b)
    assert kinds(result) == ["phantom"]
    assert ops_of(result, "phantom") == [[read]]


def test_failed_write_visible() -> None:
    b = Builder()
    start, fail = b.append(1, 10, None, "fail")
    _, read = b.read(2, 0, 1, [[0, 10]])
    result = verdict(b)
    assert kinds(result) == ["failed-write-visible"]
    assert ops_of(result, "failed-write-visible") == [[start, fail, read]]


def test_append_placed_below_an_earlier_completed_append_is_nonlinearizable() -> None:
    b = Builder()
    b.append(1, 10, 5)
    _, late = b.append(1, 11, 3)  # began after 10 was acknowledged at 5, yet sits at 3
    result = verdict(b)
    assert kinds(result) == ["nonlinearizable"]
    assert late in ops_of(result, "nonlinearizable")[0]


def test_anomaly_names_op_details_for_the_summary() -> None:
    from checkers import summary

    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 1, [[0, 99]])
    result = verdict(b)
    text = summary.render(result, b.ops)
    assert "INVALID" in text and "phantom" in text and "inconsistent-offsets" in text
    assert "#3 t=0.003s process=2 node=n1 ok read" in text


@pytest.mark.parametrize("bad", [
    {"value": "ten"},
    {"value": 10, "offset": "0"},
])
def test_malformed_append_value_gives_unknown_not_a_pass(bad: dict[str, Any]) -> None:
    b = Builder()
    b.append_invoke(1, 10)
    b.complete(1, "ok", bad)
    result = verdict(b)
    assert result["valid"] == "unknown"
    assert "append-parse" in result["checkers"]
    assert "value" in result["checkers"]["append-parse"]["error"]


def test_a_phantom_in_the_same_read_does_not_hide_a_lost_write() -> None:
    b = Builder()
    _, ack = b.append(1, 10, 1)
    _, read = b.read(2, 0, 2, [[0, 99], [1, None]])
    b.read(3, 0, 2, [[0, 99], [1, 10]])
    result = verdict(b)
    assert {"phantom", "lost-write"} <= set(kinds(result))
    assert [ack, read] == [i for i in ops_of(result, "lost-write")[0] if i in (ack, read)]


def test_a_lost_value_is_one_anomaly_however_many_reads_lack_it() -> None:
    # 10 and 11 acknowledged, then lost: three reads lack both (six value-read pairs)
    b = Builder()
    b.append(1, 10, 0)
    b.append(1, 11, 1)
    b.append(1, 12, 2)
    b.read(2, 0, 3, [[0, 10], [1, 11], [2, 12]])  # seen once
    _, first = b.read(2, 0, 3, [[0, None], [1, None], [2, 12]])
    b.read(3, 0, 3, [[0, None], [1, None], [2, 12]])
    _, last = b.read(4, 0, 3, [[0, None], [1, None], [2, 12]])
    result = verdict(b)
    log = result["checkers"]["log-anomalies"]
    assert log["anomaly_counts"] == {"lost-write": 2}
    lost = result["anomalies"]["lost-write"]
    assert [a["value"] for a in lost] == [10, 11]
    assert [(a["witnesses"], a["first_witness"]) for a in lost] == [(3, first), (3, first)]
    assert all(first in a["ops"] and last not in a["ops"] for a in lost)
    assert "2 later reads lack it too" in lost[0]["explanation"]
    assert (log["acknowledged_appends"], log["lost_acknowledged"], log["lost_indeterminate"]) \
        == (3, 2, 0)


def test_the_summary_says_how_many_acknowledged_appends_were_lost() -> None:
    from checkers import summary

    b = Builder()
    b.append(1, 10, 0)
    b.append(1, 11, 1)
    b.append(1, 12, 2)
    b.read(2, 0, 3, [[0, 10], [1, 11], [2, 12]])
    for process in (3, 4, 5):
        b.read(process, 0, 3, [[0, 10], [1, None], [2, 12]])
    text = summary.render(verdict(b), b.ops)
    assert "  lost-write: 1 of 3 acknowledged appends lost\n" in text, text


def test_lost_writes_past_the_listed_ones_are_at_least_the_larger_count() -> None:
    from checkers import summary
    from checkers.result import MAX_PER_KIND

    many = MAX_PER_KIND + 10
    listed = [{"ops": [], "explanation": f"value {v}", "value": v} for v in range(MAX_PER_KIND)]
    checkers = {
        "log-anomalies": {"valid": False, "anomaly_counts": {"lost-write": many},
                          "acknowledged_appends": 500, "lost_acknowledged": many,
                          "lost_indeterminate": 0},
        "raft-invariants": {"valid": False, "anomaly_counts": {"lost-write": 3},
                            "acknowledged_appends": 500, "lost_acknowledged": 3},
        "snapshots": {"valid": False, "anomaly_counts": {"lost-write": 1}},
    }
    text = summary.render({"valid": False, "checkers": checkers,
                           "anomalies": {"lost-write": listed}}, [])
    assert f"  lost-write: at least {many} of 500 acknowledged appends lost (log-anomalies: " \
        f"{many}, raft-invariants: 3); snapshots: 1\n" in text, text


def test_an_indeterminate_append_read_and_then_lost_is_counted_apart() -> None:
    from checkers import summary

    b = Builder()
    b.append(1, 10, 0)
    b.append(1, 11, None, "info")
    b.read(2, 0, 2, [[0, 10], [1, 11]])  # 11 is in the log
    b.read(3, 0, 2, [[0, 10], [1, None]])  # and then it is not
    result = verdict(b)
    log = result["checkers"]["log-anomalies"]
    [lost] = result["anomalies"]["lost-write"]
    assert (lost["value"], lost["acknowledged"], lost["witnesses"]) == (11, False, 1)
    assert (log["acknowledged_appends"], log["lost_acknowledged"], log["lost_indeterminate"]) \
        == (1, 0, 1)
    assert "lost-write: 0 of 1 acknowledged appends lost, and 1 indeterminate append that reads " \
        "had shown" in summary.render(result, b.ops)


def test_a_read_lacking_a_duplicated_value_twice_is_one_witness() -> None:
    b = Builder()
    b.append(1, 10, 0)
    b.read(2, 0, 2, [[0, 10], [1, 10]])  # 10 at two offsets
    _, first = b.read(3, 0, 2, [[0, None], [1, None]])  # lacks it at both
    b.read(4, 0, 2, [[0, None], [1, None]])
    result = verdict(b)
    [lost] = result["anomalies"]["lost-write"]
    assert (lost["witnesses"], lost["first_witness"]) == (2, first)


def test_a_value_at_three_offsets_is_one_duplicate() -> None:
    b = Builder()
    _, ack = b.append(1, 10, 0)
    _, read = b.read(2, 0, 3, [[0, 10], [1, 10], [2, 10]])
    result = verdict(b)
    assert result["checkers"]["log-anomalies"]["anomaly_counts"] == {"duplicate": 1}
    [duplicate] = result["anomalies"]["duplicate"]
    assert (duplicate["value"], duplicate["offsets"], duplicate["ops"]) == (10, [0, 1, 2], [ack, read])


def test_an_offset_with_three_values_is_one_inconsistency() -> None:
    b = Builder()
    _, ack = b.append(1, 10, 0)
    b.append(1, 11, None, "info")
    b.append(1, 12, None, "info")
    _, r1 = b.read(2, 0, 1, [[0, 11]])
    _, r2 = b.read(3, 0, 1, [[0, 12]])
    result = verdict(b)
    assert result["checkers"]["log-anomalies"]["anomaly_counts"]["inconsistent-offsets"] == 1
    [inconsistent] = result["anomalies"]["inconsistent-offsets"]
    assert (inconsistent["offset"], inconsistent["values"], inconsistent["ops"]) \
        == (0, [10, 11, 12], [ack, r1, r2])


def test_malformed_record_names_the_op_and_record() -> None:
    b = Builder()
    b.append(1, 10, 0)
    _, read = b.read(2, 0, 1, [[0, 10], ["one", 11]])
    result = verdict(b)
    assert result["valid"] == "unknown"
    assert f"op {read}: a record is [offset, value or null], got ['one', 11]" in \
        result["checkers"]["append-parse"]["error"]
