"""Druid's expected answer to a generated query, computed from the raw rows with DuckDB and Python.

Written apart from Strata's engine: it imports nothing of `strata/query/`. Druid's rules it encodes:
intervals condensed (a row counts once); a segment's cursor covers
[max(interval start, segment minTime), min(interval end, end of the bucket holding maxTime)) and
timeseries zero-fills every bucket of it (count 0, other aggregators null); `all` rows of
timeseries/topN carry the earliest cursor start, groupBy rows the earliest interval start; a
timeseries `all` with no cursor at all is still one such row, at the first interval's start; groupBy
with no dimensions over no rows still gives one summary row; arithmetic with a null operand is
null, `/` by zero is 0; filters use SQL's three-valued logic except that a `bound` without a lower
bound and a null among `in` values match null. Granularity `none` walks every millisecond, and a
query walking more than the documented 1,000,000 buckets is a 400; `skipEmptyBuckets` fills
nothing; a `grandTotal` row combines the buckets (every aggregator null over none). A topN
ranked by its dimension is exact: values in Druid's string order (a LONG output as its decimal
string; `numeric` compares numbers by value, after every unparseable string), nulls first, reversed when inverted, strictly
after `previousStop`, and every bucket walked is answered, empty or not.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import duckdb

UTC = datetime.UTC


@dataclass(frozen=True)
class Gran:
    """A granularity the generator uses: its JSON and how to find a bucket's start and end."""

    json: Any
    step_ms: int | None = None  # fixed-length buckets counted from `origin_ms`
    origin_ms: int = 0
    zone: str | None = None  # calendar days in this zone

    @property
    def is_all(self) -> bool:
        return self.json == "all"

    def start(self, ms: int) -> int:
        if self.zone is not None:
            local = datetime.datetime.fromtimestamp(ms / 1000, ZoneInfo(self.zone))
            midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
            return int(midnight.timestamp() * 1000)
        assert self.step_ms is not None
        return (ms - self.origin_ms) // self.step_ms * self.step_ms + self.origin_ms

    def end(self, ms: int) -> int:
        start = self.start(ms)
        if self.zone is not None:
            local = datetime.datetime.fromtimestamp(start / 1000, ZoneInfo(self.zone))
            nxt = (local + datetime.timedelta(days=1, hours=3)).replace(hour=0)
            return int(nxt.timestamp() * 1000)
        assert self.step_ms is not None
        return start + self.step_ms

    def text(self, ms: int) -> str:
        zone = ZoneInfo(self.zone) if self.zone else UTC
        moment = datetime.datetime.fromtimestamp(ms / 1000, zone)
        if self.zone is None:
            return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
        return moment.isoformat(timespec="milliseconds")


def utc_text(ms: int) -> str:
    return Gran("all").text(ms)


