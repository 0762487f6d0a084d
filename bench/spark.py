"""The Spark benchmark of issue 13 in one run: Spark ingestion beside the local engine, and reads
through the broker beside Spark reading the same Parquet files, each against its target.

    python -m bench.spark [--rows 10000000] [--segments 100] [--repeat 3] [--formats parquet,json]

Runs `bench.spark_ingest` and then `bench.spark_read` at the same row count, each in a process of
its own: each starts its own Spark session, and the read its own cluster. Their own tables and
baselines (DuckDB) are described in those modules. Prints one table of the three comparisons
with their targets and, last, one JSON line with both benchmarks' figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from bench.child import run_one

INGEST_TARGET = 1.0  # Spark seconds / local seconds: at least as fast as the local engine
FULL_READ_TARGET = 1.5  # through Strata / Spark reading the files directly: within 1.5x (issue 41)
FILTERED_READ_TARGET = 1.0  # strictly faster than the direct read


Verdict = tuple[str, float, str, bool, str]
"""(comparison, ratio, target, met, the figures compared)"""


def verdicts(ingest: dict[str, Any], read: dict[str, Any]) -> list[Verdict]:
    """A verdict for every comparison the two benchmarks' figures hold."""
    out: list[Verdict] = []
    for r in ingest.get("results", []):
        ratio = float(r["spark_over_local"])
        what = f"ingestion, {r['dataset']}: Spark / local"
        spark, local = r.get("spark_rows_per_s", 0), r.get("local_rows_per_s", 0)
        detail = f"Spark {spark:,} rows/s, local {local:,} rows/s"
        out.append((what, ratio, f"<= {INGEST_TARGET}", ratio <= INGEST_TARGET, detail))
    reads = (("full read", FULL_READ_TARGET, False), ("filtered read", FILTERED_READ_TARGET, True))
    for name, bound, strict in reads:  # (the full read via the data nodes is reported, not judged)
        if name in read:
            fig = read[name]
            ratio = float(fig["broker_over_direct"])
            met = ratio < bound if strict else ratio <= bound
            via, direct = fig.get("broker_s", 0), fig.get("spark_direct_s", 0)
            detail = f"Strata {via:.2f} s, Spark direct {direct:.2f} s"
            target = f"{'<' if strict else '<='} {bound}"
            out.append((f"{name}: Strata / Spark direct", ratio, target, met, detail))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--segments", type=int, default=100, help="hourly segments the read is served from")
    ap.add_argument("--repeat", type=int, default=3, help="timed rounds of each measurement (medians)")
    ap.add_argument("--formats", default="parquet,json", help="ingestion input formats")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per benchmark")
    args = ap.parse_args(argv)
    size = ["--rows", str(args.rows), "--repeat", str(args.repeat)]
    ingest = run_one("spark_ingest", [*size, "--formats", args.formats], args.timeout)
    read = run_one("spark_read", [*size, "--segments", str(args.segments)], args.timeout)
    for name, result in (("spark_ingest", ingest), ("spark_read", read)):
        if "error" in result:
            print(f"bench.{name} failed ({result['error']}):\n{result.get('tail', '')}", file=sys.stderr)
    rows_out = verdicts(ingest.get("figures", {}), read.get("figures", {}))
    width = max((len(r[0]) for r in rows_out), default=10)
    print(f"\n{'comparison':<{width}}  {'ratio':>6}  {'target':>7}")
    for what, ratio, target, met, detail in rows_out:
        print(f"{what:<{width}}  {ratio:>6.2f}  {target:>7}  {'met' if met else 'NOT met':<7}  ({detail})")
    found = [{"comparison": w, "ratio": r, "target": t, "met": m} for w, r, t, m, _ in rows_out]
    print(json.dumps({"bench": "spark", "spark_ingest": ingest.get("figures"),
                      "spark_read": read.get("figures"), "verdicts": found}))  # fmt: skip
    return 1 if "error" in ingest or "error" in read else 0


if __name__ == "__main__":
    sys.exit(main())
