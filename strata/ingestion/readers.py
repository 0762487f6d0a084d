"""Input sources and formats -> blocks of raw rows (Arrow tables) with line numbers for errors.

Fast path: each block of lines is parsed in one vectorised call (pyarrow.json / pyarrow.csv).
Only a block that call rejects is parsed line by line, so bad lines cost time in their own block
and are reported with their line numbers; good lines of that block are kept.
"""

from __future__ import annotations

import bz2
import csv
import fnmatch
import gzip
import io
import lzma
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json

from strata.ingestion.block import Block
from strata.ingestion.dimension_values import values_column
from strata.ingestion.errors import IngestionError, ParseProblem
from strata.ingestion.fetch import Fetched, InputStorage, fetch_druid, fetch_http, fetch_s3
from strata.ingestion.input_sources import (
    DruidInputSource,
    HttpInputSource,
    InlineInputSource,
    InputSource,
    LocalInputSource,
    S3InputSource,
    SegmentsInputSource,
)
from strata.ingestion.memory_pool import INGEST_POOL
from strata.ingestion.spec import InputFormat
from timeline import Interval

CHUNK_BYTES = 16 << 20
PARQUET_BATCH_ROWS = 1 << 20


@dataclass(frozen=True)
class InputFile:
    name: str
    path: Path | None = None
    data: bytes | None = None  # inline input
    keep: tuple[Interval, ...] | None = None  # a segment's file: only rows with `__time` in these

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else (self.path.stat().st_size if self.path else 0)


def resolve_inputs(source: InputSource, storage: InputStorage | None = None) -> list[InputFile]:
    """The files an input source names, in a stable order; fails when there are none. Remote
    sources are fetched into `storage.fetch_dir` first (`strata.ingestion.fetch`)."""
    if isinstance(source, InlineInputSource):
        return [InputFile("inline", data=source.data.encode())]
    if isinstance(source, SegmentsInputSource):
        missing = [f.path for f in source.files if not Path(f.path).is_file()]
        if missing:
            raise IngestionError(f"segment files not found: {', '.join(missing)}")
        return [InputFile(f.path, path=Path(f.path), keep=f.keep) for f in source.files]
    if isinstance(source, (HttpInputSource, S3InputSource, DruidInputSource)):
        storage = storage or InputStorage()
        fetched: list[Fetched]
        if isinstance(source, HttpInputSource):
            fetched = fetch_http(source, storage)
        elif isinstance(source, S3InputSource):
            fetched = fetch_s3(source, storage)
        else:
            fetched = fetch_druid(source, storage)
        return [InputFile(f.name, path=f.path, keep=None if f.clip is None else (f.clip,)) for f in fetched]
    assert isinstance(source, LocalInputSource)
    paths: list[Path] = [Path(f) for f in source.files]
    if source.base_dir:
        base = Path(source.base_dir)
        if not base.is_dir():
            raise IngestionError(f"inputSource.baseDir {str(base)!r} is not a directory")
        paths += matching_files(base, source.filter or "*")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise IngestionError(f"input files not found: {', '.join(missing)}")
    if not paths:
        raise IngestionError(f"no input files match {source.filter!r} under {source.base_dir!r}")
    return [InputFile(str(p), path=p) for p in paths]


def matching_files(base: Path, pattern: str) -> list[Path]:
    """The files under `base`, at any depth, whose name matches `pattern` (Druid's local input
    source walks `baseDir` recursively). A directory that disappears during the walk is passed
    over, as one that cannot be read always was: the tree may be shared with running processes
    (a cluster's working directory, Spark's scratch space), and what vanished was no input."""

    def passed_over(error: OSError) -> None:
        if not isinstance(error, (FileNotFoundError, NotADirectoryError, PermissionError)):
            raise error

    found: list[Path] = []
    for top, dirs, files in os.walk(base, onerror=passed_over):
        dirs.sort()
        found += [Path(top, name) for name in fnmatch.filter(files, pattern)]
    return sorted(p for p in found if p.is_file())


# -- byte streams -----------------------------------------------------------------------------------
class _Counting(io.RawIOBase):
    """Counts bytes read from the underlying (compressed) file, for progress."""

    def __init__(self, raw: IO[bytes]):
        self.raw, self.count = raw, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self.raw.readinto(b)  # type: ignore[attr-defined]
        self.count += n or 0
        return n or 0