def condense(intervals: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


@dataclass(frozen=True)
class Agg:
    name: str
    json: dict[str, Any]
    sql: str  # over matching rows; NULL over none (count aside)
    is_count: bool = False


@dataclass(frozen=True)
class Post:
    name: str
    json: dict[str, Any]
    fn: str
    operands: tuple[str | float, ...]  # aggregator names or constants

    def value(self, row: dict[str, Any]) -> Any:
        values = [row[o] if isinstance(o, str) else o for o in self.operands]
        if any(v is None for v in values):
            return None
        acc = float(values[0])
        for v in values[1:]:
            if self.fn == "+":
                acc += v
            elif self.fn == "-":
                acc -= v
            elif self.fn == "*":
                acc *= v
            else:
                acc = 0.0 if v == 0 else acc / v
        return acc


BUCKET_LIMIT = 1_000_000  # buckets one query may produce (docs/query-api.md)
TOO_MANY_BUCKETS = {"status": 400, "error": "Resource limit exceeded"}
_NUMBER = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")


@dataclass(frozen=True)
class DimensionOrder:
    """A topN `dimension` metric: Druid's string ordering, optionally inverted, after a stop."""

    ordering: str  # lexicographic | numeric
    previous_stop: str | None = None
    inverted: bool = False

    def compare(self, a: str | None, b: str | None) -> int:
        if a is None or b is None:
            out = (a is not None) - (b is not None)  # nulls first
        elif self.ordering == "numeric":
            out = _numeric_compare(a, b)
        else:
            out = _sign(a.encode(), b.encode())
        return -out if self.inverted else out


def _sign(a: Any, b: Any) -> int:
    return (a > b) - (a < b)


def _numeric_compare(a: str, b: str) -> int:
    x = Decimal(a) if _NUMBER.fullmatch(a) else None
    y = Decimal(b) if _NUMBER.fullmatch(b) else None
    if x is not None and y is not None:
        return _sign(x, y)
    if x is None and y is None:
        return _sign(a.encode(), b.encode())
    return -1 if x is None else 1  # unparseable strings first (Druid's NumericComparator)


def as_druid_text(v: Any) -> str | None:
    return None if v is None else str(v)


@dataclass
class Spec:
    """One generated query: the native JSON and what the oracle needs to answer it."""

    json: dict[str, Any]
    kind: str
    intervals: list[tuple[int, int]]
    gran: Gran
    where: str  # SQL over `raw`
    aggs: list[Agg]
    posts: list[Post]
    dims: list[str]
    threshold: int = 0
    metric: str = ""
    limit: int | None = None
    having: tuple[str, float] | None = None  # keep groups whose aggregator exceeds the value
    skip_empty: bool = False  # timeseries context skipEmptyBuckets
    grand_total: bool = False  # timeseries context grandTotal
    order: DimensionOrder | None = None  # topN ranked by its dimension (exact)
    dim_output: str = ""  # topN output name of the dimension (its column when empty)
    context: dict[str, Any] = field(default_factory=dict)
    source: str = "raw"  # the rows the query reads (a subquery exploding multi-value dimensions)


class Oracle:
    def __init__(self, conn: duckdb.DuckDBPyConnection, segments: Sequence[tuple[int, int]]):
        self.conn = conn
        self.segments = segments  # (minTime, maxTime) of every segment of the datasource

    def _in_intervals(self, intervals: Sequence[tuple[int, int]]) -> str:
        return "(" + " OR ".join(f"(ms >= {s} AND ms < {e})" for s, e in intervals) + ")"

    def _cursor_ranges(self, spec: Spec) -> list[tuple[int, int]]:
        ranges = []
        for s, e in condense(spec.intervals):
            for lo, hi in self.segments:
                end = min(e, hi + 1 if spec.gran.is_all else spec.gran.end(hi))
                start = max(s, lo)
                if start < end and s <= hi:
                    ranges.append((start, end))
        return ranges

    def _groups(self, spec: Spec, keys: list[str]) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        """(key values, aggregates by name) per group: apart, as an aggregator may be named as a
        grouped column (a `longSum` named `added` of a topN over the dimension `added`)."""
        where = f"{self._in_intervals(condense(spec.intervals))} AND ({spec.where})"
        cols = [*keys, *(f"{a.sql} AS {_ident(a.name)}" for a in spec.aggs)]
        group = f" GROUP BY {', '.join(keys)}" if keys else ""
        cur = self.conn.execute(f"SELECT {', '.join(cols)} FROM {spec.source} WHERE {where}{group}")
        names = [a.name for a in spec.aggs]
        n = len(keys)
        # an ARRAY key (a list) as a tuple, to be hashed; `_groupBy` answers it as a list again
        keyed = [
            (tuple(tuple(v) if isinstance(v, list) else v for v in r[:n]), r[n:]) for r in cur.fetchall()
        ]
        return [(k, dict(zip(names, values, strict=True))) for k, values in keyed]

    def _bucketed(self, spec: Spec, dims: list[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
        """Aggregates per (bucket, dims...) over the matching rows (bucket None for `all`)."""
        if spec.gran.is_all:
            return {(None, *k): r for k, r in self._groups(spec, dims)}
        return dict(self._groups(spec, [self._bucket_of_ms(spec), *dims]))

    def _bucket_of_ms(self, spec: Spec) -> str:
        """SQL giving the start of the bucket (`Gran.start`) holding each row's `ms`: fixed-length
        buckets by arithmetic from their origin; calendar days in a zone by the day starts that
        `Gran.start` and `Gran.end` walk over the rows' span, the latest one at or before `ms`."""
        gran = spec.gran
        if gran.zone is None:
            assert gran.step_ms is not None
            step, origin = gran.step_ms, gran.origin_ms
            return f"(ms - ((ms - {origin}) % {step} + {step}) % {step})"  # a floor, below the origin too
        lo, hi = self.conn.execute(f"SELECT min(ms), max(ms) FROM {spec.source}").fetchone() or (None, None)
        if lo is None:
            return "CAST(NULL AS BIGINT)"  # no rows: no bucket
        starts = [gran.start(lo)]
        while (following := gran.end(starts[-1])) <= hi:
            starts.append(following)
        return "(CASE " + " ".join(f"WHEN ms >= {s} THEN {s}" for s in reversed(starts)) + " END)"

    def answer(self, spec: Spec) -> Any:
        return getattr(self, "_" + spec.kind)(spec)

    def _finish(self, spec: Spec, row: dict[str, Any]) -> dict[str, Any]:
        out = {a.name: (0 if a.is_count and row.get(a.name) is None else row.get(a.name)) for a in spec.aggs}
        for p in spec.posts:
            out[p.name] = p.value(out)
        return {k: _json_number(v) for k, v in out.items()}

    def _walked(self, spec: Spec, ranges: list[tuple[int, int]]) -> list[int] | None:
        """Every bucket start the cursors walk, in order; None past the bucket limit."""
        if spec.gran.step_ms == 1 and sum(e - s for s, e in condense(ranges)) > BUCKET_LIMIT:
            return None  # `none`: the milliseconds counted before they are listed
        buckets: set[int] = set()
        for s, e in ranges:
            b = spec.gran.start(s)
            while b < e:
                buckets.add(b)
                b = spec.gran.end(b)
        return None if len(buckets) > BUCKET_LIMIT else sorted(buckets)

    def _timeseries(self, spec: Spec) -> Any:
        ranges = self._cursor_ranges(spec)
        filled = self._bucketed(spec, [])
        if spec.gran.is_all:
            if spec.skip_empty:  # only cursors with a matching row answer, the earliest stamps
                matched = [s for s, e in ranges if self._any_row(spec, s, e)]
                stamps = [utc_text(min(matched))] if matched else []
            else:
                # no cursor at all: Druid's merge still answers one row (TimeseriesQueryQueryToolChest's
                # null result), stamped with the start of the first (condensed) query interval
                stamps = [utc_text(min(r[0] for r in ranges) if ranges else condense(spec.intervals)[0][0])]
            values = [filled.get((None,), {}) for _ in stamps]
        else:
            walked = sorted(k[0] for k in filled) if spec.skip_empty else self._walked(spec, ranges)
            if walked is None:
                return TOO_MANY_BUCKETS
            buckets = sorted(set(walked) | {k[0] for k in filled})
            stamps = [spec.gran.text(b) for b in buckets]
            values = [filled.get((b,), {}) for b in buckets]
        out: list[Any] = [
            {"timestamp": t, "result": self._finish(spec, v)} for t, v in zip(stamps, values, strict=True)
        ]
        if spec.grand_total:
            out.append({"timestamp": None, "result": _grand_total(spec, values)})
        return out

    def _any_row(self, spec: Spec, start: int, end: int) -> bool:
        where = f"{self._in_intervals([(start, end)])} AND ({spec.where})"
        row = self.conn.execute(f"SELECT count(*) FROM {spec.source} WHERE {where}").fetchone()
        return bool(row and row[0])

    def _groupBy(self, spec: Spec) -> list[Any]:
        groups = self._bucketed(spec, spec.dims)
        if not groups and not spec.dims and spec.gran.is_all:
            groups = {(None,): {}}  # Druid's summary row
        first = condense(spec.intervals)[0][0]
        rows: list[dict[str, Any]] = []
        for key, row in groups.items():
            stamp = utc_text(first) if spec.gran.is_all else spec.gran.text(key[0])
            keys = [list(v) if isinstance(v, tuple) else v for v in key[1:]]
            event = {**dict(zip(spec.dims, keys, strict=True)), **self._finish(spec, row)}
            rows.append({"version": "v1", "timestamp": stamp, "event": event})
        if spec.having is not None:
            name, bound = spec.having
            rows = [r for r in rows if r["event"][name] is not None and r["event"][name] > bound]
        if spec.limit is not None:  # by the first aggregator descending, then each dimension, nulls first
            metric = spec.aggs[0].name

            def rank(r: dict[str, Any]) -> tuple[Any, ...]:
                value = r["event"][metric]
                dims = tuple((0, "") if r["event"][d] is None else (1, r["event"][d]) for d in spec.dims)
                return ((1, 0) if value is None else (0, -value), *dims)

            rows = sorted(rows, key=rank)[: spec.limit]
        return rows

    def _topN(self, spec: Spec) -> list[Any]:
        ranges = self._cursor_ranges(spec)
        if not ranges:
            return []
        groups = self._bucketed(spec, spec.dims)
        output = spec.dim_output or spec.dims[0]
        if spec.order is None:  # ranked by a metric: compared as Druid's approximation allows
            entries = [{output: k[1], **self._finish(spec, r)} for k, r in groups.items()]
            return [{"timestamp": utc_text(min(r[0] for r in ranges)), "result": entries}]
        order = spec.order
        rank = functools.cmp_to_key(
            lambda a, b: order.compare(as_druid_text(a[0]), as_druid_text(b[0]))  # type: ignore[index]
        )
        if spec.gran.is_all:
            buckets: list[int | None] = [None]
            stamps = [utc_text(min(r[0] for r in ranges))]
        else:
            walked = self._walked(spec, ranges) or []
            buckets = sorted(set(walked) | {k[0] for k in groups})
            stamps = [spec.gran.text(b) for b in buckets]  # type: ignore[arg-type]
        out = []
        for bucket, stamp in zip(buckets, stamps, strict=True):
            values = sorted(((k[1], r) for k, r in groups.items() if k[0] == bucket), key=rank)
            if order.previous_stop is not None:
                stop = order.previous_stop
                values = [(v, r) for v, r in values if order.compare(as_druid_text(v), stop) > 0]
            entries = [{output: v, **self._finish(spec, r)} for v, r in values[: spec.threshold]]
            out.append({"timestamp": stamp, "result": entries})
        return out

    def _scan(self, spec: Spec) -> list[tuple[Any, ...]]:
        where = f"{self._in_intervals(condense(spec.intervals))} AND ({spec.where})"
        return self.conn.execute(f"SELECT ms, page, added FROM raw WHERE {where} ORDER BY 1, 2, 3").fetchall()

    def _timeBoundary(self, spec: Spec) -> Any:
        where = f"{self._in_intervals(condense(spec.intervals))} AND ({spec.where})"
        lo, hi = self.conn.execute(f"SELECT min(ms), max(ms) FROM raw WHERE {where}").fetchone() or (
            None,
            None,
        )
        if lo is None:
            return []
        return [{"timestamp": utc_text(lo), "result": {"minTime": utc_text(lo), "maxTime": utc_text(hi)}}]


def _grand_total(spec: Spec, buckets: list[dict[str, Any]]) -> dict[str, Any]:
    """Each aggregator combined over the answered buckets (a zero-filled count is 0, other
    empties null and skipped); null over no bucket. Post-aggregators over the totals."""
    total: dict[str, Any] = {}
    for a in spec.aggs:
        xs: list[Any] = [0 if a.is_count and b.get(a.name) is None else b.get(a.name) for b in buckets]
        xs = [x for x in xs if x is not None]
        pick = min if a.sql.startswith("min(") else max if a.sql.startswith("max(") else sum
        total[a.name] = pick(xs) if xs else None
    for p in spec.posts:
        total[p.name] = p.value(total)
    return {k: _json_number(v) for k, v in total.items()}


def _json_number(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(v)]
    return v


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
