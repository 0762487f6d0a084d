"""bench.answer_parse's bodies: the same groups in each row shape, checked against plain Python
counting the generated rows (the oracle), so the parse figures compare like with like."""

from __future__ import annotations

import json
from collections import Counter

import orjson

from bench.answer_parse import TIMESTAMP, bodies
from bench.multi_value import rows_table


def test_every_row_shape_holds_the_groups_of_the_rows() -> None:
    generated = rows_table(3_000, 2)
    counts: Counter[tuple[int, ...] | None] = Counter()
    sums: Counter[tuple[int, ...] | None] = Counter()
    for nums, added in zip(
        generated.column("nums").to_pylist(), generated.column("added").to_pylist(), strict=True
    ):
        key = None if nums is None else tuple(nums)
        counts[key] += 1
        sums[key] += added
    expected = {k: (counts[k], sums[k]) for k in counts}
    answers = bodies(generated)

    objects = orjson.loads(answers["objects"])
    assert {o["version"] for o in objects} == {"v1"} and {o["timestamp"] for o in objects} == {TIMESTAMP}
    events = [o["event"] for o in objects]
    assert {_key(e["nums"]): (e["rows"], e["added"]) for e in events} == expected
    assert len(events) == len(expected)

    arrays = orjson.loads(answers["resultAsArray"])
    assert {_key(n): (c, s) for n, c, s in arrays} == expected and len(arrays) == len(expected)

    sql = orjson.loads(answers["SQL array"])
    assert all(n is None or (isinstance(n, str) and " " not in n) for n, _, _ in sql)  # Druid's compact text
    assert {_key(None if n is None else json.loads(n)): (c, s) for n, c, s in sql} == expected


def _key(nums: list[int] | None) -> tuple[int, ...] | None:
    return None if nums is None else tuple(nums)
