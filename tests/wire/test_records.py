"""RecordBatch helpers for the append workload (docs/contracts.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference_node.wire import ProtocolError
from reference_node.wire.records import (
    build_append_batch,
    build_batch,
    decode_value,
    parse_batches,
    read_values,
)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=20),
       st.integers(0, 2**40), st.integers(-1, 2**31 - 1))
def test_append_values_round_trip(values: list[int], base: int, epoch: int) -> None:
    data = build_append_batch(values, base_offset=base, epoch=epoch)
    assert read_values(data) == [(base + i, v) for i, v in enumerate(values)]
    (batch,) = parse_batches(data)
    assert batch.epoch == epoch and not batch.is_control


def test_value_is_ascii_decimal_with_null_key() -> None:
    (batch,) = parse_batches(build_append_batch([42]))
    assert batch.records == ((0, None, b"42"),)


def test_foreign_and_control_records_read_as_none() -> None:
    data = build_batch(0, 1, [b"x", b"12"]) + build_batch(2, 1, [b"\x00\x00"], control=True)
    assert read_values(data) == [(0, None), (1, 12), (2, None)]
    assert decode_value(b"") is None and decode_value(b"-3") == -3 and decode_value(None) is None


def test_trailing_partial_batch_is_dropped_and_corruption_is_an_error() -> None:
    whole = build_append_batch([1, 2])
    assert read_values(whole + whole[:20]) == [(0, 1), (1, 2)]
    corrupt = bytearray(whole)
    corrupt[-1] ^= 0xFF
    with pytest.raises(ProtocolError):
        parse_batches(bytes(corrupt))
