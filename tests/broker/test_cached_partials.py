"""Reading many cached partials at once gives exactly the rows of reading each one alone."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_service.cached_partials import (
    COMPRESS_ABOVE_BYTES,
    decode_partial,
    decode_partials,
    encode_partial,
)


def partial(segment: str, rows: int, offset: int = 0) -> pa.Table:
    return pa.table(
        {
            "__segment": [segment] * rows,
            "__bucket": pa.array(range(offset, offset + rows), pa.int64()),
            "a0": pa.array([None if i % 3 == 0 else i for i in range(rows)], pa.int64()),
            "a1": pa.array([i / 7 for i in range(rows)], pa.float64()),
        }
    )


def rows_of(tables: list[pa.Table]) -> list[dict[str, object]]:
    return sorted(
        (r for t in tables for r in t.to_pylist()),
        key=lambda r: (str(r["__segment"]), r["__bucket"]),
    )


def test_shared_schemas_are_read_as_one_stream_with_every_row() -> None:
    tables = [partial(f"s{i}", 1 + i % 4, i * 10) for i in range(300)]
    decoded = decode_partials([encode_partial(t) for t in tables])
    assert decoded.unreadable == []
    assert len(decoded.tables) == 1  # one schema parsed, one table
    assert rows_of(decoded.tables) == rows_of(tables)


def test_different_schemas_compressed_and_empty_partials_mix() -> None:
    big = partial("big", 3000)  # over the compression threshold: zstd record batches
    assert big.nbytes > COMPRESS_ABOVE_BYTES and len(encode_partial(big)) < big.nbytes / 2
    other = pa.table({"__segment": ["x"], "d0": ["Berlin"], "a0": pa.array([1], pa.int64())})
    empty = partial("e", 0)
    tables = [partial("a", 2), big, other, partial("b", 5), empty, partial("c", 1)]
    decoded = decode_partials([encode_partial(t) for t in tables])
    assert decoded.unreadable == []
    assert sum(t.num_rows for t in decoded.tables) == sum(t.num_rows for t in tables)
    assert rows_of([t for t in decoded.tables if "d0" not in t.column_names]) == rows_of(
        [t for t in tables if "d0" not in t.column_names]
    )
    assert next(t for t in decoded.tables if "d0" in t.column_names).equals(other)


def test_unreadable_payloads_are_singled_out_and_the_rest_still_read() -> None:
    tables = [partial(f"s{i}", 2) for i in range(10)]
    payloads = [encode_partial(t) for t in tables]
    payloads[3] = payloads[3][:-20] + payloads[3][-8:]  # truncated body, intact end marker
    payloads[7] = b"not arrow at all"
    decoded = decode_partials(payloads)
    assert decoded.unreadable == [3, 7]
    assert rows_of(decoded.tables) == rows_of([t for i, t in enumerate(tables) if i not in (3, 7)])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), min_size=0, max_size=40))
def test_bulk_read_equals_one_read_per_payload(shapes: list[tuple[int, int]]) -> None:
    def make(kind: int, rows: int, i: int) -> pa.Table:
        t = partial(f"s{i}", rows, i * 100)
        if kind == 1:
            return t.append_column("d0", pa.array([f"v{j}" for j in range(rows)], pa.string()))
        if kind == 3:  # dictionary messages: not read by the batch-only path, read whole instead
            return t.append_column("d0", pa.array([f"v{j % 2}" for j in range(rows)]).dictionary_encode())
        if kind == 2:
            return t.cast(pa.schema([*[*t.schema][:-1], pa.field("a1", pa.float32())]))
        return t

    tables = [make(kind, rows, i) for i, (kind, rows) in enumerate(shapes)]
    payloads = [encode_partial(t) for t in tables]
    one_by_one = [decode_partial(p) for p in payloads]
    decoded = decode_partials(payloads)
    assert decoded.unreadable == []
    for schema in {t.schema.to_string() for t in one_by_one}:
        want = [t for t in one_by_one if t.schema.to_string() == schema]
        got = [t for t in decoded.tables if t.schema.to_string() == schema]
        assert rows_of(got) == rows_of(want)
