"""Warm per-segment queries/s with security on beside security off, in the same run (issue 28).

    python -m bench.security [--rows 200000] [--segments 24] [--seconds 5] [--repeat 5] [--connections 8]

Two clusters over one metadata store and deep storage: a historical and a `--cache lru` broker
with no authenticator, and the same pair with `--authenticator basic` (the broker checks Basic
credentials, READ on the datasource, and calls the historical as the internal identity). A
timeseries by hour over every segment with the whole-answer cache off, so each query is answered
from the broker's per-segment cache: the path a dashboard takes, where a security check costs the
most relative to the work. wrk (one thread, keep-alive connections; its Lua script, mode 600 in a
private directory, holds the credentials, so they never reach a command line) drives each side in
turn, `--repeat` rounds; the ratio on/off is taken within each round and the median reported
against the target (>= 0.95). Answers are checked equal between the two sides first. Nothing is
asserted; a JSON line ends the output.
"""

from __future__ import annotations

import argparse
import json
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.cache import SEGMENT_LEVEL
from bench.cluster_setup import HOUR_MS, METRICS, START_MS, BenchProcess, write_dataset
from bench.measure import cpu_seconds
from harness.processes import StrataProcess
from strata.security.client import basic_header
from strata.security.resources import Permission
from strata.security.store import open_security_store
from timeline import format_instant

DATASOURCE = "bench"
TARGET = 0.95
_LUA = """
wrk.method = "POST"
wrk.body = [==[{body}]==]
{headers}
done = function(summary, latency, requests)
  io.write(string.format('{{"requests":%d,"duration_us":%d,"errors":%d}}\\n', summary.requests,
    summary.duration, summary.errors.connect + summary.errors.read + summary.errors.write
    + summary.errors.timeout + summary.errors.status))
end
"""


def query(segments: int) -> bytes:
    interval = f"{format_instant(START_MS)}/{format_instant(START_MS + segments * HOUR_MS)}"
    body = {"queryType": "timeseries", "dataSource": DATASOURCE, "intervals": [interval],
            "granularity": "hour", "aggregations": METRICS, "context": SEGMENT_LEVEL}  # fmt: skip
    return orjson.dumps(body)


