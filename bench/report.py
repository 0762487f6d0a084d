"""docs/benchmarks.md and its plots from the figures `python -m bench` collected (results.json)
and the hand-written account of each benchmark (bench/notes.md: what was measured when, with which
command, and why the figures are what they are).

The suite's tables are generic (each list of records in a benchmark's JSON becomes a table, each flat record a
two-column one), so a benchmark that adds a figure needs no change here; the three plots read the
figures they draw by name.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.suite import benchmarks

_NUMBER = re.compile(r"^\s*(-?[0-9.]+)")


def median_of(value: Any) -> float | None:
    """The median of a "12.3 [11.0-15.2]" figure (or a plain number)."""
    if isinstance(value, (int, float)):
        return float(value)
    m = _NUMBER.match(str(value))
    return float(m.group(1)) if m else None


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        mem_kib = 0
    return (
        f"{os.cpu_count()} cores ({cpu or platform.processor() or 'unknown CPU'}), "
        f"{mem_kib / 1024 / 1024:.0f} GiB, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def _table(records: Sequence[Mapping[str, Any]]) -> list[str]:
    keys = list(dict.fromkeys(k for r in records for k, v in r.items() if not isinstance(v, (dict, list))))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_cell(r.get(k, "")) for k in keys) + " |" for r in records]
    return lines


def _sections(value: Any, title: str) -> list[str]:
    """Markdown for one JSON value: lists of records as tables, scalars of a dict as one table."""
    out: list[str] = []
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        out += [f"**{title}**", "", *_table(value), ""]
    elif isinstance(value, Mapping):
        scalars = {k: v for k, v in value.items() if not isinstance(v, (dict, list))}
        if scalars:
            out += [f"**{title}**", "", "| figure | value |", "|---|---|"]
            out += [f"| {k} | {_cell(v)} |" for k, v in scalars.items()]
            out.append("")
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                out += _sections(v, f"{title} / {k}")
    return out


def _plot_queries(results: Mapping[str, Any], path: Path) -> bool:
    """Latency per query and cache state (cold, warm, whole answer) beside DuckDB."""
    rows = (results.get("cache", {}).get("figures", {}) or {}).get("cold_warm") or []
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['cache']}\n{r['query']}" for r in rows]
    series = {"cold": "cold_ms", "warm (per segment)": "warm_ms", "whole answer": "whole_answer_ms",
              "DuckDB": "duckdb_ms"}  # fmt: skip
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 1.4), 4))
    width = 0.8 / len(series)
    for i, (name, key) in enumerate(series.items()):
        values = [median_of(r.get(key)) or 0.0 for r in rows]
        ax.bar([x + i * width for x in range(len(rows))], values, width, label=name)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(rows))], labels, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ms (median)")
    ax.set_title("Latency per query and cache state, beside DuckDB")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plot_segments(results: Mapping[str, Any], path: Path) -> bool:
    rows = (results.get("scaling", {}).get("figures", {}) or {}).get("segments") or []
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [r["segments"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, key in (("cold", "cold_ms"), ("warm (cached)", "warm_ms"), ("DuckDB", "duckdb_ms")):
        ax.plot(xs, [median_of(r[key]) or 0.0 for r in rows], marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("one-hour segments")
    ax.set_ylabel("ms (median)")
    ax.set_title("Timeseries latency against segment count")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plot_concurrency(results: Mapping[str, Any], path: Path) -> bool:
    rows = (results.get("scaling", {}).get("figures", {}) or {}).get("concurrency") or []
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["clients"] for r in rows], [r["qps"] for r in rows], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("queries/s")
    ax.set_title("Warm timeseries throughput against concurrency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _plot_throughput(results: Mapping[str, Any], path: Path) -> bool:
    """bench.throughput's sweep: q/s and latency against wrk's connections, broker beside its floor."""
    rows = (results.get("throughput", {}).get("figures", {}) or {}).get("sweep") or []
    if not rows:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (qps, latency) = plt.subplots(1, 2, figsize=(10, 4))
    for scenario in dict.fromkeys(r["scenario"] for r in rows):
        mine = [r for r in rows if r["scenario"] == scenario]
        xs = [r["connections"] for r in mine]
        line = qps.plot(xs, [r["qps"] for r in mine], marker="o", label=scenario)[0]
        latency.plot(
            xs, [r["p50_ms"] for r in mine], marker="o", color=line.get_color(), label=f"{scenario} p50"
        )
        latency.plot(xs, [r["p99_ms"] for r in mine], linestyle="--", color=line.get_color(),
                     label=f"{scenario} p99")  # fmt: skip
    for ax in (qps, latency):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("wrk connections (1 thread)")
    qps.set_ylabel("queries/s")
    qps.set_title("Throughput: broker beside a bare Starlette app")
    qps.legend(fontsize=7)
    latency.set_yscale("log")
    latency.set_ylabel("ms")
    latency.set_title("Latency (p50 solid, p99 dashed)")
    latency.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _reproduce(name: str, size: Mapping[str, Any]) -> str:
    """The command that measures one benchmark alone at the suite's size."""
    args = benchmarks(int(size.get("rows", 10_000_000)), int(size.get("segments", 100))).get(name, [])
    return " ".join(["python -m bench." + name, *args])