def _line_chunks(
    f: InputFile, byte_range: tuple[int, int] | None = None
) -> Iterator[tuple[bytes, int, int, int]]:
    """(chunk of whole lines, line number of its first line, input bytes consumed, newlines in
    it) per chunk.

    `byte_range` (of an uncompressed file, cut after a newline) reads only `[start, end)`; its
    first line is then line 1.
    """
    if f.data is not None:
        yield f.data, 1, len(f.data), f.data.count(b"\n")
        return
    assert f.path is not None
    with open(f.path, "rb") as raw:
        remaining: int | None = None
        if byte_range is not None:
            raw.seek(byte_range[0])
            remaining = byte_range[1] - byte_range[0]
        counting = _Counting(raw)
        name = f.path.name.lower()
        buffered = io.BufferedReader(counting)
        # the decompressors wrap `raw`, which the `with` closes
        stream: Any = buffered
        if name.endswith(".gz"):
            stream = gzip.GzipFile(fileobj=buffered)
        elif name.endswith(".bz2"):
            stream = bz2.BZ2File(buffered)
        elif name.endswith(".xz"):
            stream = lzma.LZMAFile(buffered)  # noqa: SIM115
        line, tail, reported = 1, b"", 0
        while True:
            want = CHUNK_BYTES if remaining is None else min(CHUNK_BYTES, remaining)
            data = stream.read(want) if want else b""
            if not data:
                break
            if remaining is not None:
                remaining -= len(data)
            data = tail + data
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                tail = data
                continue
            chunk, tail = data[:cut], data[cut:]
            newlines = chunk.count(b"\n")
            yield chunk, line, counting.count - reported, newlines
            reported = counting.count
            line += newlines
        if tail:
            yield tail, line, counting.count - reported, tail.count(b"\n")