def wrk(
    url: str, body: bytes, headers: dict[str, str], connections: int, seconds: float, private: Path
) -> float:
    """Queries/s over `seconds` (errors fail the run: a refused query is not a fast one)."""
    exe = shutil.which("wrk")
    if exe is None:
        raise SystemExit("wrk is not installed (scripts/install-system-packages.sh test installs it)")
    lines = "\n".join(
        f'wrk.headers["{k}"] = "{v}"' for k, v in {"Content-Type": "application/json", **headers}.items()
    )
    script = private / "load.lua"
    script.write_text(_LUA.format(body=body.decode(), headers=lines))
    script.chmod(0o600)
    argv = [
        exe,
        "-t",
        "1",
        "-c",
        str(connections),
        "-d",
        f"{seconds:g}s",
        "-s",
        str(script),
        url + "/druid/v2/",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    figures = json.loads([line for line in out.splitlines() if line.startswith("{")][-1])
    if figures["errors"]:
        raise RuntimeError(f"{figures['errors']} failed requests against {url}")
    return float(figures["requests"] / (figures["duration_us"] / 1e6))


def profile(
    sides: dict[str, tuple[BenchProcess, dict[str, str]]], body: bytes, args: Any, private: Path
) -> None:
    """py-spy on each broker under the same load: where the secured one spends its extra time."""
    args.profile.mkdir(parents=True, exist_ok=True)
    for side, (broker, headers) in sides.items():
        out = args.profile / f"broker-{side}.txt"
        py_spy = str(Path(sys.executable).with_name("py-spy"))
        argv = [py_spy, "record", "--pid", str(broker.pid), "--format", "raw", "--output", str(out),
                "--duration", str(int(args.seconds)), "--nonblocking"]  # fmt: skip
        spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wrk(broker.url, body, headers, args.connections, args.seconds, private)
        finally:
            spy.wait(timeout=args.seconds + 60)
        print(f"profile of the broker with security {side}: {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--segments", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--profile", type=Path, help="also record each broker with py-spy (collapsed stacks)")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="strata-bench-security-"))
    private = Path(tempfile.mkdtemp(prefix="strata-bench-secrets-"))  # mode 700
    procs: list[StrataProcess] = []
    try:
        write_dataset(root, DATASOURCE, args.rows, args.segments)
        passwords = {"admin": secrets.token_urlsafe(12), "internal": secrets.token_urlsafe(12),
                     "reader": secrets.token_urlsafe(12)}  # fmt: skip
        store = open_security_store(root / "meta.db")
        store.ensure_initial(passwords["admin"], passwords["internal"])
        store.create_user("reader")
        store.set_password("reader", passwords["reader"])
        store.create_role("readers")
        store.set_permissions("readers", [Permission.of(DATASOURCE, "DATASOURCE", "READ")])
        store.assign("reader", "readers")
        store.close()
        env = {"STRATA_ADMIN_PASSWORD": passwords["admin"], "STRATA_INTERNAL_PASSWORD": passwords["internal"]}
        common = ["--metadata", str(root / "meta.db"), "--deep-storage", str(root / "deep")]
        secure = ["--authenticator", "basic", "--metadata", str(root / "meta.db")]
        sides: dict[str, tuple[BenchProcess, dict[str, str]]] = {}
        for side, flags, headers in (
            ("off", [], {}),
            ("on", secure, basic_header("reader", passwords["reader"])),
        ):
            cache = ["--segment-cache", str(root / f"cache-{side}")]
            hist = BenchProcess(
                "historical", [*common, *flags, *cache], root / f"historical-{side}.log", env=env
            )
            procs.append(hist.start(timeout=60))
            broker = BenchProcess("broker", [*flags, "--discovery", "http", "--nodes", hist.address,
                                  "--cache", "lru", "--result-cache", "off"], root / f"broker-{side}.log",
                                  env=env)  # fmt: skip
            procs.append(broker.start(timeout=60))
            sides[side] = (broker, headers)
        body = query(args.segments)
        answers = {}
        for side, (broker, headers) in sides.items():
            deadline = time.monotonic() + 120
            while True:  # until every segment is served, then once more to fill the per-segment cache
                got = httpx.post(broker.url + "/druid/v2/", content=body, timeout=60,
                                 headers={"Content-Type": "application/json", **headers}).json()  # fmt: skip
                if len(got) == args.segments or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            answers[side] = got
        if answers["on"] != answers["off"] or len(answers["on"]) != args.segments:
            raise SystemExit("the two sides answer differently (or not every segment is served)")
        ratios, cpu_ratios, qps = [], [], {"off": [], "on": []}
        for r in range(args.repeat):
            round_qps, cpu_per_query = {}, {}
            for side in ("off", "on") if r % 2 == 0 else ("on", "off"):  # alternate who goes first
                broker, headers = sides[side]
                cpu, began = cpu_seconds(broker.pid), time.monotonic()
                round_qps[side] = wrk(broker.url, body, headers, args.connections, args.seconds, private)
                queries = round_qps[side] * (time.monotonic() - began)
                cpu_per_query[side] = (cpu_seconds(broker.pid) - cpu) / max(queries, 1.0)
                qps[side].append(round(round_qps[side]))
            ratios.append(round_qps["on"] / round_qps["off"])
            cpu_ratios.append(cpu_per_query["off"] / cpu_per_query["on"])
            print(f"round {r + 1}: off {round_qps['off']:7.0f} q/s  on {round_qps['on']:7.0f} q/s  "
                  f"ratio {ratios[-1]:.3f}; broker CPU per query off {cpu_per_query['off'] * 1e6:4.0f} us "
                  f"on {cpu_per_query['on'] * 1e6:4.0f} us, ratio {cpu_ratios[-1]:.3f}",
                  flush=True)  # fmt: skip
        if args.profile is not None:
            profile(sides, body, args, private)
        result: dict[str, Any] = {
            "bench": "security", "segments": args.segments, "connections": args.connections,
            "qps_off": qps["off"], "qps_on": qps["on"], "ratio_median": round(statistics.median(ratios), 3),
            "ratios": [round(x, 3) for x in ratios], "target": TARGET,
            "cpu_ratio_median": round(statistics.median(cpu_ratios), 3),
        }  # fmt: skip
        print(f"median on/off {result['ratio_median']:.3f} by q/s, "
              f"{result['cpu_ratio_median']:.3f} by broker CPU per query (target >= {TARGET})")  # fmt: skip
        print(json.dumps(result))
    finally:
        for p in procs:
            try:
                p.stop()
            except Exception:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(private, ignore_errors=True)


if __name__ == "__main__":
    main()
