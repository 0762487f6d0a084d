"""A day of rows with multi-value strings, arrays and nested JSON, as input and as Druid reads it.

Written apart from Strata's engine and ingestion: the rows are generated here, written as JSON
lines for `strata ingest` (through `runner.ingest_all`, so the same three segmentations), and
loaded into DuckDB as `rows_in` with each column already in the form Druid's documentation gives it:

- `tags` (a `string` dimension, `multiValueHandling` SORTED_ARRAY, the default) and `labels`
  (SORTED_SET): the row's values sorted (nulls first), duplicates kept for SORTED_ARRAY and
  dropped for SORTED_SET; a row with no value (absent, `null`, `[]`, `[null]`) is the one value
  null, so `raw.tags` is never an empty list (`multi-value-dimensions.md`: value filters matching
  null match empty rows, grouping puts them under null).
- `nums` (`auto`, ARRAY<LONG>) and `words` (`auto`, ARRAY<STRING>): the array as given; `null`,
  `[]` and `[null]` stay three values (`arrays.md`).
- `attrs` (`json`, COMPLEX<json>): the JSON text; objects of several depths, paths present in some
  rows only, `user` an object in most rows and a string or null in others.
- `page`, `added`, `deleted`, `delta`: plain columns the native generator's aggregators read.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import duckdb

from tests.differential.generator import DAY_MS

ROWS = 3000
SEED = 37
TAGS = ["a", "b", "c", "d", "e", ""]
LABELS = ["x", "y", "z"]
WORDS = ["p", "q", "r", "s"]
KINDS = ["click", "view", "buy"]
PAGES = [f"page{i}" for i in range(12)]
FILE = "mv-rows.json"


def _no_value(roll: float, cuts: tuple[float, float, float]) -> tuple[bool, Any]:
    """(True, `null` / `[]` / `[null]`) when `roll` falls under the first, second or third cut."""
    for cut, value in zip(cuts, (None, [], [None]), strict=True):
        if roll < cut:
            return True, value
    return False, None


def _multi(rnd: random.Random, vocabulary: list[str]) -> Any:
    roll = rnd.random()
    missing, value = _no_value(roll, (0.15, 0.22, 0.25))
    if missing:
        return value
    if roll < 0.40:
        return rnd.choice(vocabulary)  # a plain string
    if roll < 0.50:
        return [rnd.choice(vocabulary)]  # a one-value list
    values: list[str | None] = [rnd.choice(vocabulary) for _ in range(rnd.randint(2, 4))]
    if rnd.random() < 0.3:
        values.append(values[0])  # a duplicate inside the row
    if rnd.random() < 0.1:
        values.append(None)
    rnd.shuffle(values)
    return values


def _array(rnd: random.Random, make: Any) -> Any:
    missing, value = _no_value(rnd.random(), (0.15, 0.25, 0.28))
    if missing:
        return value
    values = [make() for _ in range(rnd.randint(1, 4))]
    if rnd.random() < 0.05:
        values.insert(rnd.randrange(len(values) + 1), None)
    return values


def _attrs(rnd: random.Random) -> Any:
    roll = rnd.random()
    if roll < 0.1:
        return None
    out: dict[str, Any] = {}
    if rnd.random() < 0.8:
        out["kind"] = rnd.choice(KINDS)
    user_roll = rnd.random()
    if user_roll < 0.6:
        user: dict[str, Any] = {"id": rnd.randint(1, 6)}
        if rnd.random() < 0.7:
            user["name"] = rnd.choice(["ann", "bob", "cy"])
        if rnd.random() < 0.3:
            user["geo"] = {"city": rnd.choice(["Paris", "Oslo", "Lima"])}
        out["user"] = user
    elif user_roll < 0.7:
        out["user"] = "anonymous"  # a scalar where other rows hold an object
    elif user_roll < 0.75:
        out["user"] = None
    if rnd.random() < 0.5:
        out["score"] = rnd.choice([0.5, 1.5, 2.25, 3.0])
    return out


def generate_rows(n: int = ROWS, seed: int = SEED) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    rows = []
    for _ in range(n):
        row: dict[str, Any] = {
            "ms": DAY_MS + rnd.randrange(24 * 3_600_000),
            "page": rnd.choice(PAGES),
            "added": rnd.randint(0, 300),
            "deleted": rnd.randint(0, 50),
            "delta": rnd.randint(-100, 200),
            "tags": _multi(rnd, TAGS),
            "labels": _multi(rnd, LABELS),
            "nums": _array(rnd, lambda: rnd.randint(0, 5)),
            "words": _array(rnd, lambda: rnd.choice(WORDS)),
            "attrs": _attrs(rnd),
        }
        rows.append(row)
    return rows


def index_spec(base_dir: Path) -> dict[str, Any]:
    dimensions = [
        "page",
        {"name": "added", "type": "long"},
        {"name": "deleted", "type": "long"},
        {"name": "delta", "type": "long"},
        {"name": "tags", "type": "string"},
        {"name": "labels", "type": "string", "multiValueHandling": "SORTED_SET"},
        {"name": "nums", "type": "auto"},
        {"name": "words", "type": "auto"},
        {"name": "attrs", "type": "json"},
    ]
    return {"type": "index_parallel", "spec": {
        "dataSchema": {"dataSource": "mv", "timestampSpec": {"column": "ts", "format": "millis"},
                       "dimensionsSpec": {"dimensions": dimensions}, "metricsSpec": [],
                       "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none",
                                           "intervals": ["2015-09-12/2015-09-13"], "rollup": False}},
        "ioConfig": {"type": "index_parallel", "inputSource": {"type": "local", "baseDir": str(base_dir),
                                                               "filter": FILE},
                     "inputFormat": {"type": "json"}}}}  # fmt: skip


def write_input(root: Path, rows: list[dict[str, Any]]) -> tuple[Path, Path]:
    """The rows as JSON lines (absent keys where a value is None at random) and the index spec:
    (sample file, spec file), as `runner.ingest_all` takes them."""
    rnd = random.Random(0)
    root.mkdir(parents=True, exist_ok=True)
    sample = root / FILE
    with sample.open("w") as out:
        for row in rows:
            line = {"ts": row["ms"], **{k: v for k, v in row.items() if k != "ms"}}
            line = {k: v for k, v in line.items() if v is not None or rnd.random() < 0.5}
            out.write(json.dumps(line) + "\n")
    spec = root / "mv-index.json"
    spec.write_text(json.dumps(index_spec(root)))
    return sample, spec


def druid_values(value: Any, distinct: bool) -> list[str | None]:
    """A multi-value STRING row as Druid reads it: sorted (nulls first), SORTED_SET without
    duplicates; no value at all is the one value null."""
    values = value if isinstance(value, list) else [] if value is None else [value]
    if distinct:
        values = list(dict.fromkeys(values))
    values = sorted(values, key=lambda v: (v is not None, v or ""))
    return values if any(v is not None for v in values) or len(values) > 1 else [None]


def input_table(rows: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    """A DuckDB holding the rows as `rows_in`, each column as Druid reads it."""
    conn = duckdb.connect()
    conn.execute("SET TimeZone='UTC'")
    conn.execute(
        "CREATE TABLE rows_in (ms BIGINT, t TIMESTAMP, page VARCHAR, added BIGINT, deleted BIGINT, delta BIGINT,"
        " tags VARCHAR[], labels VARCHAR[], nums BIGINT[], words VARCHAR[], attrs JSON)"
    )
    if not rows:
        return conn
    conn.executemany(
        "INSERT INTO rows_in VALUES (?, make_timestamp(? * 1000), ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (r["ms"], r["ms"], r["page"], r["added"], r["deleted"], r["delta"],
             druid_values(r["tags"], distinct=False), druid_values(r["labels"], distinct=True),
             r["nums"], r["words"], None if r["attrs"] is None else json.dumps(r["attrs"]))
            for r in rows
        ],
    )  # fmt: skip
    return conn
