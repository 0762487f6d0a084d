"""Random native queries over the wikipedia sample, each with what the oracle needs to answer it.

Filters lean on the null-heavy columns (cityName, countryName, regionIsoCode); intervals are
5-minute aligned, often several, overlapping and unordered; granularities cover the named,
zoned period and duration-with-origin forms. Timeseries also run at granularity `none` (a few
seconds, or hours past the bucket limit), with `skipEmptyBuckets` and `grandTotal`; topN also
ranks by its dimension (`lexicographic` or `numeric`, inverted, after a `previousStop`), over
string dimensions and LONG outputs of numeric columns, at every granularity.
"""

from __future__ import annotations

import random
from typing import Any

from tests.differential.oracle import Agg, DimensionOrder, Gran, Post, Spec

DAY_MS = 1_442_016_000_000  # 2015-09-12T00:00Z
HOUR = 3_600_000
STRING_COLUMNS = ["channel", "cityName", "countryName", "regionIsoCode", "namespace", "isRobot"]
VALUES = {
    "channel": ["#en.wikipedia", "#de.wikipedia", "#fr.wikipedia", "#vi.wikipedia", "#nowhere"],
    "cityName": ["Tokyo", "London", "New York", "Moscow", "Nowhere"],
    "countryName": ["United States", "Japan", "Germany", "France", "Italy", "Nowhere"],
    "regionIsoCode": ["CA", "NY", "13", "ENG", "ZZ"],
    "namespace": ["Main", "Talk", "User", "Wikipedia"],
    "isRobot": ["true", "false"],
}
DIMENSIONS = ["channel", "countryName", "cityName", "regionIsoCode", "namespace", "isRobot"]
AGGS = [
    Agg("c", {"type": "count", "name": "c"}, "count(*)", is_count=True),
    Agg("added", {"type": "longSum", "name": "added", "fieldName": "added"}, "sum(added)"),
    Agg("deleted", {"type": "doubleSum", "name": "deleted", "fieldName": "deleted"}, "sum(deleted)::DOUBLE"),
    Agg("dmin", {"type": "longMin", "name": "dmin", "fieldName": "delta"}, "min(delta)"),
    Agg("dmax", {"type": "longMax", "name": "dmax", "fieldName": "delta"}, "max(delta)"),
]
GRANS = [
    Gran("all"),
    Gran("hour", step_ms=HOUR),
    Gran("day", step_ms=24 * HOUR),
    Gran({"type": "period", "period": "P1D", "timeZone": "America/Los_Angeles"}, zone="America/Los_Angeles"),
    Gran(
        {"type": "duration", "duration": 7_200_000, "origin": "2015-09-12T00:30:00Z"},
        step_ms=7_200_000,
        origin_ms=DAY_MS + HOUR // 2,
    ),
    Gran({"type": "duration", "duration": "21600000"}, step_ms=6 * HOUR),
]

NONE = Gran("none", step_ms=1)
LONG_COLUMNS = ["added", "delta", "deleted"]
STOPS = {  # previousStop values: inside the data, before and after all of it
    "string": ["", "#de.wikipedia", "#fr", "Germany", "M", "New York", "Tokyo", "13", "CA", "true", "~"],
    "long": ["-5", "0", "1", "15", "1555", "200", "9", "99999", "abc"],
}


def _quote(v: str) -> str:
    return "'" + v.replace("'", "''") + "'"


