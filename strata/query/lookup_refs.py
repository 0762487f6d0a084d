"""Which lookups a query reads, and the table name a loaded lookup has on a DuckDB connection.

A query names a lookup in a `registeredLookup` extraction function, a `lookup(expr, 'name')`
expression, or a `lookup` dataSource. The broker adds each named lookup's fingerprint to the
query's per-segment and result cache keys, and a data node registers exactly those tables; both
find the names here, from the query's JSON, so every place a lookup can hide is covered at once.
"""

from __future__ import annotations

import re
from typing import Any

from strata.query.duck import quote_ident, quote_str

TABLE_PREFIX = "__lookup_"
_CALL = re.compile(r"\blookup\s*\(", re.IGNORECASE)
_NAME_ARG = re.compile(r",\s*'((?:[^'\\]|\\.|'')*)'")


def lookup_table(name: str) -> str:
    """The quoted name of the lookup's `k`, `v` table on an engine's connection."""
    return quote_ident(TABLE_PREFIX + name)


def lookup_sql(text: str, table: str, retain: bool = False, replacement: str | None = None) -> str:
    """`text` mapped through a `k`, `v` table (a registered lookup, or VALUES of an inline map);
    a value not found gives NULL, itself (`retain`) or `replacement`."""
    found = f"(SELECT __l.v FROM {table} AS __l WHERE __l.k = {text})"
    if retain:
        return f"coalesce({found}, {text})"
    if replacement:
        return f"coalesce({found}, {quote_str(replacement)})"
    return found


def referenced_lookups(value: Any) -> set[str]:
    """The lookup names anywhere in a query's JSON."""
    out: set[str] = set()
    _walk(value, out)
    return out


def _walk(value: Any, out: set[str]) -> None:
    if isinstance(value, dict):
        kind = value.get("type")
        if kind in ("registeredLookup", "lookup") and isinstance(value.get("lookup"), str):
            out.add(value["lookup"])
        if kind == "lookup" and "dimension" in value and isinstance(value.get("name"), str):
            out.add(value["name"])  # a lookup dimension spec naming a registered lookup
        for v in value.values():
            _walk(v, out)
    elif isinstance(value, list):
        for v in value:
            _walk(v, out)
    elif isinstance(value, str) and _CALL.search(value):
        out.update(_expression_names(value))


def _expression_names(expression: str) -> set[str]:
    """The second argument of each `lookup(...)` call (a string literal)."""
    names = set()
    for m in _CALL.finditer(expression):
        depth, i = 1, m.end()
        while i < len(expression) and depth:
            c = expression[i]
            if c == "'":
                j = i + 1
                while j < len(expression) and not (expression[j] == "'" and expression[j - 1] != "\\"):
                    j += 1
                i = j
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "," and depth == 1:
                arg = _NAME_ARG.match(expression, i)
                if arg:
                    names.add(arg.group(1).replace("''", "'"))
                break
            i += 1
    return names
