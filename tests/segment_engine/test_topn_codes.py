"""topN partials grouped on dictionary codes answer as Druid's per-segment cut, and a node's one
merged partial as those per-segment cuts summed (never a cut over the node's sums).

Segment files written here and served from their Arrow copies: a dimension with nulls, segments
whose dictionaries differ (values, order), ties exactly at each segment's cut, a segment without
the dimension. Each partial is checked against DuckDB SQL written by hand over the raw rows
(group per segment in DuckDB, then keep what Druid's engine keeps of
`max(threshold, minTopNThreshold)`, ties included: `tests.topn_oracle`), whole and clipped (a segment read in part), with and without
the Arrow copies (a historical reading Parquet), and with copies the code path must refuse (chunks
with different dictionaries, a dictionary repeating a value).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from historical_service.arrow_copy import mapped_copy
from strata.engine import SegmentInput, mapped_source, topn_codes
from strata.engine.dictionary_codes import shared_codes, shared_dictionary
from strata.engine.engine import run_merged, run_partials
from strata.engine.topn_codes import coded_partials
from strata.query import parse_query
from strata.query.duck import connection
from strata.query.topn import TopNQuery
from strata.storage.segment_file import write_segment_file
from tests.topn_oracle import segment_cut
from timeline import Interval, SegmentDescriptor, format_instant

DS = "coded"
HOUR = 3_600_000
START = 1_704_067_200_000  # 2024-01-01T00:00Z
VERSION = "2024-01-02T00:00:00.000Z"
KEEP = 4


def _rows(hour: int, seed: int, *, dim: bool = True) -> pa.Table:
    """Values d0..d9 (a per-segment shuffled subset, so dictionaries differ), some null; `n` small
    integers so sums tie often, one hand-made tie at the cut."""
    rng = np.random.default_rng(seed)
    names = [f"d{k}" for k in rng.permutation(10)[: 6 + hour % 4]]
    count = 120
    picked = [None if rng.random() < 0.15 else names[k] for k in rng.integers(0, len(names), count)]
    n = rng.integers(0, 4, count)
    # ties: rows making two values sum to the same large total
    picked += [names[0]] * 3 + [names[1]] * 3
    n = np.concatenate([n, [50, 50, 50, 50, 50, 50]])
    times = START + hour * HOUR + np.sort(rng.integers(0, HOUR, len(picked)))
    columns: dict[str, pa.Array] = {"__time": pa.array(times, pa.timestamp("ms", tz="UTC"))}
    if dim:
        columns["dim"] = pa.array(picked, pa.string())
    columns["n"] = pa.array(n, pa.int64())
    v = rng.random(len(picked)) * 10
    if hour in (1, 2):  # a NaN sum, ranked as null (last)
        v[[i for i, p in enumerate(picked) if p == names[2]]] = np.nan
    columns["v"] = pa.array(v, pa.float64())
    return pa.table(columns)


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[SegmentInput, pa.Table]]:
    root = tmp_path_factory.mktemp("coded")
    out = []
    for hour in range(5):
        table = _rows(hour, seed=hour + 40, dim=hour != 3)
        interval = Interval(START + hour * HOUR, START + (hour + 1) * HOUR)
        path = root / f"seg{hour}" / "index.parquet"
        path.parent.mkdir()
        dims = [{"name": "dim", "type": "string"}] if "dim" in table.column_names else []
        facts = {"dataSource": DS, "interval": str(interval), "version": VERSION, "dimensions": dims,
                 "metrics": [{"type": "longSum", "name": "n", "fieldName": "n"}],
                 "queryGranularity": "none", "rollup": False}  # fmt: skip
        write_segment_file(table, path, facts)
        out.append(
            (
                SegmentInput(f"{DS}_{hour}", SegmentDescriptor(interval, VERSION, 0), str(path), interval),
                table,
            )
        )
    return out


@pytest.fixture(scope="module")
def oracle(segments: list[tuple[SegmentInput, pa.Table]]) -> duckdb.DuckDBPyConnection:
    """The raw rows as one table `raw` (seg, t in epoch ms, dim null where a segment lacks it)."""
    pieces = []
    for inp, table in segments:
        dim = table.column("dim") if "dim" in table.column_names else pa.nulls(table.num_rows, pa.string())
        pieces.append(pa.table({
            "seg": pa.array([inp.segment_id] * table.num_rows, pa.string()),
            "t": table.column("__time").cast(pa.int64()), "dim": dim, "n": table.column("n"), "v": table.column("v"),
        }))  # fmt: skip
    conn = duckdb.connect()
    conn.register("raw", pa.concat_tables(pieces))
    return conn


def _served(segments: list[tuple[SegmentInput, pa.Table]], how: str) -> Iterator[None]:
    paths = [inp.path for inp, _ in segments]
    for path in paths:
        if how == "arrow":
            table = mapped_copy(Path(path))
        elif how == "split":  # chunks with their own dictionaries: the code path must refuse
            plain = mapped_copy(Path(path))
            half = plain.num_rows // 2
            table = pa.concat_tables([_reencoded(plain.slice(0, half), reverse=False),
                                      _reencoded(plain.slice(half), reverse=True)])  # fmt: skip
        elif how == "repeated":  # a dictionary holding a value twice: codes would split its group
            table = _repeated(mapped_copy(Path(path)))
        else:
            continue
        assert mapped_source.register(path, table)
    try:
        yield
    finally:
        for path in paths:
            mapped_source.unregister(path)


def _reencoded(table: pa.Table, *, reverse: bool) -> pa.Table:
    """`table` with `dim` given a dictionary of its own (sorted, or reverse sorted)."""
    if "dim" not in table.column_names:
        return table
    values = table.column("dim").cast(pa.string()).combine_chunks()
    uniques = sorted(v for v in set(values.to_pylist()) if v is not None)
    if reverse:
        uniques.reverse()
    dictionary = pa.array(uniques, pa.string())
    indices = pa.array([None if v is None else uniques.index(v) for v in values.to_pylist()], pa.int32())
    encoded = pa.DictionaryArray.from_arrays(indices, dictionary)
    return table.set_column(table.schema.get_field_index("dim"), "dim", encoded)


def _repeated(table: pa.Table) -> pa.Table:
    """`dim` re-encoded with every value twice in the dictionary, rows alternating between copies."""
    if "dim" not in table.column_names:
        return table
    values = table.column("dim").cast(pa.string()).combine_chunks().to_pylist()
    uniques = sorted(v for v in set(values) if v is not None)
    dictionary = pa.array(uniques + uniques, pa.string())
    indices = [None if v is None else uniques.index(v) + (i % 2) * len(uniques) for i, v in enumerate(values)]
    encoded = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), dictionary)
    return table.set_column(table.schema.get_field_index("dim"), "dim", encoded)


@pytest.fixture(params=["parquet", "arrow", "split", "repeated"])
def served(request: pytest.FixtureRequest, segments: list[tuple[SegmentInput, pa.Table]]) -> Iterator[str]:
    yield from (request.param for _ in _served(segments, request.param))


WINDOWS = {
    "whole": (START, START + 5 * HOUR),
    "clipped": (START + HOUR // 2, START + 4 * HOUR - 777),
    "with_dim": (START, START + 5 * HOUR),
    "clipped_with_dim": (START + HOUR // 2, START + 4 * HOUR - 777),
}
LEFT_OUT = {"with_dim": f"{DS}_3", "clipped_with_dim": f"{DS}_3"}  # leaving out the segment without `dim`


FILTERS = [
    (None, "true"), ({"type": "bound", "dimension": "n", "lower": "1", "ordering": "numeric"}, "n >= 1"),
    ({"type": "in", "dimension": "dim", "values": ["d1", "d2", "d4", "d5", "d7"]},
     "dim IN ('d1', 'd2', 'd4', 'd5', 'd7')"),
]  # fmt: skip


def _query(window: str, metric: str, flt: dict[str, Any] | None = None) -> TopNQuery:
    start, end = WINDOWS[window]
    body: dict[str, Any] = {
        "queryType": "topN", "dataSource": DS, "granularity": "all", "dimension": "dim", "metric": metric,
        "threshold": 2, "intervals": [f"{format_instant(start)}/{format_instant(end)}"],
        "aggregations": [{"type": "count", "name": "rows"}, {"type": "longSum", "name": "n", "fieldName": "n"},
                         {"type": "doubleSum", "name": "v", "fieldName": "v"}],
        "context": {"minTopNThreshold": KEEP},
    }  # fmt: skip
    if flt is not None:
        body["filter"] = flt
    query = parse_query(body)
    assert isinstance(query, TopNQuery)
    return query


def _inputs(segments: list[tuple[SegmentInput, pa.Table]], window: str) -> list[SegmentInput]:
    start, end = WINDOWS[window]
    out = []
    for inp, _ in segments:
        if LEFT_OUT.get(window) == inp.segment_id:
            continue
        part = inp.interval.overlap(Interval(start, end))
        if part is not None and not part.is_empty:
            out.append(SegmentInput(inp.segment_id, inp.descriptor, inp.path, part))
    return out


def _expected(
    oracle: duckdb.DuckDBPyConnection, window: str, metric: str, where: str
) -> set[tuple[Any, ...]]:
    return {(*r[:4], _number(r[4])) for r in _expected_rows(oracle, window, metric, where)}


def _expected_rows(
    oracle: duckdb.DuckDBPyConnection, window: str, metric: str, where: str
) -> list[tuple[Any, ...]]:
    """(segment, value, rows, n, v) each segment keeps: its values grouped by DuckDB, cut as
    Druid's engine cuts them (`tests.topn_oracle.segment_cut`, NaN ranked as null)."""
    start, end = WINDOWS[window]
    grouped = oracle.execute(
        f"""SELECT seg, dim, count(*) AS rows, sum(n) AS n, sum(v) AS v FROM raw
            WHERE t >= {start} AND t < {end} AND {where} AND seg != '{LEFT_OUT.get(window, "")}'
            GROUP BY seg, dim"""
    ).fetchall()
    parts: dict[str, dict[str | None, list[float]]] = {}
    for seg, dim, *aggs in grouped:
        parts.setdefault(seg, {})[dim] = aggs
    which = ["rows", "n", "v"].index(metric)
    return [
        (seg, dim, *aggs)
        for seg, values in parts.items()
        for dim, aggs in segment_cut(values, which, KEEP).items()
    ]


