"""Splitting gathered partials by segment: the same tables as a filter per segment (the oracle)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_service.segment_cache import split_by_segment
from strata.query import SEGMENT_COLUMN

SEGMENTS = [f"ds_2020-01-01T{h:02d}_v1" for h in range(6)]


def oracle(partials: list[pa.Table], wanted: set[str]) -> dict[str, list[dict[str, object]]]:
    table = pa.concat_tables(partials, promote_options="permissive")
    return {sid: table.filter(pc.equal(table[SEGMENT_COLUMN], sid)).to_pylist() for sid in wanted}


rows = st.lists(st.tuples(st.sampled_from(SEGMENTS), st.integers(-5, 5)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(rows, min_size=1, max_size=4), st.sets(st.sampled_from(SEGMENTS), min_size=1))
def test_same_rows_in_the_same_order_as_a_filter_per_segment(
    pieces: list[list[tuple[str, int]]], wanted: set[str]
) -> None:
    partials = [
        pa.table({"value": pa.array([v for _, v in p], pa.int64()), SEGMENT_COLUMN: pa.array([s for s, _ in p], pa.string())})
        for p in pieces
    ]  # fmt: skip
    got = split_by_segment(partials, wanted)
    assert set(got) == wanted
    assert {sid: t.to_pylist() for sid, t in got.items()} == oracle(partials, wanted)
    assert all(t.schema == partials[0].schema for t in got.values())


def test_rows_without_a_segment_belong_to_none() -> None:
    table = pa.table({"value": [1, 2, 3], SEGMENT_COLUMN: pa.array(["a", None, "a"], pa.string())})
    got = split_by_segment([table], {"a", "b"})
    assert got["a"].to_pylist() == [{"value": 1, SEGMENT_COLUMN: "a"}, {"value": 3, SEGMENT_COLUMN: "a"}]
    assert got["b"].num_rows == 0


def test_no_segment_column_or_nothing_wanted_gives_nothing() -> None:
    assert split_by_segment([pa.table({"value": [1]})], {"a"}) == {}
    assert split_by_segment([pa.table({SEGMENT_COLUMN: ["a"]})], set()) == {}
