"""Reading many cached partials at once gives exactly the rows of reading each one alone."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_service.cached_partials import (
    COMPRESS_ABOVE_BYTES,
    DecodedPartials,
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


def test_shared_schemas_compressed_and_empty_partials() -> None:
    big = partial("big", 3000)  # over the compression threshold: zstd record batches
    assert big.nbytes > COMPRESS_ABOVE_BYTES and len(encode_partial(big)) < big.nbytes / 2
    other = pa.table({"__segment": ["x"], "d0": ["Berlin"], "a0": pa.array([1], pa.int64())})
    tables = [
        partial("a", 2),
        big,
        other,
        partial("b", 5),
        partial("e", 0),
        *(partial(f"s{i}", 1) for i in range(50)),
    ]
    decoded = decode_partials([encode_partial(t) for t in tables])
    assert len(decoded) == len(tables)
    for want, got in zip(tables, decoded, strict=True):
        assert got is not None and got.equals(want)


def test_unreadable_payloads_are_singled_out_and_the_rest_still_read() -> None:
    tables = [partial(f"s{i}", 2) for i in range(10)]
    payloads = [encode_partial(t) for t in tables]
    payloads[3] = payloads[3][:-20] + payloads[3][-8:]  # truncated body, intact end marker
    payloads[7] = b"not arrow at all"
    decoded = decode_partials(payloads)
    assert [i for i, t in enumerate(decoded) if t is None] == [3, 7]
    for i, table in enumerate(decoded):
        if i not in (3, 7):
            assert table is not None and table.equals(tables[i])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), min_size=0, max_size=40))
def test_bulk_read_equals_one_read_per_payload(shapes: list[tuple[int, int]]) -> None:
    def make(kind: int, rows: int, i: int) -> pa.Table:
        t = partial(f"s{i}", rows, i * 100)
        if kind == 3:  # dictionary messages: not read by the batch-only path, read whole instead
            return t.append_column("d0", pa.array([f"v{j % 2}" for j in range(rows)]).dictionary_encode())
        if kind == 2:
            return t.cast(pa.schema([*[*t.schema][:-1], pa.field("a1", pa.float32())]))
        if kind == 1:
            return t.append_column("d0", pa.array([f"v{j}" for j in range(rows)], pa.string()))
        return t

    payloads = [encode_partial(make(kind, rows, i)) for i, (kind, rows) in enumerate(shapes)]
    one_by_one = [decode_partial(p) for p in payloads]
    for want, got in zip(one_by_one, decode_partials(payloads), strict=True):
        assert got is not None and got.equals(want)


def test_the_memo_answers_only_for_the_exact_payload_it_decoded() -> None:
    memo = DecodedPartials()
    first, second = partial("s", 3), partial("s", 4)
    p1, p2 = encode_partial(first), encode_partial(second)
    [got] = memo.decode([("k", p1)])
    assert got is not None and got.equals(first) and len(memo) == 1
    [again] = memo.decode([("k", bytes(bytearray(p1)))])  # equal bytes from a remote cache
    assert again is got
    [changed] = memo.decode([("k", p2)])  # the same key now holds another value: decoded afresh
    assert changed is not None and changed.equals(second)
    [broken] = memo.decode([("other", b"garbage")])
    assert broken is None and len(memo) == 1  # unreadable payloads are not remembered
    memo.remember([("put", p1, first)])
    [remembered] = memo.decode([("put", p1)])
    assert remembered is first


def test_the_memo_is_bounded_by_bytes() -> None:
    memo = DecodedPartials(max_bytes=64 * 1024)
    for i in range(200):
        memo.decode([(i, encode_partial(partial(f"s{i}", 20)))])
    assert 0 < len(memo) < 200