def _number(x: float) -> float | str:
    return "NaN" if x != x else round(x, 6)


def _got(table: pa.Table) -> set[tuple[Any, ...]]:
    ranked = [r for r in table.to_pylist() if r["a3"] is not None]  # markers carry no row count
    return {(r["__segment"], r["d0"], r["a0"], r["a1"], _number(r["a2"])) for r in ranked}


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("metric", ["n", "rows", "v"])
@pytest.mark.parametrize("flt,where", FILTERS)
def test_partials_match_per_segment_cut(
    served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, window: str, metric: str,
    flt: dict[str, Any] | None, where: str,
) -> None:  # fmt: skip
    query = _query(window, metric, flt)
    assert _got(run_partials(query, _inputs(segments, window))) == _expected(oracle, window, metric, where)


def test_code_path_taken_only_where_it_applies(served: str, segments: Any) -> None:
    """Whole segments from well-formed copies, all with the dimension, take the code path; the
    rest (a segment read in part or without the column, copies the path refuses) the generic one."""
    for window in WINDOWS:
        taken = coded_partials(_query(window, "n"), connection(), _inputs(segments, window)) is not None
        assert taken == (served == "arrow" and window == "with_dim"), (served, window)


def _kept(
    tmp_path: Path, metric: str, shapes: list[tuple[list[str | None], list[float]]], *, merged: bool = False
) -> set[tuple[str | None, Any]]:
    """(segment, value) of the ranked rows of the partials of one hand-made segment per shape
    (dimension values, `v` per row; `n` 5 each), served from copies whose dictionaries list the
    strings in reverse order (codes rank opposite to strings); the code path must be taken."""
    inputs = []
    for hour, (values, v) in enumerate(shapes):
        interval = Interval(START + hour * HOUR, START + (hour + 1) * HOUR)
        times = [interval.start + i for i in range(len(values))]
        table = pa.table({"__time": pa.array(times, pa.timestamp("ms", tz="UTC")),
                          "dim": pa.array(values, pa.string()), "n": pa.array([5] * len(values), pa.int64()),
                          "v": pa.array(v, pa.float64())})  # fmt: skip
        path = tmp_path / f"hand{hour}" / "index.parquet"
        path.parent.mkdir()
        facts = {"dataSource": DS, "interval": str(interval), "version": VERSION, "queryGranularity": "none",
                 "dimensions": [{"name": "dim", "type": "string"}], "metrics": [], "rollup": False}  # fmt: skip
        write_segment_file(table, path, facts)
        assert mapped_source.register(str(path), _reencoded(mapped_copy(path), reverse=True))
        inputs.append(SegmentInput(f"s{hour}", SegmentDescriptor(interval, VERSION, 0), str(path), interval))
    try:
        query = _query("whole", metric)
        assert coded_partials(query, connection(), inputs) is not None
        table = run_merged(query, inputs) if merged else run_partials(query, inputs)
    finally:
        for inp in inputs:
            mapped_source.unregister(inp.path)
    return {(r["__segment"], r["d0"]) for r in table.to_pylist() if r["a3"] is not None}


