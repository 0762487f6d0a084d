"""What Druid stores for multi-value strings and `auto` columns, written from Druid's documentation
and its `StringDimensionIndexer` / `AutoTypeColumnIndexer` rules, apart from Strata's ingestion code:
the oracle the data-model tests check segments against."""

from __future__ import annotations

import json
from typing import Any

ROWS_KEY = "__rows"


def mv_string(value: Any) -> str | None:
    """One value of a multi-value row as Druid's string conversion spells it."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        text = repr(value)
        return text if "." in text or "e" in text else text + ".0"
    if isinstance(value, list):
        return "[" + ", ".join("null" if v is None else str(mv_string(v)) for v in value) + "]"
    return str(value)


def mv_row(value: Any, handling: str) -> list[str | None] | None:
    """A row of a multi-value string dimension: its values (None: no value)."""
    values = value if isinstance(value, list) else [value]
    strings = [mv_string(v) for v in values]
    if handling != "ARRAY":
        strings.sort(key=lambda s: (s is not None, s or ""))
    if handling == "SORTED_SET":
        strings = [s for i, s in enumerate(strings) if i == 0 or s != strings[i - 1]]
    if not strings or strings == [None]:
        return None
    return strings


def mv_column(values: list[Any], handling: str) -> list[Any]:
    """A segment's stored column: lists when some row has two or more values, else plain strings."""
    rows = [mv_row(v, handling) for v in values]
    if any(r is not None and len(r) > 1 for r in rows):
        return rows
    return [None if r is None else r[0] for r in rows]


def _literal_kind(v: Any) -> str:
    if isinstance(v, (bool, int)):
        return "LONG"
    return "DOUBLE" if isinstance(v, float) else "STRING"


def _least(kinds: set[str]) -> str:
    if kinds <= {"LONG"}:
        return "LONG"
    return "DOUBLE" if kinds <= {"LONG", "DOUBLE"} else "STRING"


def auto_type(values: list[Any]) -> str:
    """Druid's type of an `auto` column holding `values` in one segment (schema-design docs:
    mixed numbers DOUBLE, any string STRING, arrays the least restrictive element type, nested
    data COMPLEX<json>; only nulls STRING; only empty or all-null arrays ARRAY<LONG>, Druid's
    FieldTypeInfo.MutableTypeSet.addUntypedArray / getSingleType)."""
    present = [v for v in values if v is not None]
    if any(isinstance(v, dict) or (isinstance(v, list) and any(isinstance(e, (list, dict)) for e in v))
           for v in present):  # fmt: skip
        return "COMPLEX<json>"
    if any(isinstance(v, list) for v in present):
        elements = [e for v in present for e in (v if isinstance(v, list) else [v])]
        kinds = {_literal_kind(e) for e in elements if e is not None}
        if not kinds:
            return "ARRAY<LONG>"
        return f"ARRAY<{_least(kinds)}>"
    return _least({_literal_kind(v) for v in present}) if present else "STRING"


def _as(kind: str, v: Any) -> Any:
    if v is None:
        return None
    if kind == "LONG":
        return int(v)
    if kind == "DOUBLE":
        return float(v)
    if isinstance(v, bool):
        return str(v).lower()
    return v if isinstance(v, str) else json.dumps(v)


def auto_value(kind: str, v: Any) -> Any:
    """`v` as stored in an `auto` column of type `kind`."""
    if v is None:
        return None
    if kind == "COMPLEX<json>":
        return json.dumps(v, separators=(",", ":"))
    if kind.startswith("ARRAY<"):
        element = kind[len("ARRAY<") : -1]
        return [_as(element, e) for e in (v if isinstance(v, list) else [v])]
    return _as(kind, v)