def _nonblank_lines(data: bytes, first_line: int) -> np.ndarray:
    """Line numbers of the lines that hold more than whitespace (parsers skip blank lines)."""
    starts = [0]
    pos = data.find(b"\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = data.find(b"\n", pos + 1)
    keep = [
        i
        for i in range(len(starts))
        if data[starts[i] : (starts[i + 1] if i + 1 < len(starts) else len(data))].strip()
    ]
    return np.asarray(keep, dtype=np.int64) + first_line


_BLANK_AFTER_NEWLINE = np.zeros(256, dtype=bool)
_BLANK_AFTER_NEWLINE[[ord("\n"), ord(" "), ord("\t")]] = True


def _has_blank_lines(data: bytes) -> bool:
    """Whether a line is empty or starts with whitespace ("\n\n", "\n\r\n", "\n ", "\n\t"), in one pass."""
    if data[:1] in (b"\n", b"\r", b" ", b"\t"):
        return True
    raw = np.frombuffer(data, dtype=np.uint8)
    after = np.flatnonzero(raw[:-1] == ord("\n")) + 1
    first = raw[after]
    if _BLANK_AFTER_NEWLINE[first].any():
        return True
    crlf = after[first == ord("\r")] + 1
    return bool((raw[crlf[crlf < raw.size]] == ord("\n")).any())


# -- JSON -----------------------------------------------------------------------------------------
def table_from_rows(rows: list[dict[str, Any]]) -> pa.Table:
    """Parsed rows -> a table: a column of scalars of one type (or lists of them) typed, any other
    (mixed types, objects) as JSON text, so nothing of a value is lost (`values_column`)."""
    names: dict[str, None] = {}
    for r in rows:
        names.update(dict.fromkeys(r))
    columns = {name: values_column([r.get(name) for r in rows]) for name in names}
    return pa.table(columns) if columns else pa.table({"__empty": pa.nulls(len(rows))}).drop(["__empty"])


def _unified_by_reader(f: pa.Field, exact: frozenset[str] | None) -> bool:
    """Arrow's JSON reader turns objects into structs, dropping which keys a row lacked, and
    unifies numbers across rows (`1` beside `2.5` becomes `1.0`): such columns are read again
    value by value, the numbers only where they type an `auto` / `json` dimension (`exact`)."""
    t = f.type
    element = t.value_type if pa.types.is_list(t) or pa.types.is_large_list(t) else t
    if pa.types.is_struct(t) or pa.types.is_nested(element):
        return True
    return (exact is None or f.name in exact) and bool(pa.types.is_floating(element))


def _objects_as_json(table: pa.Table, data: bytes, exact: frozenset[str] | None = frozenset()) -> pa.Table:
    """`table` with the columns Arrow's reader changed replaced by each line's own values."""
    nested = [f.name for f in table.schema if _unified_by_reader(f, exact)]
    if not nested:
        return table
    rows = [orjson.loads(line) for line in data.split(b"\n") if line.strip()]
    for name in nested:
        column = values_column([r.get(name) for r in rows])
        table = table.set_column(table.column_names.index(name), name, column)
    return table


def read_json_block(
    data: bytes, source: str, first_line: int, *, use_threads: bool = True,
    exact: frozenset[str] | None = frozenset(), text_fields: tuple[str, ...] = (),
) -> Block:  # fmt: skip
    """`use_threads=False` for small blocks (a pushed batch): Arrow's threads cost ~9 ms to start.
    `exact`: see `InputFormat.exact_columns`. `text_fields` are read as strings (a value of another
    JSON type sends the block to the line-by-line reader, which keeps it as its text)."""
    try:
        options = pa_json.ReadOptions(block_size=4 << 20, use_threads=use_threads)
        parse = pa_json.ParseOptions(
            explicit_schema=pa.schema([(f, pa.string()) for f in text_fields]) if text_fields else None,
            unexpected_field_behavior="infer",
        )
        table = pa_json.read_json(
            io.BytesIO(data), read_options=options, parse_options=parse, memory_pool=INGEST_POOL
        )
        lines = _nonblank_lines(data, first_line) if _has_blank_lines(data) else None
        if lines is not None and len(lines) != table.num_rows:
            raise pa.ArrowInvalid("line count mismatch")
        for column in (c for c in table.columns if pa.types.is_list(c.type)):  # a list starting with null
            column.validate(full=True)  # can come out a value short (apache/arrow#51305): read line by line
        return Block(_objects_as_json(table, data, exact), source, first_line, lines)
    except pa.ArrowInvalid:
        pass
    rows: list[dict[str, Any]] = []
    lines_kept: list[int] = []
    problems: list[ParseProblem] = []
    for i, line in enumerate(data.split(b"\n")):
        if not line.strip():
            continue
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            problems.append(ParseProblem(source, first_line + i, f"malformed JSON: {e}"))
            continue
        if not isinstance(obj, dict):
            problems.append(ParseProblem(source, first_line + i, "line is not a JSON object"))
            continue
        rows.append(obj)
        lines_kept.append(first_line + i)
    return Block(table_from_rows(rows), source, first_line, np.asarray(lines_kept, np.int64), problems)


# -- CSV / TSV ------------------------------------------------------------------------------------
def read_delimited_block(
    data: bytes, source: str, first_line: int, fmt: InputFormat, names: list[str]
) -> Block:
    invalid: list[tuple[int, str]] = []

    def on_invalid(row: Any) -> str:
        invalid.append((row.number, row.text))
        return "skip"

    parse = pa_csv.ParseOptions(
        delimiter=fmt.delimiter,
        quote_char='"' if fmt.type == "csv" else False,
        invalid_row_handler=on_invalid,
    )
    convert = pa_csv.ConvertOptions(
        column_types={n: pa.string() for n in names}, null_values=[""], strings_can_be_null=True
    )
    read = pa_csv.ReadOptions(column_names=names, use_threads=False, block_size=max(1 << 20, len(data) + 1))
    try:
        table = pa_csv.read_csv(
            io.BytesIO(data),
            read_options=read,
            parse_options=parse,
            convert_options=convert,
            memory_pool=INGEST_POOL,
        )
    except pa.ArrowInvalid as e:
        raise IngestionError(f"{source}: cannot read as {fmt.type}: {e}") from None
    problems: list[ParseProblem] = []
    lines: np.ndarray | None = None
    if invalid or _has_blank_lines(data):
        nonblank = _nonblank_lines(data, first_line)
        bad = np.asarray([n - 1 for n, _ in invalid], dtype=np.int64)
        for (_, text), idx in zip(invalid, bad, strict=True):
            problems.append(ParseProblem(
                source, int(nonblank[idx]), f"expected {len(names)} columns, got: {text[:200]!r}"
            ))  # fmt: skip
        lines = np.delete(nonblank, bad)
    return Block(_split_lists(table, fmt.list_delimiter), source, first_line, lines, problems)


def _split_lists(table: pa.Table, delimiter: str | None) -> pa.Table:
    """Columns where some value holds `listDelimiter` as lists of the values between them."""
    if not delimiter:
        return table
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        if pc.any(pc.match_substring(column, delimiter)).as_py():
            table = table.set_column(i, name, pc.split_pattern(column, delimiter))
    return table


def _header(f: InputFile, fmt: InputFormat) -> tuple[list[str], int]:
    """Column names and how many leading lines the header rows take."""
    skip = fmt.skip_header_rows
    if not fmt.find_columns_from_header:
        return list(fmt.columns), skip
    for chunk, _, _, _ in _line_chunks(f):
        lines = chunk.split(b"\n")
        if len(lines) > skip:
            header = lines[skip].decode("utf-8", "replace").rstrip("\r")
            if fmt.type == "csv":
                return next(csv.reader([header], delimiter=fmt.delimiter)), skip + 1
            return header.split(fmt.delimiter), skip + 1
        break
    raise IngestionError(f"{f.name}: no header line found")


def _skip_lines(chunk: bytes, n: int) -> bytes:
    for _ in range(n):
        cut = chunk.find(b"\n")
        chunk = b"" if cut == -1 else chunk[cut + 1 :]
    return chunk


# -- Parquet --------------------------------------------------------------------------------------
def _parquet_blocks(f: InputFile) -> Iterator[Block]:
    """Blocks of runs of whole row groups of about `PARQUET_BATCH_ROWS` rows, so memory holds one
    block, not the file. A row group larger than that is streamed in batches of that size.

    Reading runs of row groups decodes columns on every core and is faster than the whole file at
    once (10M rows, 2 cores: 0.74 s against 1.23 s), and than batches cut across row groups.
    """
    import pyarrow.parquet as pq

    if f.path is None:
        raise IngestionError("parquet input needs files, not inline data")
    try:
        pf = pq.ParquetFile(f.path)
        meta = pf.metadata
        size, total, row = f.size, max(meta.num_rows, 1), 0
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        for lo, hi in consecutive_runs(sizes, PARQUET_BATCH_ROWS):
            if hi - lo == 1 and meta.row_group(lo).num_rows > PARQUET_BATCH_ROWS:
                parts: Iterator[pa.Table] = (
                    pa.Table.from_batches([b])
                    for b in pf.iter_batches(PARQUET_BATCH_ROWS, row_groups=[lo], use_threads=True)
                )
            else:
                parts = iter([pf.read_row_groups(range(lo, hi), use_threads=True)])
            for part in parts:
                yield Block(
                    kept_rows(part, f.keep), f.name, row + 1, progress_bytes=size * part.num_rows // total
                )
                row += part.num_rows
    except (pa.ArrowInvalid, OSError) as e:
        raise IngestionError(f"{f.name}: not a readable Parquet file: {e}") from None


def kept_rows(table: pa.Table, keep: tuple[Interval, ...] | None) -> pa.Table:
    """A segment file's rows within the visible parts of its interval (all of them without `keep`)."""
    if keep is None or "__time" not in table.column_names:
        return table
    import pyarrow.compute as pc

    times = pc.cast(table.column("__time"), pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_numpy()
    mask = np.zeros(len(times), dtype=bool)
    for iv in keep:
        mask |= (times >= iv.start) & (times < iv.end)
    return table if mask.all() else table.filter(pa.array(mask))


def consecutive_runs(sizes: list[int], limit: int) -> Iterator[tuple[int, int]]:
    """`[first, end)` of each run of consecutive items (row groups, time chunks) whose sizes add up
    to at most `limit`; a larger item is a run of its own."""
    first, filled = 0, 0
    for g, n in enumerate(sizes):
        if filled and filled + n > limit:
            yield first, g
            first, filled = g, 0
        filled += n
    if first < len(sizes):
        yield first, len(sizes)


# -- all formats ----------------------------------------------------------------------------------
def read_blocks(f: InputFile, fmt: InputFormat, byte_range: tuple[int, int] | None = None) -> Iterator[Block]:
    """Blocks of a whole file, or of the lines in `byte_range` of an uncompressed text file."""
    if fmt.type == "parquet":
        yield from _parquet_blocks(f)
        return
    if fmt.type == "json":
        for chunk, line, consumed, newlines in _line_chunks(f, byte_range):
            block = read_json_block(chunk, f.name, line, exact=fmt.exact_columns, text_fields=fmt.text_fields)
            block.progress_bytes, block.end_line = consumed, line + newlines
            yield block
        return
    names, header_lines = _header(f, fmt)
    if not names:
        raise IngestionError(f"{f.name}: no column names for {fmt.type} input")
    if byte_range is not None and byte_range[0] > 0:
        header_lines = 0  # the header is at the file's start, in another split
    for chunk, line, consumed, newlines in _line_chunks(f, byte_range):
        end = line + newlines
        if line <= header_lines:
            skip = header_lines - line + 1
            chunk, line = _skip_lines(chunk, skip), line + skip
        block = read_delimited_block(chunk, f.name, line, fmt, names)
        block.progress_bytes, block.end_line = consumed, end
        yield block