def test_ties_at_the_cut_keep_the_smallest_strings(tmp_path: Path) -> None:
    """Every value ties (and null with them): each segment keeps null, then the smallest strings."""
    shapes: list[tuple[list[str | None], list[float]]] = []
    for names in (["k", "b", "x", "e", "q", "a"], ["z", "y", "c", "m", "d"]):
        values = [*names, None] * 2
        shapes.append((values, [1.0] * len(values)))
    expected = {("s0", None), ("s0", "a"), ("s0", "b"), ("s0", "e"),
                ("s1", None), ("s1", "c"), ("s1", "d"), ("s1", "m")}  # fmt: skip
    assert _kept(tmp_path, "n", shapes) == expected


def test_the_merged_partial_sums_each_segments_cut(tmp_path: Path) -> None:
    """Every value ties within each segment: each keeps null and its smallest strings (as its own
    partial does), and the node sums those; "w", second best over both segments together, is cut
    in each and stays out (a cut over the node's sums would keep it)."""
    shapes: list[tuple[list[str | None], list[float]]] = []
    for names in (["k", "b", "x", "e", "q", "w"], ["z", "y", "c", "m", "d", "w"]):
        values = [*names, None]
        shapes.append((values, [1.0] * len(values)))
    expected = {(None, None), (None, "b"), (None, "e"), (None, "k"), (None, "c"), (None, "d"), (None, "m")}
    assert _kept(tmp_path, "n", shapes, merged=True) == expected


