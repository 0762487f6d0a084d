"""Druid SQL result formats: object, array, objectLines, arrayLines, csv, with Druid's header rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import orjson

RESULT_FORMATS = ("object", "array", "objectLines", "arrayLines", "csv")


def encode_rows(
    rows: Sequence[Sequence[Any]],
    names: Sequence[str],
    types: Sequence[str],
    sql_types: Sequence[str],
    *,
    fmt: str = "object",
    header: bool = False,
    types_header: bool = False,
    sql_types_header: bool = False,
) -> tuple[bytes, str]:
    """The body and its content type, compact as Druid writes it (pydruid parses it as a stream)."""
    dumps = orjson.dumps
    if fmt in ("object", "objectLines"):
        head: list[bytes] = []
        if header:

            def describe(i: int) -> Any:
                meta = {
                    **({"type": types[i]} if types_header else {}),
                    **({"sqlType": sql_types[i]} if sql_types_header else {}),
                }
                return meta or None

            head.append(dumps({n: describe(i) for i, n in enumerate(names)}))
        body = head + [dumps(dict(zip(names, r, strict=True))) for r in rows]
        if fmt == "object":
            return b"[" + b",".join(body) + b"]", "application/json"
        return b"".join(line + b"\n" for line in body) + b"\n", "text/plain"
    if fmt in ("array", "arrayLines"):
        lines = (
            [list(names)] * header
            + [list(types)] * (header and types_header)
            + [list(sql_types)] * (header and sql_types_header)
        )
        body = [dumps(x) for x in lines] + [dumps(list(r)) for r in rows]
        if fmt == "array":
            return b"[" + b",".join(body) + b"]", "application/json"
        return b"".join(line + b"\n" for line in body) + b"\n", "text/plain"
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if header:
            writer.writerow(names)
            if types_header:
                writer.writerow(types)
            if sql_types_header:
                writer.writerow(sql_types)
        for r in rows:
            writer.writerow(["" if v is None else _text(v) for v in r])
        out.write("\n")
        return out.getvalue().encode(), "text/csv"
    raise ValueError(fmt)


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        return orjson.dumps(v).decode()
    return str(v)
