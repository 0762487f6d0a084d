"""Where one large answer's time goes, end to end: the whole-array groupBy of bench.multi_value
(issue 37 item 7), one query at a time, each stage's wall and CPU seconds.

    python -m bench.answer_stages [--rows 2000000] [--segments 24] [--repeat 3]

Stages, from the client's clock and the servers' own: the data node's request (the broker's
`strata_broker_node_request_seconds`: scan, partial, Arrow IPC transfer), the broker's query up to
its first byte (`strata_broker_query_seconds`: gather, merge, ranking and, when not streamed, the
whole JSON text), the first byte and last byte at the client, the client's parse (`orjson.loads`
of the body, as `bench.measure.QueryConnection` parses) and its freeing of the rows. CPU seconds
per process (the historical, the broker, its merge workers) from /proc. The body is read as the
benchmark's client reads it, Content-Length or chunked.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import socket
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.cluster_setup import cluster, wait_for_segments, write_hourly
from bench.measure import chunked_body, cpu_seconds, log
from bench.multi_value import DIMS, METRICS, rows_table, shapes
from harness.memory import children

SHAPE = "ARRAY groupBy"


def _metric_sums(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics", timeout=30).text
    out: dict[str, float] = {}
    for name in ("strata_broker_node_request_seconds_sum", "strata_broker_query_seconds_sum"):
        out[name] = sum(float(m) for m in re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M))
    return out


def _read_body(sock: socket.socket, buffer: bytearray) -> tuple[bytes, float, float]:
    """The response's body, the time of its first and last byte (Content-Length or chunked)."""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        _receive(sock, buffer)
    first = time.perf_counter()
    head = bytes(buffer[:end]).lower()
    del buffer[: end + 4]
    if b"transfer-encoding: chunked" in head:
        body = chunked_body(buffer, lambda: _receive(sock, buffer))
        return body, first, time.perf_counter()
    length = int(re.search(rb"content-length: *(\d+)", head)[1])  # type: ignore[index]
    while len(buffer) < length:
        _receive(sock, buffer)
    whole = bytes(buffer[:length])
    del buffer[:length]
    return whole, first, time.perf_counter()


def _receive(sock: socket.socket, buffer: bytearray) -> None:
    chunk = sock.recv(1 << 20)
    if not chunk:
        raise ConnectionError("the server closed the connection")
    buffer += chunk


def one_query(
    url: str, native: dict[str, Any], pids: dict[str, int], save: Path | None = None
) -> dict[str, float]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    payload = orjson.dumps(native)
    request = (f"POST /druid/v2/ HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload  # fmt: skip
    sums = _metric_sums(url)
    procs = {name: [pid, *children(pid)] for name, pid in pids.items()}
    cpu = {name: sum(cpu_seconds(p) for p in ps) for name, ps in procs.items()}
    with socket.create_connection((host, int(port)), timeout=600) as sock:
        began, own = time.perf_counter(), time.process_time()
        sock.sendall(request)
        body, first, last = _read_body(sock, bytearray())
        received = time.process_time()
        rows = orjson.loads(body)
        parsed, parse_cpu = time.perf_counter(), time.process_time()
        count = len(rows)
        del rows
        gc.collect()
        freed = time.perf_counter()
    if save is not None:
        save.write_bytes(body)
    after = _metric_sums(url)
    procs = {name: [pid, *children(pid)] for name, pid in pids.items()}
    cpu_after = {name: sum(cpu_seconds(p) for p in ps) for name, ps in procs.items()}
    return {
        "groups": count,
        "mb": round(len(body) / 1e6, 1),
        "node_request_s": after["strata_broker_node_request_seconds_sum"]
        - sums["strata_broker_node_request_seconds_sum"],
        "broker_query_s": after["strata_broker_query_seconds_sum"] - sums["strata_broker_query_seconds_sum"],
        "first_byte_s": first - began,
        "last_byte_s": last - began,
        "parsed_s": parsed - began,
        "freed_s": freed - began,
        "client_receive_cpu_s": received - own,
        "client_parse_cpu_s": parse_cpu - received,
        **{f"{name}_cpu_s": cpu_after[name] - cpu[name] for name in pids},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--segments", type=int, default=24)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--save-body", type=Path, help="write the last answer's body here (to time parsers apart)"
    )
    args = ap.parse_args(argv)
    with cluster() as c:
        log(f"writing {args.rows:,} rows in {args.segments} hourly segments")
        ds = write_hourly(c.root, "mv", rows_table(args.rows, args.segments), args.segments, DIMS, METRICS)
        c.start_data_nodes(1)
        broker = c.start_broker("--cache", "none")
        wait_for_segments(broker, args.segments, nodes=c.historicals)
        native = shapes(ds)[SHAPE][0]
        pids = {"historical": c.historicals[0].pid, "broker": broker.pid}
        one_query(broker.url, native, pids)  # warm: the segments' Arrow copies, the merge workers
        runs = []
        for _ in range(args.repeat):
            runs.append(one_query(broker.url, native, pids, args.save_body))
            log(json.dumps({k: round(v, 2) for k, v in runs[-1].items()}))
    medians = {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
    print(json.dumps({"rows": args.rows, "segments": args.segments, "load": os.getloadavg(), **medians}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
