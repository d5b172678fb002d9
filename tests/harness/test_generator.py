"""Pure generators: same seed, same ops; asking twice consumes nothing; limits hold."""

from __future__ import annotations

from contracts.generator import PENDING, Context, Limit, Stagger, TimeLimit, take
from workloads.append import AppendOps


def test_same_seed_same_ops_and_asking_twice_consumes_nothing() -> None:
    ctx = Context(time=0, free=(0, 1, 2))
    gen = AppendOps(state=42)
    first, _ = gen.op(ctx)
    again, _ = gen.op(ctx)
    assert first == again
    assert take(AppendOps(state=42), ctx, 50) == take(AppendOps(state=42), ctx, 50)
    assert take(AppendOps(state=42), ctx, 50) != take(AppendOps(state=43), ctx, 50)


def test_append_values_are_unique_and_reads_start_within_what_was_seen() -> None:
    ops = take(AppendOps(state=1), Context(0, (0,)), 400)
    values = [op["value"]["value"] for op in ops if op["f"] == "append"]
    assert len(values) == len(set(values)) > 100
    assert all(op["value"]["from"] == 0 for op in ops if op["f"] == "read")
    grown = AppendOps(state=1).update(Context(0, (0,)), {"type": "ok", "f": "append",
                                                        "value": {"value": 1, "offset": 30}})
    starts = [op["value"]["from"] for op in take(grown, Context(0, (0,)), 400)
              if op["f"] == "read"]
    assert max(starts) <= 30 and any(s > 0 for s in starts)


def test_no_free_process_is_pending() -> None:
    op, _ = AppendOps(state=1).op(Context(0, ()))
    assert op is PENDING


def test_stagger_spaces_ops_and_time_limit_ends_them() -> None:
    gen = TimeLimit(Stagger(AppendOps(state=5), interval=100, state=9), limit=10_000)
    times = [op["time"] for op in take(gen, Context(0, (0,)), 10_000)]
    assert times == sorted(times)
    assert times[-1] < 10_000
    assert 50 <= len(times) <= 200  # about limit / interval


def test_limit_counts_ops() -> None:
    assert len(take(Limit(AppendOps(state=3), 7), Context(0, (0,)), 100)) == 7
