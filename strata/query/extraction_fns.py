"""Druid's extraction functions as SQL over a column's string value (filters with `extractionFn`).

Each function maps the value Druid's legacy filters would see (the column as a string, `__time`
as epoch milliseconds) to the string the filter then matches. `lookup` (an inline map) and
`registeredLookup` (a lookup the node loaded, registered on the engine's connection as a `k`, `v`
table) map a value through the lookup, a missing one kept or replaced as asked. The ones with a
JavaScript body or a search query answer 501 naming themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from strata.query.duck import quote_ident, quote_str
from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import JAVA_INT_MAX, get_int
from strata.query.lookup_refs import lookup_sql, lookup_table
from strata.query.regex_check import check_regex

# an extraction function's SQL over `text` (the value so far) and `raw` (the column, of `raw_type`)
_Apply = Callable[[Mapping[str, Any], str, str, "str | None"], str]

UNSUPPORTED = frozenset({"javascript", "searchQuery", "bucket", "time"})

# Joda-Time pattern letters Druid's timeFormat uses most, as DuckDB strftime codes
_JODA = [("yyyy", "%Y"), ("YYYY", "%Y"), ("yy", "%y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"),
         ("dd", "%d"), ("HH", "%H"), ("hh", "%I"), ("mm", "%M"), ("ss", "%S"), ("SSS", "%g"),
         ("EEEE", "%A"), ("EEE", "%a"), ("a", "%p"), ("D", "%j")]  # fmt: skip


@dataclass(frozen=True)
class ExtractionFn:
    """SQL text turning `value` (a VARCHAR expression, or epoch ms for timeFormat) into the result."""

    json: Mapping[str, Any]

    def sql(self, column: str, types: Mapping[str, str]) -> str:
        ident = quote_ident(column)
        text = ident if types.get(column) == "VARCHAR" else f"CAST({ident} AS VARCHAR)"
        return _apply(self.json, text, ident, types.get(column))


def parse_extraction_fn(value: Any) -> ExtractionFn:
    if not isinstance(value, Mapping) or not isinstance(value.get("type"), str):
        raise invalid("extractionFn must be an object with a [type]")
    _check(value)
    return ExtractionFn(value)


def _check(fn: Mapping[str, Any]) -> None:
    kind = fn.get("type")
    if not isinstance(kind, str):
        raise invalid("extractionFn needs a string [type], got %s", type(kind).__name__)
    if kind in UNSUPPORTED:
        raise QueryUnsupported(f"extractionFn type [{kind}] is not supported")
    if kind not in _KINDS:
        raise invalid("Unknown extractionFn type [%s]; known types: %s", kind, ", ".join(sorted(_KINDS)))
    if kind == "cascade":
        fns = fn.get("extractionFns")
        if not isinstance(fns, list) or not fns:
            raise invalid("extractionFn [cascade] needs a non-empty [extractionFns]")
        for inner in fns:
            if not isinstance(inner, Mapping):
                raise invalid("extractionFn [cascade] entries must be objects")
            _check(inner)
    if kind in ("regex", "partial"):
        expr = fn.get("expr")
        if not isinstance(expr, str):
            raise invalid("extractionFn [%s] needs a string [expr]", kind)
        check_regex(expr, f"extractionFn [{kind}]")
    if kind == "substring" and not isinstance(fn.get("index"), int):
        raise invalid("extractionFn [substring] needs an integer [index]")
    what = f"extractionFn [{kind}]"
    for key in _INTEGERS.get(kind, ()):  # Java ints in Druid
        get_int(fn, key, None, what=what, minimum=0, maximum=JAVA_INT_MAX)
    for key in _STRINGS.get(kind, ()):
        if fn.get(key) is not None and not isinstance(fn.get(key), str):
            raise invalid("Field [%s] of %s must be a string", key, what)
    if kind in ("lookup", "registeredLookup"):
        _check_lookup(fn, kind)
    if kind == "timeFormat":  # checked here, on the broker, not first by a data node's engine
        zone = fn.get("timeZone")
        if zone not in (None, "UTC", "Z", "Etc/UTC"):
            try:
                ZoneInfo(zone)
            except (ZoneInfoNotFoundError, ValueError):
                raise invalid("Unknown timeZone [%s] in %s", zone, what) from None
        if fn.get("format") is not None:
            joda_to_strftime(fn["format"])


def _check_lookup(fn: Mapping[str, Any], kind: str) -> None:
    if kind == "registeredLookup":
        if not isinstance(fn.get("lookup"), str) or not fn["lookup"]:
            raise invalid("extractionFn [registeredLookup] needs a [lookup] name")
    else:
        inner = fn.get("lookup")
        pairs = inner.get("map") if isinstance(inner, Mapping) else None
        if not isinstance(inner, Mapping) or inner.get("type") != "map" or not isinstance(pairs, dict):
            raise invalid("extractionFn [lookup] needs a [lookup] of type [map] with a [map] object")
        if any(not isinstance(k, str) or not isinstance(v, str) for k, v in inner["map"].items()):
            raise invalid("extractionFn [lookup]: the [map] must map strings to strings")
    replacement = fn.get("replaceMissingValueWith")
    if replacement is not None and not isinstance(replacement, str):
        raise invalid("Field [replaceMissingValueWith] of extractionFn [%s] must be a string", kind)
    if fn.get("retainMissingValue") and replacement:
        raise invalid("Cannot specify a [replaceMissingValueWith] and set [retainMissingValue] to true")


def _lookup(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    if fn["type"] == "registeredLookup":
        table = lookup_table(fn["lookup"])
    else:
        pairs = fn["lookup"]["map"]
        if not pairs:
            table = "(SELECT NULL::VARCHAR AS k, NULL::VARCHAR AS v WHERE false)"
        else:
            values = ", ".join(f"({quote_str(k)}, {quote_str(v)})" for k, v in pairs.items())
            table = f"(SELECT * FROM (VALUES {values}) AS __m(k, v))"
    return lookup_sql(text, table, bool(fn.get("retainMissingValue")), fn.get("replaceMissingValueWith"))


_INTEGERS = {"substring": ("index", "length"), "regex": ("index",)}
_STRINGS = {"timeFormat": ("format", "timeZone", "locale"), "stringFormat": ("format", "nullHandling"),
            "regex": ("replaceMissingValueWith",), "lower": ("locale",), "upper": ("locale",)}  # fmt: skip


def _apply(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    kind = fn["type"]
    if kind == "cascade":
        out, out_raw, out_type = text, raw, raw_type
        for inner in fn["extractionFns"]:
            out = _apply(inner, out, out_raw, out_type)
            out_raw, out_type = out, "VARCHAR"
        return out
    return _KINDS[kind](fn, text, raw, raw_type)


def _substring(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    index, length = int(fn["index"]), fn.get("length")
    part = f"substr({text}, {index + 1})" if length is None else f"substr({text}, {index + 1}, {int(length)})"
    return f"(CASE WHEN length({text}) > {index} THEN {part} END)"


def _regex(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    expr = quote_str(fn["expr"])
    index = 1 if fn.get("index") is None else int(fn["index"])
    missing = text
    if fn.get("replaceMissingValue"):
        replacement = fn.get("replaceMissingValueWith")
        missing = "CAST(NULL AS VARCHAR)" if replacement is None else quote_str(str(replacement))
    found = f"regexp_extract({text}, {expr}, {index})"
    return f"(CASE WHEN regexp_matches({text}, {expr}) THEN {found} ELSE {missing} END)"


def _partial(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    return f"(CASE WHEN regexp_matches({text}, {quote_str(fn['expr'])}) THEN {text} END)"


def _string_format(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    fmt = quote_str(str(fn.get("format", "%s")))
    handling = fn.get("nullHandling", "nullString")
    if handling == "returnNull":
        return f"(CASE WHEN {text} IS NOT NULL THEN printf({fmt}, {text}) END)"
    empty = "''" if handling == "emptyString" else "'null'"
    return f"printf({fmt}, coalesce({text}, {empty}))"


def joda_to_strftime(pattern: str) -> str:
    """Joda pattern letters to strftime codes; quoted text stays literal."""
    out, i = [], 0
    while i < len(pattern):
        if pattern[i] == "'":
            end = pattern.find("'", i + 1)
            end = len(pattern) if end < 0 else end
            out.append(pattern[i + 1 : end].replace("%", "%%") or "'")
            i = end + 1
            continue
        for joda, code in _JODA:
            if pattern.startswith(joda, i):
                out.append(code)
                i += len(joda)
                break
        else:
            if pattern[i].isalpha():
                raise QueryUnsupported(f"timeFormat pattern letter [{pattern[i]}] is not supported")
            out.append(pattern[i].replace("%", "%%"))
            i += 1
    return "".join(out)


def _time_format(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    if fn.get("granularity") is not None or fn.get("asMillis"):
        raise QueryUnsupported("timeFormat with [granularity] or [asMillis] is not supported")
    zone = fn.get("timeZone") or "UTC"
    millis = raw if raw_type in ("BIGINT", "INTEGER") else f"epoch_ms(TRY_CAST({text} AS TIMESTAMPTZ))"
    moment = f"timezone({quote_str(zone)}, make_timestamptz(({millis})::BIGINT * 1000))"
    pattern = fn.get("format")
    if pattern is None:  # ISO with the zone's offset, as Joda prints it
        return f"strftime({moment}, '%Y-%m-%dT%H:%M:%S.%g') || {_offset(zone)}"
    return f"strftime({moment}, {quote_str(joda_to_strftime(str(pattern)))})"


def _offset(zone: str) -> str:
    return "'Z'" if zone in ("UTC", "Etc/UTC", "Z") else quote_str("")


def _simple(sql_function: str) -> _Apply:
    def apply(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
        return f"{sql_function}({text})"

    return apply


def _strlen(fn: Mapping[str, Any], text: str, raw: str, raw_type: str | None) -> str:
    return f"CAST(length({text}) AS VARCHAR)"


_KINDS: dict[str, _Apply] = {
    "substring": _substring,
    "regex": _regex,
    "partial": _partial,
    "stringFormat": _string_format,
    "timeFormat": _time_format,
    "upper": _simple("upper"),
    "lower": _simple("lower"),
    "strlen": _strlen,
    "cascade": _apply,
    "lookup": _lookup,
    "registeredLookup": _lookup,
}