def gen_filter(rnd: random.Random, depth: int = 0) -> tuple[dict[str, Any] | None, str]:
    """A Druid filter and the SQL predicate Druid's semantics give it over `raw`."""
    roll = rnd.random()
    col = rnd.choice(STRING_COLUMNS)
    value = rnd.choice(VALUES[col])
    if depth < 2 and roll < 0.15:
        kind = rnd.choice(["and", "or"])
        parts = [gen_filter(rnd, depth + 1) for _ in range(rnd.randint(2, 3))]
        return {"type": kind, "fields": [p[0] for p in parts]}, "(" + f" {kind.upper()} ".join(
            p[1] for p in parts
        ) + ")"
    if depth < 2 and roll < 0.25:
        inner, sql = gen_filter(rnd, depth + 1)
        return {"type": "not", "field": inner}, f"(NOT {sql})"
    if roll < 0.40:
        if rnd.random() < 0.2:
            return {"type": "selector", "dimension": col, "value": None}, f"({col} IS NULL)"
        return {"type": "selector", "dimension": col, "value": value}, f"({col} = {_quote(value)})"
    if roll < 0.50:
        vals = rnd.sample(VALUES[col], k=min(3, len(VALUES[col])))
        with_null = rnd.random() < 0.3
        sql = f"({col} IN ({', '.join(map(_quote, vals))})" + (f" OR {col} IS NULL)" if with_null else ")")
        return {"type": "in", "dimension": col, "values": [*vals, *([None] if with_null else [])]}, sql
    if roll < 0.65:
        lower, upper = sorted(rnd.sample(["A", "C", "K", "N", "T", "Z"], 2))
        strict = rnd.random() < 0.5
        if rnd.random() < 0.5:  # no lower bound: null sorts first and matches
            flt = {"type": "bound", "dimension": col, "upper": upper, "upperStrict": strict}
            return flt, f"({col} IS NULL OR {col} {'<' if strict else '<='} {_quote(upper)})"
        flt = {"type": "bound", "dimension": col, "lower": lower, "upper": upper, "lowerStrict": strict}
        return flt, f"({col} {'>' if strict else '>='} {_quote(lower)} AND {col} <= {_quote(upper)})"
    if roll < 0.72:
        lo, hi = sorted(rnd.sample([-100, 0, 5, 50, 500], 2))
        flt = {
            "type": "bound",
            "dimension": "added",
            "lower": str(lo),
            "upper": str(hi),
            "ordering": "numeric",
        }
        return flt, f"(added >= {lo} AND added <= {hi})"
    if roll < 0.80:
        lo = rnd.choice([-50, 0, 10, 100])
        flt = {"type": "range", "column": "delta", "matchValueType": "LONG", "lower": lo, "lowerOpen": True}
        return flt, f"(delta > {lo})"
    if roll < 0.88:
        prefix = value[:2]
        return {
            "type": "like",
            "dimension": col,
            "pattern": prefix + "%",
        }, f"({col} LIKE {_quote(prefix + '%')})"
    if roll < 0.95:
        return {"type": "null", "column": col}, f"({col} IS NULL)"
    return {
        "type": "equals",
        "column": col,
        "matchValueType": "STRING",
        "matchValue": value,
    }, f"({col} = {_quote(value)})"


def gen_intervals(rnd: random.Random) -> list[tuple[int, int]]:
    out = []
    for _ in range(rnd.choice([1, 1, 2, 3])):
        start = DAY_MS + rnd.randint(-6, 24 * 12) * 300_000  # may begin before the data
        out.append((start, start + rnd.randint(1, 12 * 14) * 300_000))
    if rnd.random() < 0.15:
        s, e = out[0]
        out.append((s + 300_000, max(s + 600_000, e - 300_000)))  # inside the first: overlaps
    rnd.shuffle(out)
    return out


def gen_millisecond_intervals(rnd: random.Random) -> list[tuple[int, int]]:
    """A few seconds at millisecond precision (granularity `none` answers each millisecond), or
    now and then hours of data, which is past the bucket limit."""
    if rnd.random() < 0.1:
        start = DAY_MS + rnd.randint(0, 20) * HOUR
        return [(start, start + rnd.randint(2, 4) * HOUR)]
    out = []
    for _ in range(rnd.choice([1, 1, 2])):
        start = DAY_MS + rnd.randint(-2_000, 24 * HOUR)
        out.append((start, start + rnd.randint(1, 3_000)))
    return out


def gen_dimension_order(rnd: random.Random, kind: str) -> tuple[dict[str, Any], DimensionOrder]:
    """A topN `dimension` metric spec (maybe inverted, maybe after a stop) and what it means."""
    order = DimensionOrder(
        ordering=rnd.choice(["lexicographic", "lexicographic", "numeric"]),
        previous_stop=rnd.choice(STOPS[kind]) if rnd.random() < 0.6 else None,
        inverted=rnd.random() < 0.3,
    )
    metric: dict[str, Any] = {"type": "dimension", "ordering": order.ordering}
    if order.previous_stop is not None:
        metric["previousStop"] = order.previous_stop
    return ({"type": "inverted", "metric": metric} if order.inverted else metric), order


