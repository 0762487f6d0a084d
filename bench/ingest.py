"""Ingestion time and peak memory of the local engine beside DuckDB writing the same rows to Parquet.

    python -m bench.ingest [--rows 10000000] [--repeat 3]

Datasets: Druid's wikipedia sample (json.gz, day segments), 10M synthetic rows over a week (Parquet,
day segments) and 10M rows over 96 hours (Parquet, the cluster benchmarks' rows, 96 hourly
segments). Each dataset runs `--repeat` times, Strata and DuckDB alternating so both see the same
machine load; the ratio is of the two medians, and min/max show the spread. Every run is a child
process of its own, so its peak resident memory (`VmHWM` in /proc, read by the child as it ends)
is its own: the largest of the rounds is printed. Time is measured in the child around the
ingestion (or the `COPY`) alone, after the imports.

DuckDB's side is `COPY (FROM <input>) TO ... (FORMAT parquet, COMPRESSION zstd)` with
`preserve_insertion_order = false`, as DuckDB's tuning guide advises for exports: it may then
write rows as they come instead of buffering them to keep their order (with it on, the 96-hour
file's copy peaked at about 1 GB instead of 0.3 GB, and took longer). DuckDB neither truncates,
sorts, partitions nor publishes.
Prints a table and, last, one JSON line. Targets: the local engine within 2x of DuckDB's time and
under 1 GB of peak memory.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE

MEMORY_TARGET_MB = 1024
HOURS = 96


@dataclass
class Run:
    """One child process's figures: seconds of the timed work, its result rows, peak RSS."""

    seconds: float
    rows: int
    peak_mb: float


@dataclass
class Side:
    runs: list[Run] = field(default_factory=list)

    @property
    def times(self) -> list[float]:
        return [r.seconds for r in self.runs]

    @property
    def peak_mb(self) -> float:
        return max(r.peak_mb for r in self.runs)


def _child(argv: list[str]) -> Run:
    """`python -m bench.ingest --run ...` as a child process, read from the JSON line it prints."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.ingest", "--run", *argv], stdout=subprocess.PIPE, text=True, check=True
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return Run(figures["seconds"], figures["rows"], figures["peak_mb"])


def _peak_mb() -> float:
    """This process's resident high-water mark (`VmHWM`): of this program alone, unlike `ru_maxrss`,
    which also counts the forking parent's pages the child held until its `exec`."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _strata(spec: dict[str, Any], work: Path) -> Run:
    work.mkdir(parents=True, exist_ok=True)
    (work / "spec.json").write_text(json.dumps(spec))
    return _child(["strata", str(work / "spec.json"), str(work)])


def _duckdb_copy(source_sql: str, out: Path) -> Run:
    return _child(["duckdb", source_sql, str(out)])


def _run_in_child(what: str, arg: str, out: str) -> None:
    """The child's side: the timed work, then one JSON line."""
    if what == "strata":
        import strata.ingestion.local_engine  # noqa: F401  # imported before the clock, as in a running process
        from strata.ingestion import ingest

        spec = json.loads(Path(arg).read_text())
        began = time.perf_counter()
        summary = ingest(spec, deep_storage=Path(out) / "deep", metadata=Path(out) / "meta.db")
        took, rows = time.perf_counter() - began, summary.rows_ingested
    else:
        con = duckdb.connect()
        con.execute("SET preserve_insertion_order = false")
        began = time.perf_counter()
        rows = con.execute(f"COPY ({arg}) TO '{out}' (FORMAT parquet, COMPRESSION zstd)").fetchall()[0][0]
        took = time.perf_counter() - began
        con.close()
    print(json.dumps({"seconds": took, "rows": rows, "peak_mb": _peak_mb()}))


def synthetic_select(rows: int) -> str:
    """DuckDB's SELECT of the synthetic rows over the first week of 2020: the same rows every run."""
    return f"""SELECT
            TIMESTAMP '2020-01-01' + to_milliseconds((i * 7919) % (7 * 86400000)) AS ts,
            'country_' || (hash(i) % 50)::VARCHAR AS country,
            'device_' || (hash(i * 3) % 8)::VARCHAR AS device,
            'page_' || (hash(i * 7) % 20000)::VARCHAR AS page,
            'user_' || (hash(i * 11) % 500000)::VARCHAR AS user_id,
            (hash(i * 13) % 1000)::BIGINT AS bytes,
            (hash(i * 17) % 100000) / 100.0 AS latency
          FROM range({rows}) t(i)"""


def _synthetic(path: Path, rows: int) -> None:
    duckdb.execute(f"COPY ({synthetic_select(rows)}) TO '{path}' (FORMAT parquet)")


def _hourly(path: Path, rows: int) -> None:
    """The cluster benchmarks' rows (`bench.cluster_setup.synthetic_rows`) over 96 hours, as one
    Parquet file written by Arrow (1M-row row groups), its time column named `ts`."""
    import pyarrow.parquet as pq

    from bench.cluster_setup import synthetic_rows

    table = synthetic_rows(rows, HOURS, seed=7)
    pq.write_table(table.rename_columns(["ts", *table.column_names[1:]]), path)


