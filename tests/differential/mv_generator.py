"""Random native queries over tests.differential.mv_data's rows, each with Druid's answer in DuckDB.

What the SQL over `raw` encodes (Druid's `multi-value-dimensions.md`, `arrays.md`, `nested-columns.md`,
`dimensionspecs.md`, `filters.md`):

- a value filter on a multi-value string matches a row when any value matches; it is unknown (so
  neither it nor its `not` matches) when no value matches and some value is null; a row with no
  value is the one value null;
- `arrayContainsElement` on an array: some element equal (a null element is not); a null array is
  unknown; on a multi-value string, as `equals` on its values;
- grouping (groupBy, topN) on a multi-value string counts a row once under each of its values,
  duplicates included (SORTED_ARRAY keeps them), a row with no value under null, two such
  dimensions every pair; `listFiltered` / `prefixFiltered` / `regexFiltered` (a whole match) keep
  some values first, a row left with none under null;
- an ARRAY dimension groups whole arrays (`null`, `[]`, `[null]` apart);
- `nested-field` and `json_value` read a literal at the path (null when the path is missing or
  holds an object, or the value has another type).
"""

from __future__ import annotations

import json
import random
from typing import Any

import duckdb

from tests.differential.generator import AGGS, GRANS, gen_intervals, gen_posts, iso
from tests.differential.mv_data import KINDS, LABELS, PAGES, TAGS, WORDS, input_table
from tests.differential.oracle import DimensionOrder, Spec

MV = {"tags": TAGS, "labels": LABELS}

VIRTUAL_COLUMNS: list[tuple[dict[str, Any], str]] = [
    ({"type": "nested-field", "columnName": "attrs", "outputName": "v_uid", "path": "$.user.id",
      "expectedType": "LONG"},
     "CASE WHEN json_type(attrs, '$.user.id') IN ('BIGINT', 'UBIGINT') THEN json_extract(attrs, '$.user.id')::BIGINT END"),
    ({"type": "nested-field", "columnName": "attrs", "outputName": "v_city", "pathParts": [
        {"type": "field", "field": "user"}, {"type": "field", "field": "geo"}, {"type": "field", "field": "city"}],
      "expectedType": "STRING"},
     "CASE WHEN json_type(attrs, '$.user.geo.city') = 'VARCHAR' THEN json_extract_string(attrs, '$.user.geo.city') END"),
    ({"type": "expression", "name": "v_kind", "expression": "json_value(attrs, '$.kind')", "outputType": "STRING"},
     "CASE WHEN json_type(attrs, '$.kind') = 'VARCHAR' THEN json_extract_string(attrs, '$.kind') END"),
    ({"type": "expression", "name": "v_name", "expression": "json_value(attrs, '$.user.name')",
      "outputType": "STRING"},
     "CASE WHEN json_type(attrs, '$.user.name') = 'VARCHAR' THEN json_extract_string(attrs, '$.user.name') END"),
]  # fmt: skip
"""(virtual column, its value in DuckDB over the input rows): every generated query declares them."""
NESTED_STRINGS = {"v_kind": KINDS, "v_name": ["ann", "bob", "cy", "zed"], "v_city": ["Paris", "Oslo", "Lima"]}


def oracle_connection(rows: list[dict[str, Any]]) -> duckdb.DuckDBPyConnection:
    """The rows as `raw`: the input columns and each virtual column under its name."""
    conn = input_table(rows)
    columns = ", ".join(f"{sql} AS {vc.get('outputName') or vc['name']}" for vc, sql in VIRTUAL_COLUMNS)
    conn.execute(f"CREATE VIEW raw AS SELECT *, {columns} FROM rows_in")
    return conn


