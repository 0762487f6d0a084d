"""How `strata sql` prints a result: a boxed table for people, csv/tsv/json/jsonl for programs.

The machine formats stream row by row and read back with the standard tools (`csv.reader`,
`json.loads` per line); null is an empty field in csv/tsv, as in Druid's own csv. The table keeps
at most `max_rows` rows in memory and fits the terminal, cutting long values with an ellipsis.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

import orjson
from rich import box
from rich.console import Console
from rich.table import Table

FORMATS = ("table", "csv", "tsv", "json", "jsonl")


def write_rows(
    out: TextIO,
    fmt: str,
    columns: list[str],
    rows: Iterable[list[Any]],
    *,
    header: bool = True,
    width: int | None = None,
    max_rows: int = 10_000,
) -> int:
    """Write every row in `fmt`; returns how many rows the result had."""
    if fmt == "table":
        return _table(out, columns, rows, header=header, width=width, max_rows=max_rows)
    if fmt in ("csv", "tsv"):
        return _delimited(out, columns, rows, header=header, delimiter="," if fmt == "csv" else "\t")
    if fmt == "json":
        return _json_array(out, columns, rows)
    if fmt == "jsonl":
        return _json_lines(out, columns, rows)
    raise ValueError(f"unknown format {fmt!r}; one of {', '.join(FORMATS)}")


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return orjson.dumps(value).decode()
    return str(value)


def _table(
    out: TextIO, columns: list[str], rows: Iterable[list[Any]], *, header: bool, width: int | None,
    max_rows: int,
) -> int:  # fmt: skip
    console = Console(file=out, width=width, highlight=False, emoji=False, markup=False)
    table = Table(box=box.SQUARE, show_header=header, header_style="bold", pad_edge=True)
    for name in columns:
        table.add_column(name, overflow="ellipsis", no_wrap=True)
    count = 0
    for row in rows:
        count += 1
        if count <= max_rows:
            table.add_row(*(_text(v) for v in row))
    if columns:
        console.print(table)
    if count > max_rows:
        console.print(f"(showing the first {max_rows:,} of {count:,} rows; use --format csv for all)")
    return count


def _delimited(out: TextIO, columns: list[str], rows: Iterable[list[Any]], *, header: bool,
               delimiter: str) -> int:  # fmt: skip
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    if header:
        writer.writerow(columns)
    count = 0
    for row in rows:
        writer.writerow(["" if v is None else _text(v) for v in row])
        count += 1
    return count


def _objects(columns: list[str], rows: Iterable[list[Any]]) -> Iterator[bytes]:
    for row in rows:
        yield orjson.dumps(dict(zip(columns, row, strict=False)))


def _json_array(out: TextIO, columns: list[str], rows: Iterable[list[Any]]) -> int:
    count = 0
    out.write("[")
    for encoded in _objects(columns, rows):
        out.write(("," if count else "") + encoded.decode())
        count += 1
    out.write("]\n")
    return count


def _json_lines(out: TextIO, columns: list[str], rows: Iterable[list[Any]]) -> int:
    count = 0
    for encoded in _objects(columns, rows):
        out.write(encoded.decode() + "\n")
        count += 1
    return count