def split_notes(text: str) -> tuple[str, list[tuple[str, str]]]:
    """`bench/notes.md`: its introduction, then (suite benchmark or "", section text) per `## ` section.

    A section names the suite run's benchmark it explains with a `<!-- suite: NAME -->` line."""
    parts = re.split(r"(?m)^(?=## )", text)
    sections = []
    for part in parts[1:]:
        m = re.search(r"^<!-- suite: (\w+) -->\n", part, re.M)
        body = part.replace(m.group(0), "") if m else part
        sections.append((m.group(1) if m else "", body.rstrip("\n")))
    return parts[0].rstrip("\n"), sections


def _suite_tables(name: str, result: Mapping[str, Any], size: Mapping[str, Any]) -> list[str]:
    """One benchmark's figures from the suite run, folded away under how to measure them again."""
    lines = ["<details><summary>From the suite run: " + f"<code>{_reproduce(name, size)}</code>, "
             f"{result.get('seconds', 0):.0f} s</summary>", ""]  # fmt: skip
    if "error" in result:
        lines += [f"Not run: {result['error']}", "", "```", str(result.get("tail", ""))[-1500:], "```", ""]
    else:
        printed = str(result.get("printed", "")).strip()
        if printed:
            lines += ["```", printed, "```", ""]
        lines += _sections(result["figures"], name)
    return [*lines, "</details>", ""]


PLOTS = (
    "latency_by_query.png",
    "latency_by_segments.png",
    "qps_by_clients.png",
    "throughput_by_connections.png",
)


def render_page(results: Mapping[str, Any], notes: str, plots_dir: str) -> str:
    """docs/benchmarks.md: the curated sections of `notes` (each with its own command and figures,
    as measured), each followed by the suite run's tables for its benchmark, then the plots.
    Pure: the same results.json and notes give the same page, so the docs tests can check it."""
    run: Mapping[str, Any] = results.get("_run", {})
    size = {"rows": run.get("rows", 10_000_000), "segments": run.get("segments", 100)}
    intro, sections = split_notes(notes)
    lines = [
        "# Benchmarks",
        "",
        "<!-- Generated by `python -m bench` (or `python -m bench --report-only` from bench/results.json",
        "     and bench/notes.md); do not edit by hand. The docs tests regenerate it. -->",
        "",
        intro,
        "",
        f"The suite run behind the folded tables and the plots: `python -m bench --rows {size['rows']} "
        f"--segments {size['segments']}` on {run.get('date', 'an unrecorded date')}, "
        f"{run.get('machine', 'an unrecorded machine')}; each figure beside its baseline from the same run.",
        "",
        *[f"![{name}]({plots_dir}/{name})" for name in PLOTS],
        "",
    ]
    claimed = set()
    for suite, body in sections:
        lines += [body, ""]
        if suite and suite in results:
            claimed.add(suite)
            lines += _suite_tables(suite, results[suite], size)
    for name, result in results.items():
        if not name.startswith("_") and name not in claimed:
            lines += [f"## {name}", "", *_suite_tables(name, result, size)]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_report(results: Mapping[str, Any], out: Path, page: Path, notes: Path) -> None:
    """The plots into `out` (beside results.json) and the page, linking them, at `page`."""
    draws = (_plot_queries, _plot_segments, _plot_concurrency, _plot_throughput)
    for name, draw in zip(PLOTS, draws, strict=True):
        draw(results, out / name)
    plots_dir = os.path.relpath(out, page.parent)
    page.write_text(render_page(results, notes.read_text(), plots_dir))
