"""Would a historical group whole arrays faster on one packed integer key than on the lists
themselves (issue 37 item 7)? DuckDB alone, in this process, over bench.multi_value's rows.

    python -m bench.array_group_keys [--rows 10000000] [--segments 24] [--repeat 3]

Over all the rows (a historical groups its segments in one pass) and over one segment's share:
`GROUP BY nums` as the historical runs it; the same groups on a 63-bit key packed in SQL in the
same statement (each element plus one in a 7-bit slot, 0 past the end: exact for these arrays of
at most 4 elements of 0-99), keys only (turning them back into arrays would come on top); and that
key with `any_value(nums)` taking each group's array back. CPU seconds of the statement (DuckDB's
threads included), medians of `--repeat`.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import duckdb
import pyarrow as pa

from bench.measure import log
from bench.multi_value import rows_arguments, rows_table

LONGEST, SLOT_BITS = 4, 7  # bench.multi_value's arrays: 0-4 elements of 0-99
_KEY = " + ".join(f"(coalesce(nums[{j + 1}] + 1, 0) << {SLOT_BITS * j})" for j in range(LONGEST))
KEY = f"CASE WHEN nums IS NOT NULL THEN {_KEY} END"
VARIANTS = {
    "GROUP BY nums": "SELECT nums, count(*), sum(added) FROM rows GROUP BY nums",
    "packed key, keys only": f"SELECT {KEY} AS k, count(*), sum(added) FROM rows GROUP BY 1",
    "packed key + any_value(nums)": f"SELECT any_value(nums), count(*), sum(added) FROM rows GROUP BY {KEY}",
}


def cpu_seconds(conn: duckdb.DuckDBPyConnection, sql: str) -> tuple[float, int]:
    began = time.process_time()
    groups = conn.execute(sql).to_arrow_table().num_rows
    return time.process_time() - began, groups


def main(argv: list[str] | None = None) -> int:
    args = rows_arguments(__doc__).parse_args(argv)
    generated = rows_table(args.rows, args.segments).combine_chunks()
    share = generated.slice(0, args.rows // args.segments)
    conn = duckdb.connect()
    conn.execute(f"SET threads = {os.cpu_count()}")
    results = []
    for scope, table in (("all rows", generated), ("one segment", share)):
        assert isinstance(table, pa.Table)
        conn.register("rows", table)
        for name, sql in VARIANTS.items():
            runs = [cpu_seconds(conn, sql) for _ in range(args.repeat)]
            cpu = round(statistics.median(r[0] for r in runs), 2)
            results.append(
                {"scope": scope, "rows": table.num_rows, "variant": name, "groups": runs[0][1], "cpu_s": cpu}
            )
            log(json.dumps(results[-1]))
        conn.unregister("rows")
    print(json.dumps({"load": os.getloadavg(), "results": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
