"""Would caching groupBy per segment pay? (issue 16; Druid does not, apache/druid#3820)

    python -m bench.groupby_cache [--rows 2000000] [--segments 100] [--repeat 5] [--dir DIR]

Over bench.historical's synthetic segments, in process (no HTTP), for groupBys of growing
cardinality, each figure a median of --repeat rounds, the contenders taking turns:
- `merged`: what a broker caching nothing costs: one grouping across segments on the node
  (`run_merged`), then the broker's merge and finalize;
- `cold per segment`: what populating a per-segment cache costs: per-segment partials
  (`run_partials`), the Arrow stream they travel in, each segment's part cut out and encoded for
  the cache, merge and finalize;
- `warm per segment`: the answer from cached partials already decoded (the broker's memo):
  merge and finalize only.
Caching pays where `warm` beats `merged` by much and `cold` costs little more than `merged`; the
partial rows per segment show why it does not for high-cardinality groupings.
Nothing is asserted: a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.historical import DATA_SOURCE, HOUR_MS, START_MS, measure, prepare
from broker_service.cached_partials import encode_partial
from broker_service.segment_cache import split_by_segment
from strata.engine import SegmentInput, run_merged, run_partials
from strata.query import Query, parse_query
from strata.wire import decode_partials, encode_partials
from timeline import format_instant

SUMS = [
    {"type": "count", "name": "rows"},
    {"type": "longSum", "name": "bytes", "fieldName": "bytes"},
    {"type": "doubleSum", "name": "latency", "fieldName": "latency"},
]


def queries(hours: int) -> dict[str, dict[str, Any]]:
    interval = f"{format_instant(START_MS)}/{format_instant(START_MS + hours * HOUR_MS)}"
    base = {"queryType": "groupBy", "dataSource": DATA_SOURCE, "intervals": [interval], "aggregations": SUMS}
    return {
        "country (50), all": {**base, "granularity": "all", "dimensions": ["country"]},
        "country (50), hour": {**base, "granularity": "hour", "dimensions": ["country"]},
        "page (20k), all": {**base, "granularity": "all", "dimensions": ["page"]},
        "country x page, all": {**base, "granularity": "all", "dimensions": ["country", "page"]},
    }


def merged(query: Query, inputs: list[SegmentInput]) -> list[Any]:
    return query.finalize(query.merge([run_merged(query, inputs)]))


def cold(query: Query, inputs: list[SegmentInput]) -> list[Any]:
    shipped = decode_partials(encode_partials(run_partials(query, inputs)))
    assert shipped is not None
    parts = split_by_segment([shipped], {i.segment_id for i in inputs})
    for part in parts.values():
        encode_partial(part)
    return query.finalize(query.merge(list(parts.values())))


def warm(query: Query, parts: list[Any]) -> list[Any]:
    return query.finalize(query.merge(parts))


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6 - len(str(int(abs(value)))))
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--segments", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", type=Path, help="data directory, kept and reused (default: under the temp dir)")
    args = ap.parse_args(argv)
    work = args.dir or Path(tempfile.gettempdir()) / f"strata-bench-historical-{args.rows}-{args.segments}"
    segments = prepare(work, args.rows, args.segments)
    inputs = [SegmentInput(s.id, s.descriptor, s.load_spec["path"], s.interval) for s in segments]
    report = []
    head = f"{'groupBy':<22}{'merged ms':>20}{'cold per segment':>20}{'warm per segment':>20}"
    print(head + f"{'rows/segment':>14}")
    for name, body in queries(args.segments).items():
        query = parse_query(body)
        partials = run_partials(query, inputs)
        parts = list(split_by_segment([partials], {i.segment_id for i in inputs}).values())
        # the same answer either way (double sums up to the order of addition)
        assert _rounded(warm(query, parts)) == _rounded(merged(query, inputs)), name
        timings = measure(
            {
                "merged": functools.partial(merged, query, inputs),
                "cold": functools.partial(cold, query, inputs),
                "warm": functools.partial(warm, query, parts),
            },
            args.repeat,
        )
        per_segment = partials.num_rows / len(inputs)
        print(f"{name:<22}" + "".join(f"{timings[k].cell():>20}" for k in ("merged", "cold", "warm"))
              + f"{per_segment:>14.0f}")  # fmt: skip
        report.append({"query": name, **{f"{k}_ms": round(v.median * 1000, 1) for k, v in timings.items()},
                       "partial_rows_per_segment": round(per_segment)})  # fmt: skip
    print(
        json.dumps({"bench": "groupby_cache", "rows": args.rows, "segments": len(inputs), "results": report})
    )


if __name__ == "__main__":
    main()