def _rounds(repeat: int, spec: dict[str, Any], source_sql: str, work: Path, tag: str) -> tuple[Side, Side]:
    """Alternate Strata ingesting with `spec` and DuckDB copying `source_sql`, `repeat` times."""
    s, d = Side(), Side()
    for i in range(repeat):
        s.runs.append(_strata(spec, work / f"{tag}{i}"))
        d.runs.append(_duckdb_copy(source_sql, work / f"{tag}_duck{i}.parquet"))
    return s, d


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000, help="synthetic dataset size")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per dataset (medians are compared)")
    ap.add_argument("--run", nargs=3, metavar=("WHAT", "INPUT", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run:
        _run_in_child(*args.run)
        return 0
    repeat = max(1, args.repeat)
    results: list[tuple[str, Side, Side]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        wiki_spec = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
        wiki_spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)
        wiki_sql = f"FROM read_json('{WIKIPEDIA_SAMPLE}', format='newline_delimited')"
        _strata(wiki_spec, work / "warmup")  # the page cache and bytecode, as a second run has them
        _duckdb_copy(wiki_sql, work / "warmup.parquet")
        s, d = _rounds(repeat, wiki_spec, wiki_sql, work, "wiki")
        results.append(("wikipedia (json.gz)", s, d))

        for name, make, spec_of in (
            (f"synthetic {args.rows:,} (parquet)", _synthetic, _synthetic_spec),
            (f"{args.rows:,} in {HOURS} hours (parquet)", _hourly, _hourly_spec),
        ):
            path = work / f"{make.__name__.strip('_')}.parquet"
            make(path, args.rows)
            s, d = _rounds(repeat, spec_of(path), f"FROM read_parquet('{path}')", work, path.stem)
            results.append((f"{name}, {path.stat().st_size / 1e6:.0f} MB", s, d))

    print(
        f"{'dataset':<40}{'rows':>12}{'strata s':>10}{'(min-max)':>15}{'peak MB':>9}"
        f"{'duckdb s':>10}{'(min-max)':>15}{'peak MB':>9}{'ratio':>7}"
    )
    out_rows = []
    for name, s, d in results:
        n = s.runs[-1].rows
        ms, md = statistics.median(s.times), statistics.median(d.times)
        print(
            f"{name:<40}{n:>12,}{ms:>10.2f}{_spread(s.times):>15}{s.peak_mb:>9.0f}"
            f"{md:>10.2f}{_spread(d.times):>15}{d.peak_mb:>9.0f}{ms / md:>7.2f}"
        )
        out_rows.append({
            "dataset": name,
            "rows": n,
            "rounds": len(s.runs),
            "strata_s": round(ms, 3),
            "strata_s_all": [round(t, 3) for t in s.times],
            "strata_rows_per_s": round(n / ms),
            "strata_peak_mb": round(s.peak_mb),
            "duckdb_s": round(md, 3),
            "duckdb_s_all": [round(t, 3) for t in d.times],
            "duckdb_rows_per_s": round(n / md),
            "duckdb_peak_mb": round(d.peak_mb),
            "ratio": round(ms / md, 2),
            "strata_peak_under_target": s.peak_mb < MEMORY_TARGET_MB,
        })  # fmt: skip
    print(json.dumps({"bench": "ingest", "results": out_rows}))
    return 0


def _spread(times: list[float]) -> str:
    return f"({min(times):.2f}-{max(times):.2f})"


def _hourly_spec(path: Path) -> dict[str, Any]:
    spec = _synthetic_spec(path)
    schema = spec["spec"]["dataSchema"]
    schema["dataSource"] = "hourly"
    schema["granularitySpec"]["segmentGranularity"] = "hour"
    schema["dimensionsSpec"]["dimensions"] = [
        "country",
        "channel",
        "page",
        {"name": "added", "type": "long"},
        {"name": "score", "type": "double"},
    ]
    return spec


def _synthetic_spec(path: Path) -> dict[str, Any]:
    return {
        "type": "index_parallel",
        "spec": {
            "dataSchema": {
                "dataSource": "synthetic",
                "timestampSpec": {"column": "ts", "format": "auto"},
                "dimensionsSpec": {
                    "dimensions": [
                        "country",
                        "device",
                        "page",
                        "user_id",
                        {"name": "bytes", "type": "long"},
                        {"name": "latency", "type": "double"},
                    ]
                },
                "granularitySpec": {
                    "segmentGranularity": "day",
                    "queryGranularity": "none",
                    "rollup": False,
                },
            },
            "ioConfig": {
                "inputSource": {"type": "local", "files": [str(path)]},
                "inputFormat": {"type": "parquet"},
            },
            "tuningConfig": {"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 5_000_000}},
        },
    }


if __name__ == "__main__":
    sys.exit(main())
