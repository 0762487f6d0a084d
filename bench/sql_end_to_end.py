"""The end-to-end part of `python -m bench.sql`: SQL API vs native API vs DuckDB, and a streamed
selection of every row with the broker's memory watched while it runs."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import duckdb
import httpx

from bench.cluster_setup import Dataset, cluster, wait_for_segments, workloads, write_dataset
from bench.measure import log, post_query, spread, time_calls

NO_CACHE = {"useCache": False, "populateCache": False}


def statements(ds: Dataset) -> dict[str, str]:
    """Druid SQL asking what each native workload of `bench.cluster_setup` asks."""
    t = ds.name
    return {
        "timeseries hour": f"SELECT FLOOR(__time TO HOUR) AS t, COUNT(*) AS c, SUM(added) AS added, "
        f"SUM(score) AS score FROM {t} GROUP BY 1",
        "topN page x10": f"SELECT page, SUM(added) AS added, COUNT(*) AS c, SUM(score) AS score FROM {t} "
        "GROUP BY page ORDER BY added DESC LIMIT 10",
        "groupBy country,channel": f"SELECT country, channel, COUNT(*) AS c, SUM(added) AS added, "
        f"SUM(score) AS score FROM {t} GROUP BY 1, 2",
    }


def join_statements(ds: Dataset) -> tuple[str, str]:
    """A grouped fact joined with a 1,000-row subquery: Druid SQL, and DuckDB's SQL over the files.
    The broker runs both groupings as native queries and the join in its own engine."""
    inner = (
        "SELECT page, {agg} FROM {src} WHERE country = 'country07' "
        "GROUP BY page ORDER BY c DESC, page LIMIT 1000"
    )
    outer = (
        "SELECT f.page, f.added, s.c FROM (SELECT page, SUM(added) AS added FROM {src} GROUP BY page) f "
        "JOIN ({inner}) s ON f.page = s.page"
    )
    src = f"read_parquet({ds.parquet_list()})"
    druid = outer.format(src=ds.name, inner=inner.format(src=ds.name, agg="COUNT(*) AS c"))
    duck = outer.format(src=src, inner=inner.format(src=src, agg="count(*) AS c"))
    return druid, duck


def join_figures(client: httpx.Client, url: str, ds: Dataset, repeat: int) -> dict[str, Any]:
    druid, duck = join_statements(ds)
    body = {"query": druid, "context": {**NO_CACHE, "useApproximateTopN": False}}
    conn = duckdb.connect()
    rows = client.post(url + "/druid/v2/sql", json=body).json()
    timings: dict[str, list[float]] = {"sql": [], "duckdb": []}
    for _ in range(repeat):
        timings["sql"] += time_calls(
            lambda: client.post(url + "/druid/v2/sql", json=body).json(), 1, warmup=0
        )
        timings["duckdb"] += time_calls(lambda: conn.execute(duck).fetchall(), 1, warmup=0)
    sql_ms, duck_ms = (statistics.median(timings[k]) for k in ("sql", "duckdb"))
    entry = {
        "query": "join grouped fact x 1,000-row subquery",
        "rows": len(rows),
        "duckdb_rows": len(conn.execute(duck).fetchall()),
        **{f"{k}_ms": spread(v) for k, v in timings.items()},
        "sql_over_duckdb": round(sql_ms / duck_ms, 2),
        "target": "at most 1.5",
    }
    log(
        f"  {'join fact x 1,000 rows':24s} SQL {entry['sql_ms']:>20s} ms  "
        f"DuckDB {entry['duckdb_ms']:>20s} ms  SQL/DuckDB {entry['sql_over_duckdb']:4.2f} "
        f"(target at most 1.5; {len(rows)} rows)"
    )
    return entry


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def streamed_selection(url: str, pid: int, ds: Dataset) -> dict[str, Any]:
    before = _rss_kib(pid)
    peak = before
    done = threading.Event()

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_kib(pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    body = {"query": f"SELECT __time, country, page, added FROM {ds.name}", "resultFormat": "arrayLines",
            "context": NO_CACHE}  # fmt: skip
    started = time.perf_counter()
    first = None
    lines = 0
    with httpx.stream("POST", url + "/druid/v2/sql", json=body, timeout=3600) as resp:
        resp.raise_for_status()
        for chunk in resp.iter_bytes():
            if first is None and chunk:
                first = time.perf_counter() - started
            lines += chunk.count(b"\n")
    total = time.perf_counter() - started
    done.set()
    watcher.join()
    rows = lines - 1  # the closing empty line
    conn = duckdb.connect()
    duck_started = time.perf_counter()
    duck_rows = (
        conn.sql(f"SELECT __time, country, page, added FROM read_parquet({ds.parquet_list()})")
        .to_arrow_table()
        .num_rows
    )
    duck = time.perf_counter() - duck_started
    out = {
        "rows": rows,
        "first_byte_s": round(first or total, 3),
        "total_s": round(total, 2),
        "rows_per_s": round(rows / total),
        "broker_rss_mib_before": round(before / 1024),
        "broker_rss_mib_peak": round(peak / 1024),
        "duckdb_arrow_s": round(duck, 2),
        "duckdb_rows": duck_rows,
    }
    log(f"  SELECT every row: {rows:,} rows, first byte after {out['first_byte_s']} s, {total:.1f} s in all "
        f"({out['rows_per_s']:,} rows/s); broker RSS {out['broker_rss_mib_before']} MiB -> peak "
        f"{out['broker_rss_mib_peak']} MiB; DuckDB to Arrow {duck:.2f} s")  # fmt: skip
    return out


def end_to_end(rows: int, segments: int, repeat: int) -> dict[str, Any]:
    report: dict[str, Any] = {"rows": rows, "segments": segments, "queries": []}
    with cluster() as c:
        ds = write_dataset(c.root, "bench", rows, segments)
        c.start_data_nodes(2)
        broker = c.start_broker("--cache", "none")
        wait_for_segments(broker, segments)
        log(f"end to end on {rows:,} rows in {segments} segments (median [min-max] of {repeat}):")
        conn = duckdb.connect()
        natives = workloads(ds, NO_CACHE)
        with httpx.Client(timeout=600) as client:
            for name, sql in statements(ds).items():
                native, duck_sql = natives[name]
                body = {"query": sql, "context": NO_CACHE}
                sql_rows = client.post(broker.url + "/druid/v2/sql", json=body).json()
                timings: dict[str, list[float]] = {"sql": [], "native": [], "duckdb": []}
                calls = {
                    "sql": lambda body=body: client.post(broker.url + "/druid/v2/sql", json=body).json(),
                    "native": lambda native=native: post_query(client, broker.url, native),
                }
                for i in range(repeat):
                    # SQL and native back to back, which first alternating: neither always follows
                    # DuckDB's burst on both cores
                    for kind in ("sql", "native") if i % 2 == 0 else ("native", "sql"):
                        timings[kind] += time_calls(calls[kind], 1, warmup=0)
                    timings["duckdb"] += time_calls(
                        lambda q=duck_sql: conn.execute(q).fetchall(), 1, warmup=0
                    )
                sql_ms, native_ms, duck_ms = (
                    statistics.median(timings[k]) for k in ("sql", "native", "duckdb")
                )
                entry = {
                    "query": name,
                    "rows": len(sql_rows),
                    **{f"{k}_ms": spread(v) for k, v in timings.items()},
                    "sql_over_native": round(sql_ms / native_ms, 2),
                    # each round's SQL over its own native run (taken back to back): what a slow
                    # stretch of the machine adds to both cancels out
                    "sql_over_native_paired": round(
                        statistics.median(
                            a / b for a, b in zip(timings["sql"], timings["native"], strict=True)
                        ),
                        2,
                    ),
                    "sql_over_duckdb": round(sql_ms / duck_ms, 2),
                }
                report["queries"].append(entry)
                log(
                    f"  {name:24s} SQL {entry['sql_ms']:>20s} ms  native {entry['native_ms']:>20s} ms  "
                    f"DuckDB {entry['duckdb_ms']:>20s} ms  SQL/native {entry['sql_over_native']:4.2f} "
                    f"(paired {entry['sql_over_native_paired']:4.2f})  "
                    f"SQL/DuckDB {entry['sql_over_duckdb']:4.2f}"
                )
            report["join"] = join_figures(client, broker.url, ds, repeat)
        report["selection"] = streamed_selection(broker.url, broker.pid, ds)
    return report
