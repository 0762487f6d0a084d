"""SQL planning time: Druid SQL text to native query JSON, in process (no I/O).

    python -m bench.sql [--repeat 2000]

Prints the median and p99 microseconds per statement for the shapes dashboards send (target: under
2 ms). End-to-end SQL through a broker costs this plus the native query (bench.broker).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from strata_sql import plan_statement

COLUMNS = {"__time": "LONG", "channel": "STRING", "page": "STRING", "countryName": "STRING", "added": "LONG",
           "deleted": "LONG", "delta": "LONG", "user": "STRING"}  # fmt: skip
STATEMENTS = {
    "topN-shaped groupBy": 'SELECT page, COUNT(*) AS edits FROM wikipedia WHERE "__time" >= TIMESTAMP '
    "'2015-09-12 00:00:00' GROUP BY page ORDER BY edits DESC LIMIT 10",
    "timeseries by hour": "SELECT FLOOR(__time TO HOUR) AS h, SUM(added) FROM wikipedia GROUP BY 1",
    "filtered scan": "SELECT \"user\", page FROM wikipedia WHERE channel = '#en.wikipedia' AND added > 10 "
    "LIMIT 20",
    "superset series": 'SELECT TIME_FLOOR(CAST("__time" AS TIMESTAMP), \'PT1H\') AS "__timestamp", COUNT(*) '
    'AS "count" FROM "druid"."wikipedia" WHERE "__time" >= TIME_PARSE(\'2015-09-12T00:00:00\') GROUP BY '
    'TIME_FLOOR(CAST("__time" AS TIMESTAMP), \'PT1H\') ORDER BY "count" DESC LIMIT 10000',
}


class _Catalog:
    def tables(self) -> Sequence[str]:
        return ["wikipedia"]

    def columns(self, table: str) -> Mapping[str, str] | None:
        return COLUMNS if table == "wikipedia" else None

    def segments(self) -> list[dict[str, Any]]:
        return []

    def servers(self) -> list[dict[str, Any]]:
        return []


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args(argv)
    catalog = _Catalog()
    for name, text in STATEMENTS.items():
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            plan_statement(text, catalog, {})
            times.append((time.perf_counter() - started) * 1e6)
        times.sort()
        p99 = times[int(len(times) * 0.99) - 1]
        print(f"{name:22} median {statistics.median(times):7.0f} us   p99 {p99:7.0f} us")


if __name__ == "__main__":
    main()