def gen_posts(rnd: random.Random, aggs: list[Agg]) -> list[Post]:
    posts = []
    for i in range(rnd.choice([0, 0, 1, 2])):
        fn = rnd.choice(["+", "-", "*", "/"])
        left = rnd.choice(aggs).name
        options: list[str | float] = [rnd.choice(aggs).name, 0.0, 2.0]
        right = rnd.choice(options)
        field = (
            {"type": "fieldAccess", "fieldName": right}
            if isinstance(right, str)
            else {"type": "constant", "value": right}
        )
        json = {"type": "arithmetic", "name": f"p{i}", "fn": fn,
                "fields": [{"type": "fieldAccess", "fieldName": left}, field]}  # fmt: skip
        posts.append(Post(f"p{i}", json, fn, (left, right)))
    return posts


def iso(ms: int) -> str:
    from tests.differential.oracle import utc_text

    return utc_text(ms)


def generate(rnd: random.Random, data_source: str) -> Spec:
    kind = rnd.choice(["timeseries", "timeseries", "groupBy", "groupBy", "topN", "scan", "timeBoundary"])
    by_millisecond = kind == "timeseries" and rnd.random() < 0.15
    intervals = gen_millisecond_intervals(rnd) if by_millisecond else gen_intervals(rnd)
    flt, where = gen_filter(rnd) if rnd.random() < 0.8 else (None, "TRUE")
    aggs = rnd.sample(AGGS, k=rnd.randint(1, 3))
    if rnd.random() < 0.5 and AGGS[0] not in aggs:
        aggs.insert(0, AGGS[0])
    posts = gen_posts(rnd, aggs)
    gran = rnd.choice(GRANS)
    body: dict[str, Any] = {"queryType": kind, "dataSource": data_source,
                            "intervals": [f"{iso(s)}/{iso(e)}" for s, e in intervals]}  # fmt: skip
    if flt is not None:
        body["filter"] = flt
    spec = Spec(body, kind, intervals, gran, where, aggs, posts, [])
    if kind in ("timeseries", "groupBy", "topN"):
        body["aggregations"] = [a.json for a in aggs]
        body["postAggregations"] = [p.json for p in posts]
    if kind == "timeseries":
        spec.gran = NONE if by_millisecond else gran
        body["granularity"] = spec.gran.json
        spec.skip_empty = rnd.random() < 0.2
        spec.grand_total = rnd.random() < 0.25
        spec.context = {k: True for k, on in (("skipEmptyBuckets", spec.skip_empty),
                                              ("grandTotal", spec.grand_total)) if on}  # fmt: skip
    elif kind == "groupBy":
        body["granularity"] = gran.json if rnd.random() < 0.4 else "all"
        spec.gran = gran if body["granularity"] == gran.json else GRANS[0]
        spec.dims = rnd.sample(DIMENSIONS, k=rnd.choice([0, 1, 1, 2]))
        body["dimensions"] = spec.dims
        first = aggs[0].name
        if rnd.random() < 0.3:
            spec.having = (first, float(rnd.choice([0, 5, 50, 500])))
            body["having"] = {"type": "greaterThan", "aggregation": first, "value": spec.having[1]}
        if spec.gran.is_all and rnd.random() < 0.4:
            spec.limit = rnd.choice([1, 3, 10])
            columns = [{"dimension": first, "direction": "descending", "dimensionOrder": "numeric"}]
            columns += [
                {"dimension": d, "direction": "ascending", "dimensionOrder": "lexicographic"}
                for d in spec.dims
            ]
            body["limitSpec"] = {"type": "default", "limit": spec.limit, "columns": columns}
    elif kind == "topN":
        spec.threshold = rnd.choice([1, 3, 10])
        if rnd.random() < 0.5:  # ranked by the dimension: exact, at any granularity
            spec.gran = gran
            numeric = rnd.random() < 0.4
            spec.dims = [rnd.choice(LONG_COLUMNS if numeric else DIMENSIONS)]
            spec.dim_output = f"v_{spec.dims[0]}"
            dimension: Any = {"type": "default", "dimension": spec.dims[0], "outputName": spec.dim_output,
                              "outputType": "LONG" if numeric else "STRING"}  # fmt: skip
            metric: Any
            metric, spec.order = gen_dimension_order(rnd, "long" if numeric else "string")
        else:
            spec.gran = GRANS[0]
            spec.dims = [rnd.choice(DIMENSIONS)]
            spec.metric = aggs[0].name
            dimension, metric = spec.dims[0], spec.metric
        body.update(granularity=spec.gran.json, dimension=dimension, metric=metric, threshold=spec.threshold)
    elif kind == "scan":
        body.update(columns=["__time", "page", "added"], resultFormat="compactedList")
    if spec.context:
        body["context"] = spec.context
    return spec
