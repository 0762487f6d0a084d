"""Druid's table functions for external data: what `TABLE(fn(...)) [EXTEND (col TYPE, ...)]` reads.

- `EXTERN(inputSource, inputFormat[, signature])`: Druid's input source and format as JSON strings,
  the signature as a JSON array of `{"name", "type"}` (or an EXTEND clause instead: one of the two).
- `http(uris, userName, password | passwordEnvVar, headers, format, ...)`,
  `inline(data, format, ...)`, `localfiles(baseDir, filter, files, format, ...)` (also `local`) and
  `s3(uris | prefixes | bucket + paths, accessKeyId, secretAccessKey, format, ...)`: the input
  source by named arguments, the format by name (`csv`, `tsv`, `delimited` with `delimiter`,
  `json`, `parquet`; `skipHeaderRows`), the columns from EXTEND (a CSV's columns in that order).

The columns are typed as Druid types them: VARCHAR -> STRING, BIGINT -> LONG, DOUBLE, FLOAT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from strata.query.errors import invalid

Literal = str | int | float | bool | list[str] | None
FUNCTIONS = ("extern", "http", "inline", "localfiles", "local", "s3")
NATIVE_TYPES = ("STRING", "LONG", "FLOAT", "DOUBLE")
_SQL_TYPES = {
    "VARCHAR": "STRING", "CHAR": "STRING", "STRING": "STRING", "BIGINT": "LONG", "INTEGER": "LONG",
    "INT": "LONG", "SMALLINT": "LONG", "TINYINT": "LONG", "TIMESTAMP": "LONG", "BOOLEAN": "LONG",
    "DOUBLE": "DOUBLE", "DECIMAL": "DOUBLE", "FLOAT": "FLOAT", "REAL": "FLOAT",
}  # fmt: skip
_FORMAT_PARAMS = ("format", "skipHeaderRows", "listDelimiter", "delimiter", "findColumnsFromHeader")
_SOURCE_PARAMS = {
    "http": ("uris", "userName", "password", "passwordEnvVar", "headers"),
    "inline": ("data",),
    "localfiles": ("baseDir", "filter", "files"),
    "local": ("baseDir", "filter", "files"),
    "s3": ("uris", "prefixes", "bucket", "paths", "accessKeyId", "secretAccessKey"),
}


@dataclass(frozen=True)
class ExternalTable:
    """Rows an ingestion reads from outside Druid: an input source and format, and their columns."""

    function: str
    input_source: dict[str, Any]
    input_format: dict[str, Any]
    signature: tuple[tuple[str, str], ...]  # (column, STRING | LONG | FLOAT | DOUBLE)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "external",
            "inputSource": self.input_source,
            "inputFormat": self.input_format,
            "signature": [{"name": n, "type": t} for n, t in self.signature],
        }


def external_table(
    function: str, args: Sequence[tuple[str | None, Literal]], columns: list[tuple[str, str]] | None
) -> ExternalTable:
    extend = None if columns is None else tuple((name, sql_column_type(name, kind)) for name, kind in columns)
    if function == "extern":
        return _extern(args, extend)
    named = _named(function, args, (*_SOURCE_PARAMS[function], *_FORMAT_PARAMS))
    if extend is None:
        raise invalid(
            "Table function [%s] needs an EXTEND clause naming its columns and their types", function
        )
    source = _source(function, named)
    return ExternalTable(function, source, _format(function, named, extend), extend)


def _named(
    function: str, args: Sequence[tuple[str | None, Literal]], allowed: Sequence[str]
) -> dict[str, Literal]:
    out: dict[str, Literal] = {}
    for name, value in args:
        if name is None:
            raise invalid("Table function [%s] takes its arguments by name (name => value)", function)
        if name not in allowed:
            raise invalid(
                "Table function [%s] has no parameter [%s] (%s)", function, name, ", ".join(allowed)
            )
        out[name] = value
    return out


def _json(value: Literal, field: str) -> Any:
    if not isinstance(value, str):
        raise invalid("Invalid value for the field [%s]. Reason: expected a JSON string", field)
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError as e:
        raise invalid("Invalid value for the field [%s]. Reason: %s", field, e) from None


def _extern(
    args: Sequence[tuple[str | None, Literal]], extend: tuple[tuple[str, str], ...] | None
) -> ExternalTable:
    names = ("inputSource", "inputFormat", "signature")
    given: dict[str, Literal] = {}
    for i, (name, value) in enumerate(args):
        key = name if name is not None else names[i] if i < len(names) else "?"
        if key not in names:
            raise invalid("EXTERN takes inputSource, inputFormat and signature, got [%s]", key)
        given[key] = value
    for key in ("inputSource", "inputFormat"):
        if given.get(key) is None:
            raise invalid("EXTERN requires a [%s] value", key)
    source, fmt = _json(given["inputSource"], "inputSource"), _json(given["inputFormat"], "inputFormat")
    if not isinstance(source, dict) or not isinstance(source.get("type"), str):
        raise invalid(
            "Invalid value for the field [inputSource]. Reason: an input source is an object with a type"
        )
    if not isinstance(fmt, dict) or not isinstance(fmt.get("type"), str):
        raise invalid(
            "Invalid value for the field [inputFormat]. Reason: an input format is an object with a type"
        )
    signature = given.get("signature")
    if signature is not None and extend is not None:
        raise invalid("EXTERN requires either a [signature] value or an EXTEND clause, but not both")
    if signature is None and extend is None:
        raise invalid("EXTERN requires either a [signature] value or an EXTEND clause")
    columns = extend if extend is not None else _signature(_json(signature, "signature"))
    return ExternalTable("extern", source, fmt, columns)


def _signature(doc: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(doc, list):
        raise invalid("Invalid value for the field [signature]. Reason: expected a JSON array of columns")
    out = []
    for column in doc:
        name = column.get("name") if isinstance(column, dict) else None
        if not isinstance(name, str) or not name:
            raise invalid(
                "Cannot construct instance of `org.apache.druid.segment.column.ColumnSignature`, problem: "
                "Column name must be provided and non-empty"
            )
        kind = str(column.get("type") or "STRING").upper()
        if kind not in NATIVE_TYPES:
            raise invalid(
                "Column [%s] of type [%s] is not supported in EXTERN yet (%s)",
                name,
                kind,
                ", ".join(NATIVE_TYPES),
            )
        out.append((name, kind))
    return _unique(tuple(out))


def sql_column_type(name: str, sql_type: str) -> str:
    """An EXTEND column's SQL type as the native type Druid reads it as (NOT NULL is ignored)."""
    words = sql_type.upper().replace("NOT NULL", "").split()
    if len(words) == 1 and words[0] in _SQL_TYPES:
        return _SQL_TYPES[words[0]]
    raise invalid(
        "Column [%s] of type [%s] is not supported in EXTEND yet (VARCHAR, BIGINT, DOUBLE, FLOAT)",
        name,
        sql_type,
    )


