"""Terminal output of `strata ingest`: a rich progress bar while reading, a summary at the end."""

from __future__ import annotations

import orjson
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

from strata.ingestion.summary import IngestionSummary, human_size


class RichProgress:
    """`ingestion.summary.Progress` drawn on stderr."""

    def __init__(self) -> None:
        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
            TextColumn("{task.fields[rows]:,} rows"),
            TimeElapsedColumn(), console=Console(stderr=True), transient=True,
        )  # fmt: skip
        self._task = self._bar.add_task("reading", total=None, rows=0)
        self._rows = 0
        self._bar.start()

    def start(self, total_bytes: int) -> None:
        self._bar.update(self._task, total=total_bytes)

    def advance(self, nbytes: int, rows: int) -> None:
        self._rows += rows
        self._bar.update(self._task, advance=nbytes, rows=self._rows)

    def phase(self, name: str) -> None:
        self._bar.update(self._task, description=name)

    def stop(self) -> None:
        self._bar.stop()


def print_summary(summary: IngestionSummary, as_json: bool = False) -> None:
    if as_json:
        print(orjson.dumps(summary.to_json()).decode())
        return
    from rich.table import Table

    console = Console()
    s = summary
    console.print(
        f"[bold]{s.data_source}[/bold] version {s.version}: read {s.rows_read:,} rows,"
        f" ingested {s.rows_ingested:,} (rolled up {s.rows_rolled_up:,}),"
        f" thrown away {s.rows_thrown_away:,}, parse errors {s.parse_errors:,}"
        f" in {s.seconds:.2f}s"
    )
    for p in s.problems[:10]:
        console.print(f"  [yellow]parse error[/yellow] {p}", markup=True, highlight=False)
    table = Table(
        "segment interval", "partition", "rows", "size", title=f"{len(s.segments)} segments written"
    )
    for w in s.segments:
        table.add_row(
            str(w.segment.interval), str(w.segment.partition_num), f"{w.rows:,}", human_size(w.segment.size)
        )
    console.print(table)
