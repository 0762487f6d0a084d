"""Python scalar functions the engine's SQL may call, installed on every engine connection.

Druid's `alphanumeric` and `version` orderings have no SQL equivalent, so filters compare through
these. They run on Arrow batches; the Python loop is per distinct-ish value, which is fine for the
dimension columns they are used on. Expressions floor to calendar or zoned periods through
`strata_time_floor` (the timeline's vectorised bucketing) and parse ISO text with Druid's rules
through `strata_time_parse`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from zoneinfo import ZoneInfo

import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from duckdb.func import ARROW, SPECIAL

from strata.query.json_paths import json_paths
from strata.query.string_comparators import Comparator, compare_alphanumeric, compare_version
from timeline import Granularity, parse_granularity, parse_instant

ALPHANUMERIC_CMP = "strata_alphanumeric_cmp"
VERSION_CMP = "strata_version_cmp"


def _arrow_comparator(cmp: Comparator) -> Callable[[pa.Array, pa.Array], pa.Array]:
    def run(left: pa.Array, right: pa.Array) -> pa.Array:
        out = [
            None if a is None or b is None else cmp(a, b)
            for a, b in zip(left.to_pylist(), right.to_pylist(), strict=True)
        ]
        return pa.array(out, pa.int32())

    return run


@functools.lru_cache(maxsize=256)
def _granularity(spec: str) -> Granularity:
    return parse_granularity(orjson.loads(spec))


def _time_floor(times: pa.Array, specs: pa.Array) -> pa.Array:
    spec = specs[0].as_py() if len(specs) else None
    if spec is None:
        return pa.nulls(len(times), pa.int64())
    values = times.to_numpy(zero_copy_only=False)
    valid = pc.is_valid(times).to_numpy(zero_copy_only=False)
    starts = np.zeros(len(values), dtype=np.int64)
    if valid.any():
        starts[valid] = _granularity(spec).bucket_starts(np.asarray(values[valid], dtype=np.int64))
    return pa.array(starts, pa.int64(), mask=~valid)


# Joda's ISO parser (ISODateTimeFormat.dateTimeParser, Druid's time_parse without a pattern) reads
# a year of 1 to 9 digits and a month or day of 1 or 2: `1` is the year 0001, `2001-2-3` a date
_JODA_DATE = re.compile(r"([+-]?)(\d{1,9})(?:-(\d{1,2})(?:-(\d{1,2}))?)?(?=$|[T ])")


@functools.lru_cache(maxsize=4096)
def _parse_one(text: str, zone: str) -> int | None:
    date = _JODA_DATE.match(text)
    if date is not None and len(date[0]) != 10:  # padded as ISO 8601 writes them
        sign, year, month, day = date.groups()
        padded = f"{sign}{year.zfill(4)}" + "".join(f"-{v.zfill(2)}" for v in (month, day) if v)
        text = padded + text[date.end() :]
    if len(text) > 10 and text[10] == " ":  # SQL-style timestamps, as Druid accepts them
        text = text[:10] + "T" + text[11:]
    try:
        return parse_instant(text, None if zone == "UTC" else ZoneInfo(zone))
    except (ValueError, OverflowError):
        return None


def _time_parse(texts: pa.Array, zones: pa.Array) -> pa.Array:
    zone = (zones[0].as_py() if len(zones) else None) or "UTC"
    return pa.array([None if t is None else _parse_one(t, zone) for t in texts.to_pylist()], pa.int64())


def _json_paths(texts: pa.Array) -> pa.Array:
    # a null value is a null literal at the root, as Druid lists it
    return pa.array([["$"] if t is None else json_paths(t) for t in texts.to_pylist()], pa.list_(pa.string()))


def install(conn: duckdb.DuckDBPyConnection) -> None:
    conn.create_function(
        "strata_json_paths", _json_paths, ["VARCHAR"], "VARCHAR[]", type=ARROW, null_handling=SPECIAL,
        side_effects=False,
    )  # fmt: skip
    conn.create_function(
        "strata_time_floor",
        _time_floor,
        ["BIGINT", "VARCHAR"],
        "BIGINT",
        type=ARROW,
        null_handling=SPECIAL,
        side_effects=False,
    )
    conn.create_function(
        "strata_time_parse",
        _time_parse,
        ["VARCHAR", "VARCHAR"],
        "BIGINT",
        type=ARROW,
        null_handling=SPECIAL,
        side_effects=False,
    )
    for name, cmp in ((ALPHANUMERIC_CMP, compare_alphanumeric), (VERSION_CMP, compare_version)):
        conn.create_function(
            name,
            _arrow_comparator(cmp),
            ["VARCHAR", "VARCHAR"],
            "INTEGER",
            type=ARROW,
            null_handling=SPECIAL,
            side_effects=False,
        )