def test_nan_sums_rank_last_when_fewer_values_than_kept(tmp_path: Path) -> None:
    """Two real (negative) sums and four NaN ones (ranked as null), keeping 4: both real ones, and
    two NaN ones as Druid's engine keeps ties: of a, c, d (the ties among the first four values in
    dictionary order, b being better), the largest two."""
    values: list[str | None] = ["f", "b", "e", "a", "d", "c"]
    v = [-2.0, -1.0, float("nan"), float("nan"), float("nan"), float("nan")]
    assert _kept(tmp_path, "v", [(values, v)]) == {("s0", "f"), ("s0", "b"), ("s0", "c"), ("s0", "d")}


def test_a_dropped_copy_is_not_pinned(segments: Any) -> None:
    """Once unregistered and its requests ended, a copy's mapped table can be freed: neither the
    code path's remembered dictionary check nor its kept shared dictionaries hold it."""
    inputs = _inputs(segments, "with_dim")
    for inp in inputs:
        assert mapped_source.register(inp.path, mapped_copy(Path(inp.path)))
    try:
        with mapped_source.request_views():  # as the engine runs a request
            assert coded_partials(_query("with_dim", "n"), connection(), inputs) is not None
        mapped = mapped_source.mapped(inputs[0].path)
        assert mapped is not None
        table = weakref.ref(mapped.table)
        del mapped
    finally:
        for inp in inputs:
            mapped_source.unregister(inp.path)
    gc.collect()
    assert table() is None