def _q(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def any_value(column: str, predicate: str) -> str:
    """Three-valued 'some value matches' over a list column (`x` the value in `predicate`)."""
    return (f"(CASE WHEN len(list_filter({column}, lambda x: {predicate})) > 0 THEN TRUE "
            f"WHEN len(list_filter({column}, lambda x: ({predicate}) IS NULL)) > 0 THEN NULL ELSE FALSE END)")  # fmt: skip


def _value_filter(rnd: random.Random, col: str, values: list[str], x: str) -> tuple[dict[str, Any], str]:
    """A string value filter on `col` and its predicate on one value `x`."""
    roll = rnd.random()
    value = rnd.choice(values)
    if roll < 0.25:
        if rnd.random() < 0.2:
            return {"type": "selector", "dimension": col, "value": None}, f"{x} IS NULL"
        return {"type": "selector", "dimension": col, "value": value}, f"{x} = {_q(value)}"
    if roll < 0.40:
        vals = rnd.sample(values, k=min(2, len(values)))
        with_null = rnd.random() < 0.3
        sql = f"({x} IN ({', '.join(map(_q, vals))})" + (f" OR {x} IS NULL)" if with_null else ")")
        return {"type": "in", "dimension": col, "values": [*vals, *([None] if with_null else [])]}, sql
    if roll < 0.52:
        if rnd.random() < 0.5:  # no lower bound: null sorts first and matches
            upper = rnd.choice(["b", "c", "y", "Lima", "click"])
            return {"type": "bound", "dimension": col, "upper": upper, "upperStrict": True}, (
                f"({x} IS NULL OR {x} < {_q(upper)})"
            )
        lower = rnd.choice(["", "a", "c", "x", "bob"])
        flt = {"type": "bound", "dimension": col, "lower": lower, "lowerStrict": rnd.random() < 0.5}
        return flt, f"{x} {'>' if flt['lowerStrict'] else '>='} {_q(lower)}"
    if roll < 0.64:
        prefix = value[:1]
        return {"type": "like", "dimension": col, "pattern": prefix + "%"}, f"{x} LIKE {_q(prefix + '%')}"
    if roll < 0.76:
        pattern = rnd.choice(["^[ab]", "c|d", "^$", "y", "o"])
        return {"type": "regex", "dimension": col, "pattern": pattern}, f"regexp_matches({x}, {_q(pattern)})"
    if roll < 0.88:
        return {"type": "null", "column": col}, f"{x} IS NULL"
    equals = {"type": "equals", "column": col, "matchValueType": "STRING", "matchValue": value}
    return equals, f"{x} = {_q(value)}"


def gen_filter(rnd: random.Random, depth: int = 0) -> tuple[dict[str, Any], str]:
    """A Druid filter over the multi-value, array and nested columns and its SQL over `raw`."""
    roll = rnd.random()
    if depth < 2 and roll < 0.15:
        kind = rnd.choice(["and", "or"])
        parts = [gen_filter(rnd, depth + 1) for _ in range(rnd.randint(2, 3))]
        sql = "(" + f" {kind.upper()} ".join(p[1] for p in parts) + ")"
        return {"type": kind, "fields": [p[0] for p in parts]}, sql
    if depth < 2 and roll < 0.27:
        inner, sql = gen_filter(rnd, depth + 1)
        return {"type": "not", "field": inner}, f"(NOT {sql})"
    if roll < 0.55:
        col = rnd.choice(list(MV))
        flt, predicate = _value_filter(rnd, col, MV[col], "x")
        return flt, any_value(col, predicate)
    if roll < 0.72:
        return _contains(rnd)
    if roll < 0.78:
        col = rnd.choice(["nums", "words"])
        if rnd.random() < 0.5:
            return {"type": "null", "column": col}, f"({col} IS NULL)"
        value: list[Any] = [1, 2] if col == "nums" else ["p"]
        typ = "ARRAY<LONG>" if col == "nums" else "ARRAY<STRING>"
        literal = "[1, 2]::BIGINT[]" if col == "nums" else "['p']::VARCHAR[]"
        return {
            "type": "equals",
            "column": col,
            "matchValueType": typ,
            "matchValue": value,
        }, f"({col} = {literal})"
    if roll < 0.90:
        col = rnd.choice(list(NESTED_STRINGS))
        flt, predicate = _value_filter(rnd, col, NESTED_STRINGS[col], col)
        return flt, f"({predicate})"
    if roll < 0.96:
        lo = rnd.randint(0, 6)
        flt = {"type": "range", "column": "v_uid", "matchValueType": "LONG", "lower": lo,
               "lowerOpen": rnd.random() < 0.5}  # fmt: skip
        return flt, f"(v_uid {'>' if flt['lowerOpen'] else '>='} {lo})"
    page = rnd.choice(PAGES)
    return {"type": "selector", "dimension": "page", "value": page}, f"(page = {_q(page)})"


def _contains(rnd: random.Random) -> tuple[dict[str, Any], str]:
    col = rnd.choice(["tags", "nums", "words"])
    if col == "tags":
        v = rnd.choice(TAGS)
        flt = {"type": "arrayContainsElement", "column": col, "elementMatchValueType": "STRING",
               "elementMatchValue": v}  # fmt: skip
        return flt, any_value(col, f"x = {_q(v)}")
    element: Any = rnd.randint(0, 6) if col == "nums" else rnd.choice(WORDS)
    literal = str(element) if col == "nums" else _q(element)
    flt = {"type": "arrayContainsElement", "column": col,
           "elementMatchValueType": "LONG" if col == "nums" else "STRING", "elementMatchValue": element}  # fmt: skip
    # ArrayContainsElementFilter: a null array is unknown; otherwise true or false (a null element is
    # simply not equal)
    return flt, f"(len(list_filter({col}, lambda x: x = {literal})) > 0)"


def _kept(column: str, predicate: str) -> str:
    """The values of `column` a filtered dimension spec keeps; the one value null when none."""
    kept = f"list_filter({column}, lambda x: {predicate})"
    return f"(CASE WHEN len({kept}) = 0 THEN [NULL]::VARCHAR[] ELSE {kept} END)"


def gen_dimension(rnd: random.Random, out: str, *, arrays: bool = True) -> tuple[Any, str, bool]:
    """(dimension spec named `out`, its SQL over `raw`, whether the SQL is a list to explode)."""
    roll = rnd.random()
    if roll < 0.30:
        col = rnd.choice(list(MV))
        return {"type": "default", "dimension": col, "outputName": out}, col, True
    delegate = {"type": "default", "dimension": "tags", "outputName": out}
    if roll < 0.40:
        allow = rnd.random() < 0.6
        values = rnd.sample(TAGS, 2)
        listed = ", ".join(map(_q, values))
        predicate = f"x IN ({listed})" if allow else f"(x IS NULL OR x NOT IN ({listed}))"
        spec = {"type": "listFiltered", "delegate": delegate, "values": values, "isWhitelist": allow}
        return spec, _kept("tags", predicate), True
    if roll < 0.48:
        prefix = rnd.choice(["a", "b", "e"])
        return ({"type": "prefixFiltered", "delegate": delegate, "prefix": prefix},
                _kept("tags", f"starts_with(x, {_q(prefix)})"), True)  # fmt: skip
    if roll < 0.55:
        pattern = rnd.choice(["[ab]", "c|d", "[a-c]"])
        return ({"type": "regexFiltered", "delegate": delegate, "pattern": pattern},
                _kept("tags", f"regexp_full_match(x, {_q(pattern)})"), True)  # fmt: skip
    if arrays and roll < 0.72:
        col = rnd.choice(["nums", "words"])
        typ = "ARRAY<LONG>" if col == "nums" else "ARRAY<STRING>"
        return {"type": "default", "dimension": col, "outputName": out, "outputType": typ}, col, False
    if roll < 0.80:
        return (
            {"type": "default", "dimension": "v_uid", "outputName": out, "outputType": "LONG"},
            "v_uid",
            False,
        )
    if roll < 0.93:
        col = rnd.choice(list(NESTED_STRINGS))
        return {"type": "default", "dimension": col, "outputName": out}, col, False
    return {"type": "default", "dimension": "page", "outputName": out}, "page", False


def exploded(dims: list[tuple[str, str, bool]]) -> str:
    """`raw` with each dimension as a column under its output name, one row per value of each
    list dimension (every combination of two)."""
    source = "raw"
    for out, sql, explode in dims:
        value = f"unnest({sql})" if explode else sql
        source = f"(SELECT *, {value} AS {out} FROM {source})"
    return source


def generate(rnd: random.Random, data_source: str) -> Spec:
    kind = rnd.choice(["timeseries", "groupBy", "groupBy", "groupBy", "topN", "topN", "scan", "timeBoundary"])
    intervals = gen_intervals(rnd)
    flt, where = gen_filter(rnd) if rnd.random() < 0.85 else (None, "TRUE")
    while kind == "timeBoundary" and flt is not None and '"v_' in json.dumps(flt):
        flt, where = gen_filter(rnd)  # Druid's timeBoundary has no virtual columns
    aggs = rnd.sample(AGGS, k=rnd.randint(1, 3))
    if rnd.random() < 0.5 and AGGS[0] not in aggs:
        aggs.insert(0, AGGS[0])
    posts = gen_posts(rnd, aggs)
    body: dict[str, Any] = {"queryType": kind, "dataSource": data_source,
                            "intervals": [f"{iso(s)}/{iso(e)}" for s, e in intervals]}  # fmt: skip
    if kind != "timeBoundary":
        body["virtualColumns"] = [vc for vc, _ in VIRTUAL_COLUMNS]
    if flt is not None:
        body["filter"] = flt
    spec = Spec(body, kind, intervals, GRANS[0], where, aggs, posts, [])
    if kind in ("timeseries", "groupBy", "topN"):
        body["aggregations"] = [a.json for a in aggs]
        body["postAggregations"] = [p.json for p in posts]
    if kind == "timeseries":
        spec.gran = rnd.choice(GRANS)
        body["granularity"] = spec.gran.json
    elif kind == "groupBy":
        spec.gran = rnd.choice(GRANS) if rnd.random() < 0.3 else GRANS[0]
        body["granularity"] = spec.gran.json
        chosen = [gen_dimension(rnd, f"g{i}") for i in range(rnd.choice([1, 1, 1, 2]))]
        body["dimensions"] = [d for d, _, _ in chosen]
        spec.dims = [f"g{i}" for i in range(len(chosen))]
        spec.source = exploded([(f"g{i}", sql, ex) for i, (_, sql, ex) in enumerate(chosen)])
        if rnd.random() < 0.25:
            spec.having = (aggs[0].name, float(rnd.choice([0, 5, 50])))
            body["having"] = {"type": "greaterThan", "aggregation": aggs[0].name, "value": spec.having[1]}
    elif kind == "topN":
        spec.threshold = rnd.choice([1, 3, 10])
        dimension, sql, explode = gen_dimension(rnd, "g0", arrays=False)
        spec.dims = ["g0"]
        spec.source = exploded([("g0", sql, explode)])
        metric: Any
        if rnd.random() < 0.3 and dimension.get("outputType") is None:  # ranked by the dimension: exact
            spec.gran = rnd.choice(GRANS)
            spec.order = DimensionOrder("lexicographic", inverted=rnd.random() < 0.3)
            metric = {"type": "dimension", "ordering": "lexicographic"}
            metric = {"type": "inverted", "metric": metric} if spec.order.inverted else metric
        else:
            spec.metric = metric = aggs[0].name
        body.update(granularity=spec.gran.json, dimension=dimension, metric=metric, threshold=spec.threshold)
    elif kind == "scan":
        body.update(columns=["__time", "page", "added"], resultFormat="compactedList")
    return spec
