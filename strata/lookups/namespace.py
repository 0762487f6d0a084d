"""A lookup's key → value map, as its factory describes it: a `map` lookup's own map, or a
`cachedNamespace` lookup's file (an `uri`, or the newest file under `uriPrefix` whose name matches
`fileRegex`), parsed as its `namespaceParseSpec` says (`csv`, `tsv`, `simpleJson`, `customJson`).

Reading is bounded: a file past `max_bytes` is refused with an error naming the size and the flag,
so one oversized lookup fails to load (the node keeps serving, and its status says so) instead of
exhausting the node's memory. Only `file:` URIs are read (a data node reads local or mounted
files); other schemes are refused by name.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import orjson

DEFAULT_MAX_BYTES = 256 * 1024 * 1024


class LookupLoadError(RuntimeError):
    """A lookup whose values cannot be loaded; the node keeps its previous version, if any."""


def load_map(factory: Mapping[str, Any], max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, str]:
    if factory["type"] == "map":
        return dict(factory["map"])
    ns = factory["extractionNamespace"]
    path = namespace_file(ns)
    size = path.stat().st_size
    if size > max_bytes:
        raise LookupLoadError(
            f"lookup file {path} has {size} bytes, over the limit of {max_bytes} (--lookup-max-bytes)"
        )
    text = path.read_bytes().decode("utf-8", errors="replace")
    return parse_lines(ns["namespaceParseSpec"], text)


def _local_path(uri: str) -> Path:
    parsed = urlparse(uri)
    if parsed.scheme not in ("file", ""):
        raise LookupLoadError(f"cannot read lookup URI [{uri}]: only file: URIs are read")
    return Path(unquote(parsed.path))


def namespace_file(ns: Mapping[str, Any]) -> Path:
    """The file to read: `uri`, or the most recently modified match of `fileRegex` under `uriPrefix`."""
    if ns.get("uri") is not None:
        path = _local_path(ns["uri"])
        if not path.is_file():
            raise LookupLoadError(f"lookup file {path} does not exist")
        return path
    folder = _local_path(ns["uriPrefix"])
    pattern = re.compile(ns.get("fileRegex") or ".*")
    try:
        found = [p for p in folder.iterdir() if p.is_file() and pattern.fullmatch(p.name)]
    except OSError as e:
        raise LookupLoadError(f"cannot list lookup folder {folder}: {e.strerror}") from None
    if not found:
        raise LookupLoadError(f"no file under {folder} matches [{pattern.pattern}]")
    return max(found, key=lambda p: (p.stat().st_mtime_ns, p.name))


def parse_lines(spec: Mapping[str, Any], text: str) -> dict[str, str]:
    kind = spec["format"]
    if kind in ("csv", "tsv"):
        return _delimited(spec, text, "," if kind == "csv" else spec.get("delimiter") or "\t")
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise LookupLoadError(f"line {number} is not a JSON object: {line[:80]!r}") from None
        if not isinstance(row, dict):
            raise LookupLoadError(f"line {number} is not a JSON object: {line[:80]!r}")
        if kind == "simpleJson":
            out.update((str(k), _text(v)) for k, v in row.items() if v is not None)
        else:
            key, value = row.get(spec["keyFieldName"]), row.get(spec["valueFieldName"])
            if key is not None and value is not None:
                out[_text(key)] = _text(value)
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _delimited(spec: Mapping[str, Any], text: str, delimiter: str) -> dict[str, str]:
    rows: Iterator[list[str]]
    if len(delimiter) == 1:
        rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    else:
        rows = (line.split(delimiter) for line in text.splitlines())
    columns = spec.get("columns")
    skip = int(spec.get("skipHeaderRows") or 0)
    for _ in range(skip):
        next(rows, None)
    if spec.get("hasHeaderRow"):
        header = next(rows, None)
        columns = columns or header
    if not columns:
        raise LookupLoadError("the lookup file has no header row to name its columns")
    key_col = columns.index(spec.get("keyColumn") or columns[0])
    value_col = columns.index(spec.get("valueColumn") or columns[1])
    out: dict[str, str] = {}
    for row in rows:
        if len(row) > max(key_col, value_col) and row[key_col] != "":
            out[row[key_col]] = row[value_col]
    return out