def _expected_merged(
    oracle: duckdb.DuckDBPyConnection, window: str, metric: str, where: str
) -> tuple[set[tuple[Any, ...]], int]:
    """Each segment's cut over the raw rows (`_expected`), summed per value; and the answer's
    timestamp: the earliest cursor start, matched or not, a segment's cursor covering its rows'
    time span clipped to the window."""
    start, end = WINDOWS[window]
    left_out = LEFT_OUT.get(window, "")
    sums: dict[Any, list[Any]] = {}
    for _, dim, rows, n, v in _expected_rows(oracle, window, metric, where):
        got = sums.setdefault(dim, [0, 0, 0.0])
        got[0], got[1], got[2] = got[0] + rows, got[1] + n, got[2] + v
    stamp = oracle.execute(
        f"""SELECT min(greatest({start}, first)) FROM (SELECT seg, min(t) AS first, max(t) AS last
            FROM raw WHERE seg != '{left_out}' GROUP BY seg)
            WHERE greatest({start}, first) < least({end}, last + 1)"""
    ).fetchone()
    assert stamp is not None
    return {(d, r, n, _number(v)) for d, (r, n, v) in sums.items()}, stamp[0]


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("metric", ["n", "rows", "v"])
@pytest.mark.parametrize(
    "flt,where", [*FILTERS, ({"type": "selector", "dimension": "dim", "value": "nothing"}, "false")]
)
def test_merged_partial_sums_the_per_segment_cuts(
    served: str, segments: Any, oracle: duckdb.DuckDBPyConnection, window: str, metric: str,
    flt: dict[str, Any] | None, where: str,
) -> None:  # fmt: skip
    table = run_merged(_query(window, metric, flt), _inputs(segments, window))
    ranked = [r for r in table.to_pylist() if r["a3"] is not None]
    expected, stamp = _expected_merged(oracle, window, metric, where)
    assert {(r["d0"], r["a0"], r["a1"], _number(r["a2"])) for r in ranked} == expected
    assert {r["__segment"] for r in table.to_pylist()} == {None}
    assert {r["__bucket"] for r in table.to_pylist()} == {stamp}


@pytest.mark.parametrize("metric", ["n", "rows", "v"])
def test_grouping_by_bincount_matches_duckdbs(segments: Any, metric: str) -> None:
    """The node-merged path groups an unfiltered query of counts and sums with `np.bincount`: the
    same (segment, code) groups and intermediates as DuckDB's statement; a filter keeps DuckDB."""
    inputs = _inputs(segments, "with_dim")
    for inp in inputs:
        assert mapped_source.register(inp.path, mapped_copy(Path(inp.path)))
    try:
        with mapped_source.request_views():
            query = _query("with_dim", metric)
            rows = [mapped_source.mapped(i.path) for i in inputs]
            assert all(r is not None for r in rows)
            _, codes = shared_codes(rows, "dim")  # type: ignore[arg-type]
            _, mappings = shared_dictionary(rows, "dim")  # type: ignore[arg-type]
            found = topn_codes._coded_source(query, inputs)
            assert found is not None
            by_numpy = topn_codes._grouped_in_numpy(query, rows, mappings, "dim")  # type: ignore[arg-type]
            by_duckdb = topn_codes._grouped_in_duckdb(query, connection(), rows, codes, found[1], found[2])  # type: ignore[arg-type]
            filtered = _query("with_dim", metric, FILTERS[1][0])
            assert topn_codes._grouped_in_numpy(filtered, rows, mappings, "dim") is None  # type: ignore[arg-type]
    finally:
        for inp in inputs:
            mapped_source.unregister(inp.path)

    def canon(table: pa.Table) -> list[tuple[Any, ...]]:
        return sorted((tuple(_number(v) if isinstance(v, float) else v for v in r.values())
                       for r in table.to_pylist()), key=repr)  # fmt: skip

    assert by_numpy is not None and by_numpy.num_rows > 0
    assert canon(by_numpy) == canon(by_duckdb.cast(by_numpy.schema))
