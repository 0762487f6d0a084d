"""Compare a SQL API answer with a quidem expected table, as Druid's quidem output prints values.

Printing is normalised, not the values: NULL and '' both print as an empty cell; numbers compare
as numbers (`3` = `3.0`, a FLOAT's `0.10000000149011612` = `0.1`, to 6 significant digits);
timestamps compare as instants whatever their spelling (`2015-09-12T00:00:00.000Z`,
`2015-09-12 00:00:00.000`, `2015-09-12 00:00:00`, and a DATE `2015-09-12` for midnight; inside an
array as the epoch milliseconds the SQL API answers for a TIMESTAMP ARRAY's elements); booleans
as `true`/`false`; arrays, multi-value strings and nested values by their elements, however they
are spelled: quidem prints an ARRAY as Java does (`[S1, 1, null]`), a multi-value string and a
nested value as JSON (`["a","b"]`), the SQL API answers JSON. Row order matters only when the
statement's outermost query has an ORDER BY, and then only between rows whose ORDER BY keys differ.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tests.sql_corpus.quidem import Table

_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[ T](\d{2}:\d{2}:\d{2})(\.\d+)?(?:Z|\+00:00)?)?$")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*([eE][-+]?\d+)?|\.\d+|NaN|Infinity)$")


def _canonical_text(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] + text[-1] in ("[]", "{}"):
        return _canonical_nested(text)
    ts = _TIMESTAMP.match(text)
    if ts:
        date, clock, frac = ts.groups()
        millis = (frac or "").rstrip("0").rstrip(".")
        if (clock is None or clock == "00:00:00") and not millis:
            return date
        return f"{date} {clock}{millis}"
    if _NUMBER.match(text):
        return _canonical_number(float(text))
    return text


def _canonical_nested(text: str) -> str:
    """An array or object printed as JSON or as Java prints a list: its elements, canonical."""
    try:
        return _rendered(json.loads(text))
    except ValueError:
        pass
    if text[0] != "[":
        return text
    return _rendered([_java_element(e) for e in _java_elements(text[1:-1])])


def _java_elements(body: str) -> list[str]:
    """The top-level elements of a Java list's text (`a, [b, c], d`)."""
    out, depth, current = [], 0, ""
    for i, ch in enumerate(body):
        depth += ch in "[{"
        depth -= ch in "]}"
        if ch == "," and depth == 0 and body[i + 1 : i + 2] == " ":
            out.append(current)
            current = ""
            continue
        current += ch
    if current or out:
        out.append(current)
    return [e.strip() if e.strip() else e for e in out]


def _java_element(text: str) -> Any:
    if text == "null":
        return None
    if len(text) >= 2 and text[0] + text[-1] in ("[]", "{}"):
        try:
            return json.loads(text)
        except ValueError:
            return [_java_element(e) for e in _java_elements(text[1:-1])] if text[0] == "[" else text
    return text


def _rendered(value: Any) -> str:
    """One spelling of a value inside an array or object: strings bare, numbers canonical."""
    if isinstance(value, list):
        return "[" + ", ".join(_rendered(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_rendered(v)}" for k, v in sorted(value.items())) + "}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _canonical_number(float(value))
    text = str(value).strip()
    if _NUMBER.match(text):
        return _canonical_number(float(text))
    instant = _TIMESTAMP.match(text)
    if instant and instant.group(2):  # an element with a time of day: its epoch milliseconds
        return _canonical_number(_epoch_millis(*instant.groups()))
    return text


def _epoch_millis(date: str, clock: str, fraction: str | None) -> float:
    """quidem prints a TIMESTAMP ARRAY's elements as datetimes where the SQL API, Druid's as
    Strata's, answers the epoch milliseconds they hold (Druid's SqlRowTransformer turns only
    TIMESTAMP and DATE columns into text, and passes arrays on as they are; the `.msq` files
    print the same statements' elements as those milliseconds)."""
    moment = datetime.datetime.fromisoformat(f"{date}T{clock}").replace(tzinfo=datetime.UTC)
    return round(moment.timestamp() * 1000) + round(float(fraction or "0") * 1000)


def _canonical_number(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == int(x) and abs(x) < 2**53:
        return str(int(x))
    return format(x, ".6g")


def _printed(value: Any) -> str:
    """A JSON value from the SQL API as quidem's mysql format would print it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return _rendered(value)
    return str(value)


def canonical_actual(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _canonical_number(float(value))
    if isinstance(value, (list, dict)):
        return _rendered(value)
    return _canonical_text(_printed(value))


def canonical_expected(cell: str) -> str:
    return _canonical_text(cell)


Row = tuple[str, ...]


def _strip_quoted(sql: str) -> str:
    """The statement with string literals, quoted identifiers and comments blanked (same length)."""
    out = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":
            j = i + 1
            while j < n:
                if sql[j] == ch and j + 1 < n and sql[j + 1] == ch:
                    j += 2  # a doubled quote inside the literal
                elif sql[j] == ch:
                    break
                else:
                    j += 1
            out.append(ch + " " * (min(j, n) - i - 1) + (ch if j < n else ""))
            i = j + 1
            continue
        if sql.startswith("--", i):
            j = sql.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def outer_order_by(sql: str) -> list[str] | None:
    """The outermost query's ORDER BY items (raw text), or None when it has none."""
    blank = _strip_quoted(sql)
    depth = 0
    start = None
    for m in re.finditer(r"[()]|\border\s+by\b", blank, re.IGNORECASE):
        tok = m.group(0)
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0:
            start = m.end()
    if start is None:
        return None
    tail_blank = blank[start:]
    end = re.search(r"\b(limit|offset|fetch)\b", tail_blank, re.IGNORECASE)
    tail = sql[start : start + (end.start() if end else len(tail_blank))]
    items, depth, cur = [], 0, ""
    for ch in tail:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
        else:
            cur += ch
    items.append(cur.strip())
    return [i for i in items if i]


def _order_key_columns(items: list[str], columns: Sequence[str]) -> list[int] | None:
    """Output column positions of the ORDER BY items, or None when one is not a plain reference."""
    out = []
    for item in items:
        ref = re.sub(r"\s+(asc|desc)?\s*(nulls\s+(first|last))?\s*$", "", item, flags=re.IGNORECASE).strip()
        if ref.isdigit():
            out.append(int(ref) - 1)
            continue
        name = ref.split(".")[-1].strip('"')
        if name in columns:
            out.append(list(columns).index(name))
            continue
        return None
    return out


def compare(sql: str, expected: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str | None:
    """None when the answer matches, else a one-line description of the first difference."""
    if tuple(columns) != expected.columns:
        return f"column names: got {list(columns)}, want {list(expected.columns)}"
    got: list[Row] = [tuple(canonical_actual(v) for v in r) for r in rows]
    want: list[Row] = [tuple(canonical_expected(c) for c in r) for r in expected.rows]
    if len(got) != len(want):
        return f"row count: got {len(got)}, want {len(want)}"
    if Counter(got) != Counter(want):
        missing = next(iter((Counter(want) - Counter(got)).elements()))
        extra = next(iter((Counter(got) - Counter(want)).elements()))
        return f"values: want row {list(missing)}, got row {list(extra)}"
    order = outer_order_by(sql)
    if order is None or got == want:
        return None
    keys = _order_key_columns(order, expected.columns)
    if (
        keys is not None
        and all(0 <= k < len(expected.columns) for k in keys)
        and [tuple(r[k] for k in keys) for r in got] == [tuple(r[k] for k in keys) for r in want]
    ):
        return None
    return "row order differs under ORDER BY"
