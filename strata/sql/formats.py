"""Druid SQL result formats: object, array, objectLines, arrayLines, csv, with Druid's header rows.

`RowEncoder` writes a body piece by piece (opening, rows in any number of batches, closing), so a
large result streams with bounded memory; `encode_rows` is the whole body at once. As Druid's
default (`sqlStringifyArrays`), an ARRAY or multi-value value is answered as the JSON text of the
array; `stringify_arrays=False` answers JSON arrays.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import orjson

RESULT_FORMATS = ("object", "array", "objectLines", "arrayLines", "csv")
_MEDIA = {
    "object": "application/json",
    "array": "application/json",
    "objectLines": "text/plain",
    "arrayLines": "text/plain",
    "csv": "text/csv",
}


class RowEncoder:
    """One result body in Druid's compact form (pydruid parses it as a stream)."""

    def __init__(
        self,
        names: Sequence[str],
        types: Sequence[str],
        sql_types: Sequence[str],
        *,
        fmt: str = "object",
        header: bool = False,
        types_header: bool = False,
        sql_types_header: bool = False,
        stringify_arrays: bool = True,
    ) -> None:
        if fmt not in RESULT_FORMATS:
            raise ValueError(fmt)
        self._array_columns = [i for i, t in enumerate(types) if stringify_arrays and may_hold_arrays(t)]
        self.names, self.types, self.sql_types = list(names), list(types), list(sql_types)
        self.fmt = fmt
        self.header, self.types_header, self.sql_types_header = header, types_header, sql_types_header
        self.media_type = _MEDIA[fmt]
        self._first = True

    def start(self) -> bytes:
        head = self._header_lines()
        if self.fmt in ("object", "array"):
            self._first = not head
            return b"[" + b",".join(head)
        if self.fmt == "csv":
            return b"".join(head)
        return b"".join(line + b"\n" for line in head)

    def rows(self, rows: Sequence[Sequence[Any]]) -> bytes:
        if not rows:
            return b""
        if self._array_columns:
            rows = [_stringified(r, self._array_columns) for r in rows]
        if self.fmt == "csv":
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            for r in rows:
                writer.writerow([csv_text(v) for v in r])
            return out.getvalue().encode()
        try:
            encoded = self._encoded(rows)
        except TypeError:  # an integer past 64 bits (DuckDB's HUGEINT): a DOUBLE, as Druid's DECIMALs are
            encoded = self._encoded([[_json_number(v) for v in r] for r in rows])
        if self.fmt in ("objectLines", "arrayLines"):
            return b"".join(line + b"\n" for line in encoded)
        body = b",".join(encoded)
        if self._first:
            self._first = False
            return body
        return b"," + body

    def _encoded(self, rows: Sequence[Sequence[Any]]) -> list[bytes]:
        dumps = orjson.dumps
        if self.fmt in ("object", "objectLines"):
            names = self.names
            return [dumps(dict(zip(names, r, strict=True))) for r in rows]
        return [dumps(list(r)) for r in rows]

    def end(self) -> bytes:
        return b"]" if self.fmt in ("object", "array") else b"\n"

    def _header_lines(self) -> list[bytes]:
        if not self.header:
            return []
        dumps = orjson.dumps
        if self.fmt in ("object", "objectLines"):

            def describe(i: int) -> Any:
                meta = {
                    **({"type": self.types[i]} if self.types_header else {}),
                    **({"sqlType": self.sql_types[i]} if self.sql_types_header else {}),
                }
                return meta or None

            return [dumps({n: describe(i) for i, n in enumerate(self.names)})]
        lines = [self.names]
        if self.types_header:
            lines.append(self.types)
        if self.sql_types_header:
            lines.append(self.sql_types)
        if self.fmt == "csv":
            out = io.StringIO()
            csv.writer(out, lineterminator="\n").writerows(lines)
            return [out.getvalue().encode()]
        return [dumps(x) for x in lines]


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
    stringify_arrays: bool = True,
) -> tuple[bytes, str]:
    """The whole body and its content type."""
    enc = RowEncoder(
        names,
        types,
        sql_types,
        fmt=fmt,
        header=header,
        types_header=types_header,
        sql_types_header=sql_types_header,
        stringify_arrays=stringify_arrays,
    )
    return enc.start() + enc.rows(rows) + enc.end(), enc.media_type


def _stringified(row: Sequence[Any], columns: list[int]) -> Sequence[Any]:
    if not any(type(row[i]) is list for i in columns):
        return row
    out = list(row)
    for i in columns:
        if type(out[i]) is list:
            out[i] = orjson.dumps(out[i]).decode()
    return out


def may_hold_arrays(druid_type: str) -> bool:
    """Whether a column of this type may hold arrays (ARRAY ones; a multi-value string's rows)."""
    return druid_type.startswith("ARRAY<") or druid_type == "STRING"


def csv_text(v: Any) -> str:
    """A value's CSV field before quoting (a null: empty)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, dict)):
        return orjson.dumps(v).decode()
    return str(v)


def _json_number(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        return float(value)
    return value
