"""Druid's quidem test files (`.iq`) read into cases: a statement, its connection settings, and the
expected table or error.

The grammar as Druid's files use it: `!use <url>` and `!set <key> <value>` change the connection
(settings persist across `!use`); a statement is the text up to a line ending in `;`; the lines
after it, up to the next `!` command, are that command's expected output. `!ok` expects a table,
`!error` an error, both for the last statement read (a file may
put a statement's plans between it and its table); plan commands (`!plan`, `!nativePlan`, `!druidPlan`, `!logicalPlan`,
`!convertedPlan`, `!explain...`) compare plans, which this corpus does not do, so their blocks are
read and dropped. Lines starting with `#` are comments.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal


class QuidemFormatError(ValueError):
    """A file this parser cannot read as Druid's quidem files are written."""


@dataclass(frozen=True)
class Table:
    """An expected result as quidem's `mysql` output format prints it: every cell as text."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Case:
    file: str
    ordinal: int  # 1-based position among the file's `!ok` / `!error` statements
    line: int
    sql: str
    kind: Literal["ok", "error"]
    expected: Table | None
    error_text: str
    settings: Mapping[str, str] = field(default_factory=dict)
    use: str = ""

    @property
    def case_id(self) -> str:
        return f"{self.file}:{self.ordinal}"


def parse_table(lines: list[str]) -> Table:
    """Cells are cut at the `+` positions of the border line, so a `|` inside a value is kept."""
    body = [ln.rstrip("\n") for ln in lines if ln.strip()]
    borders = [i for i, ln in enumerate(body) if ln.startswith("+")]
    if len(borders) < 2:
        raise QuidemFormatError(f"no mysql-format table in {body[:3]!r}")
    border = body[borders[0]]
    cuts = [i for i, ch in enumerate(border) if ch == "+"]

    def cells(line: str) -> tuple[str, ...]:
        return tuple(line[a + 1 : b].strip() for a, b in itertools.pairwise(cuts))

    header = cells(body[borders[0] + 1])
    rows = tuple(cells(ln) for ln in body[borders[1] + 1 :] if ln.startswith("|"))
    return Table(header, rows)


def _split_statement(block: list[tuple[int, str]]) -> tuple[int, str, list[str]] | None:
    """(first line, statement without its `;`, output lines), or None when no statement ends here."""
    for i, (_, text) in enumerate(block):
        if text.rstrip().endswith(";"):
            sql_lines = [t for _, t in block[: i + 1]]
            sql = "\n".join(sql_lines).strip()
            sql = sql[: sql.rfind(";")].rstrip()
            first = next((n for n, t in block if t.strip()), block[0][0])
            return first, sql, [t for _, t in block[i + 1 :]]
    return None


def parse_cases(text: str, file: str) -> Iterator[Case]:
    settings: dict[str, str] = {}
    use = ""
    block: list[tuple[int, str]] = []
    ordinal = 0
    current: tuple[int, str] | None = None  # quidem checks output against the last statement read
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\n")
        if line.startswith("#"):
            continue
        if not line.startswith("!"):
            block.append((number, line))
            continue
        command, _, arg = line[1:].strip().partition(" ")
        arg = arg.strip()
        split = _split_statement(block)
        output = [t for _, t in block]
        if split is not None:
            first, sql, output = split
            current = (first, sql)
        if command in ("ok", "error") and current is not None:
            ordinal += 1
            expected = parse_table(output) if command == "ok" else None
            error_text = "" if command == "ok" else "\n".join(output).strip()
            kind: Literal["ok", "error"] = "ok" if command == "ok" else "error"
            yield Case(file, ordinal, current[0], current[1], kind, expected, error_text, dict(settings), use)
        elif command == "set":
            key, _, value = arg.partition(" ")
            settings[key] = value.strip()
        elif command == "use":
            use = arg
        block = []


def read_cases(path: Path) -> list[Case]:
    return list(parse_cases(path.read_text(encoding="utf-8"), path.name))