def _unique(columns: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    names = [n for n, _ in columns]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise invalid("Duplicate column [%s] in the external table's signature", dupes[0])
    return columns


def _strings(value: Literal, function: str, param: str) -> list[str]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    raise invalid(
        "Parameter [%s] of table function [%s] takes an ARRAY of strings or a string", param, function
    )


def _source(function: str, args: dict[str, Literal]) -> dict[str, Any]:
    if function == "inline":
        data = args.get("data")
        if data is None:
            raise invalid("Table function [inline] needs [data]")
        return {
            "type": "inline",
            "data": "".join(f"{line}\n" for line in data) if isinstance(data, list) else str(data),
        }
    if function in ("localfiles", "local"):
        source: dict[str, Any] = {"type": "local"}
        if args.get("files") is not None:
            source["files"] = _strings(args["files"], function, "files")
        for key in ("baseDir", "filter"):
            if args.get(key) is not None:
                source[key] = str(args[key])
        return source
    if function == "http":
        source = {"type": "http", "uris": _strings(args.get("uris"), function, "uris")}
        if args.get("userName") is not None:
            source["httpAuthenticationUsername"] = str(args["userName"])
        if args.get("password") is not None:
            source["httpAuthenticationPassword"] = {"type": "default", "password": str(args["password"])}
        elif args.get("passwordEnvVar") is not None:
            source["httpAuthenticationPassword"] = {
                "type": "environment",
                "variable": str(args["passwordEnvVar"]),
            }
        if args.get("headers") is not None:
            source["requestHeaders"] = _json(args["headers"], "headers")
        return source
    source = {"type": "s3"}
    for key in ("uris", "prefixes"):
        if args.get(key) is not None:
            source[key] = _strings(args[key], function, key)
    if args.get("paths") is not None:
        if not isinstance(args.get("bucket"), str):
            raise invalid("Table function [s3] needs [bucket] with [paths]")
        source["objects"] = [
            {"bucket": args["bucket"], "path": p} for p in _strings(args["paths"], function, "paths")
        ]
    keys = {k: str(args[k]) for k in ("accessKeyId", "secretAccessKey") if args.get(k) is not None}
    if keys:
        source["properties"] = keys
    return source


def _format(function: str, args: dict[str, Literal], columns: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    kind = str(args.get("format") or "").lower()
    names = [n for n, _ in columns]
    skip = args.get("skipHeaderRows")
    flat: dict[str, Any] = {"columns": names, "findColumnsFromHeader": False,
                            "skipHeaderRows": int(skip) if isinstance(skip, (int, float)) else 0}  # fmt: skip
    if kind == "csv":
        return {"type": "csv", **flat}
    if kind in ("tsv", "delimited"):
        delimiter = args.get("delimiter")
        return {"type": "tsv", **flat, **({"delimiter": str(delimiter)} if delimiter is not None else {})}
    if kind in ("json", "parquet"):
        return {"type": kind}
    raise invalid("Table function [%s] needs [format]: csv, tsv, delimited, json or parquet", function)
