"""Whole-array ranks (groupBy over ARRAY columns, limitSpec on them) against Druid's array order
written out in plain Python: element by element, a null element before any value, an array before
every longer array it is a prefix of, a null array before all."""

from __future__ import annotations

import functools
import random
from typing import Any

import pyarrow as pa
import pytest

from strata.query.orderings import ordinal


def _compare(a: list[Any] | None, b: list[Any] | None) -> int:
    if a is None or b is None:
        return (a is not None) - (b is not None)
    for x, y in zip(a, b, strict=False):
        if x is None or y is None:
            if (x is None) != (y is None):
                return -1 if x is None else 1
            continue
        if x != y:
            return -1 if x < y else 1
    return (len(a) > len(b)) - (len(a) < len(b))


def _oracle_ranks(rows: list[list[Any] | None]) -> list[int]:
    """Dense ranks from 0 with nulls present, from 1 without: what `ordinal` promises."""
    distinct: list[list[Any] | None] = []
    for r in sorted(rows, key=functools.cmp_to_key(_compare)):
        if not distinct or _compare(distinct[-1], r) != 0:
            distinct.append(r)
    base = 0 if any(r is None for r in rows) else 1

    def rank(r: list[Any] | None) -> int:
        return next(i for i, d in enumerate(distinct) if _compare(d, r) == 0) + base

    return [rank(r) for r in rows]


ELEMENTS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "long": (pa.int64(), [-3, -1, 0, 2, 10, 2**40]),
    "double": (pa.float64(), [-1.5, 0.0, 0.25, 3.0, 1e300]),
    "string": (pa.string(), ["", "a", "ab", "b", "Z", "é", "😀"]),
}


@pytest.mark.parametrize("kind", sorted(ELEMENTS))
@pytest.mark.parametrize("seed", range(6))
def test_array_ranks_follow_druid_array_order(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    value_type, pool = ELEMENTS[kind]

    def element() -> Any:
        return None if rng.random() < 0.15 else rng.choice(pool)

    rows = [
        None if rng.random() < 0.1 else [element() for _ in range(rng.randint(0, 4))]
        for _ in range(rng.randint(1, 120))
    ]
    array = pa.array(rows, pa.list_(value_type))
    assert ordinal(array).tolist() == _oracle_ranks(rows)
    assert ordinal(array.cast(pa.large_list(value_type))).tolist() == _oracle_ranks(rows)
    if len(rows) > 2:  # a slice: offsets that do not start at zero
        assert ordinal(array.slice(1, len(rows) - 2)).tolist() == _oracle_ranks(rows[1:-1])


def test_prefixes_and_null_elements_by_hand() -> None:
    rows: list[list[Any] | None] = [[1, 2], [1], None, [], [None], [1, None], [1, 2, 0], [0, 5], [1]]
    # null < [] < [None] < [0, 5] < [1] < [1, None] < [1, 2] < [1, 2, 0]
    expected = [6, 4, 0, 1, 2, 5, 7, 3, 4]
    assert _oracle_ranks(rows) == expected
    assert ordinal(pa.array(rows, pa.list_(pa.int64()))).tolist() == expected


@pytest.mark.parametrize("seed", range(3))
def test_long_arrays_past_one_packed_key(seed: int) -> None:
    """Arrays too long for one 63-bit key of element codes rank through DuckDB's list order."""
    rng = random.Random(seed)
    rows: list[list[Any] | None] = [
        None if rng.random() < 0.1 else [None if rng.random() < 0.1 else rng.randrange(40)
                                         for _ in range(rng.randint(0, 30))]
        for _ in range(200)
    ]  # fmt: skip
    rows += [[1] * 30, [1] * 29, [1] * 29 + [None]]
    assert ordinal(pa.array(rows, pa.list_(pa.int64()))).tolist() == _oracle_ranks(rows)


INTEGER_EDGES: dict[str, tuple[pa.DataType, list[int]]] = {
    "int8": (pa.int8(), [-128, -1, 0, 127]),
    "int64 extremes": (pa.int64(), [-(2**63), -1, 0, 2**63 - 1]),
    "uint64 high": (pa.uint64(), [2**64 - 1, 2**64 - 2, 2**63]),
    "int64 lowest": (pa.int64(), [-(2**63), -(2**63) + 1, -(2**63) + 7]),
    "int64 wide": (pa.int64(), [0, 1, 2**40, 2**40 + 1]),  # 42-bit distances: ranks, not distances
}


@pytest.mark.parametrize("kind", sorted(INTEGER_EDGES))
@pytest.mark.parametrize("length", [1, 2, 5])
def test_integer_elements_at_their_types_edges(kind: str, length: int) -> None:
    """Integer elements are coded by their distance from the smallest where it fits the key, by
    their ranks where it does not: both must keep Druid's order at the edges of every type."""
    rng = random.Random(length)
    value_type, pool = INTEGER_EDGES[kind]
    rows: list[list[Any] | None] = [
        None if rng.random() < 0.1 else [None if rng.random() < 0.1 else rng.choice(pool)
                                         for _ in range(rng.randint(0, length))]
        for _ in range(150)
    ]  # fmt: skip
    array = pa.array(rows, pa.list_(value_type))
    assert ordinal(array).tolist() == _oracle_ranks(rows)
    assert ordinal(array.slice(3, 100)).tolist() == _oracle_ranks(rows[3:103])


def test_arrays_of_only_null_elements() -> None:
    rows: list[list[Any] | None] = [[None], [], None, [None, None], [None]]
    assert ordinal(pa.array(rows, pa.list_(pa.int64()))).tolist() == _oracle_ranks(rows)


@pytest.mark.filterwarnings("error")  # numpy warns of an int64 overflow
def test_keys_filling_all_63_bits() -> None:
    """Seven elements of 9-bit codes make keys up to 2**63 - 1: ranked without overflow."""
    rng = random.Random(7)
    rows: list[list[Any] | None] = [
        [rng.choice([0, 1, 508, 509]) for _ in range(rng.randint(0, 7))] for _ in range(300)
    ]
    rows += [[509] * 7, [509] * 6 + [508], [509] * 7, None]
    assert ordinal(pa.array(rows, pa.list_(pa.int64()))).tolist() == _oracle_ranks(rows)
