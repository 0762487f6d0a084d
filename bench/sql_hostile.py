"""Does the broker answer other clients while it plans a large SQL statement? Health-check latency
measured before and during the planning of a statement near the size limit (an `IN` list of
~90,000 items), and how soon over-limit statements are refused.

    python -m bench.sql_hostile [--items 90000] [--rows 100000]

`health_while_planning` is also what the hostile-SQL integration test asserts on.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

import httpx

from bench.cluster_setup import cluster, wait_for_segments, write_dataset
from bench.measure import log
from strata.sql.guard import MAX_STATEMENT_CHARS


def in_list_statement(table: str, column: str, items: int) -> str:
    """A statement whose `IN` list holds `items` values (`#ch0` .. first, so some rows match)."""
    values = ",".join(f"'#ch{i}'" for i in range(items))
    return f'SELECT COUNT(*) AS c FROM "{table}" WHERE "{column}" IN ({values})'


def _health_latencies(client: httpx.Client, url: str, until: threading.Event, pause: float) -> list[float]:
    latencies = []
    while not until.is_set():
        started = time.perf_counter()
        resp = client.get(url + "/status/health")
        latencies.append(time.perf_counter() - started)
        assert resp.status_code == 200, resp.text
        time.sleep(pause)
    return latencies


def _summary(latencies: list[float]) -> dict[str, Any]:
    ordered = sorted(latencies)
    return {
        "probes": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def health_while_planning(url: str, statement: str, pause: float = 0.01) -> dict[str, Any]:
    """Health-check latency alone for a second, then while `statement` is posted (from another
    thread) until its answer arrives; the statement's status, seconds and answer."""
    with httpx.Client(timeout=60) as client:
        done = threading.Event()
        timer = threading.Timer(1.0, done.set)
        timer.start()
        idle = _health_latencies(client, url, done, pause)
        answer: dict[str, Any] = {}
        posted = threading.Event()

        def post() -> None:
            started = time.perf_counter()
            posted.set()
            resp = httpx.post(url + "/druid/v2/sql", json={"query": statement}, timeout=120)
            answer.update(status=resp.status_code, seconds=round(time.perf_counter() - started, 2),
                          body=resp.json())  # fmt: skip
            done.set()

        done.clear()
        poster = threading.Thread(target=post)
        poster.start()
        posted.wait()
        busy = _health_latencies(client, url, done, pause)
        poster.join()
    return {"statement_chars": len(statement), **answer, "health_idle": _summary(idle),
            "health_while_planning": _summary(busy)}  # fmt: skip


def refusal_seconds(url: str, statement: str) -> dict[str, Any]:
    started = time.perf_counter()
    resp = httpx.post(url + "/druid/v2/sql", json={"query": statement}, timeout=120)
    seconds = round(time.perf_counter() - started, 2)
    category = resp.json().get("category")
    return {"statement_chars": len(statement), "status": resp.status_code, "seconds": seconds,
            "category": category}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=90_000)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    with cluster() as c:
        ds = write_dataset(c.root, "bench", args.rows, 4)
        c.start_data_nodes(2)
        broker = c.start_broker("--cache", "none")
        wait_for_segments(broker, 4)
        big = in_list_statement(ds.name, "channel", args.items)
        assert len(big) <= MAX_STATEMENT_CHARS, "fewer --items: the statement must be within the limit"
        report = {
            "planned": health_while_planning(broker.url, big),
            "million_item_in_list": refusal_seconds(broker.url, in_list_statement(ds.name, "channel", 10**6)),
        }
    log(json.dumps(report, indent=1))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
