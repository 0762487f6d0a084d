"""Druid's string functions in DuckDB: UTF-16 lengths, null-propagating concatenation, Java
regular-expression replacement groups, Java's String.format and the IP address functions."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import duckdb
import pyarrow as pa
from sqlglot import exp

from strata.lookups.registry import REGISTRY
from strata.query.duck import quote_str
from strata.query.errors import invalid
from strata.query.lookup_refs import lookup_sql
from strata.sql.functions.fragments import (
    arguments,
    duck,
    sql_of,
    string_value,
    text_of,
    typed,
)
from strata.sql.functions.spec import Context, FunctionSpec, Rewrite, specs
from strata.sql.functions.udfs import create, register, rows


def _length(node: exp.Expr, ctx: Context) -> exp.Expr:
    text = text_of(arguments(node)[0])  # Java counts UTF-16 units: characters past U+FFFF count twice
    extra = f"length(regexp_replace({text}, '[\\x{{0}}-\\x{{FFFF}}]', '', 'g'))"
    return typed(duck(f"CAST(length({text}) + {extra} AS BIGINT)"), "BIGINT")


def _concat(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    return typed(duck("(" + " || ".join(text_of(a) for a in args) + ")"), "VARCHAR")


def _pad(node: exp.Expr, ctx: Context) -> exp.Expr:
    fn = "lpad" if node.args.get("is_left") else "rpad"
    fill = node.args.get("fill_pattern")
    chars = sql_of(fill) if fill is not None else "' '"
    text = f"{fn}({text_of(node.this)}, CAST({sql_of(node.expression)} AS INTEGER), {chars})"
    return typed(duck(f"(CASE WHEN {chars} = '' THEN NULL ELSE {text} END)"), "VARCHAR")


def _regexp_extract(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    text, pattern = text_of(args[0]), sql_of(args[1])
    index = sql_of(args[2]) if len(args) > 2 else "0"
    found = f"regexp_extract({text}, {pattern}, {index})"
    return typed(duck(f"(CASE WHEN regexp_matches({text}, {pattern}) THEN {found} END)"), "VARCHAR")


def _regexp_replace(node: exp.Expr, ctx: Context) -> exp.Expr:
    replacement = node.args.get("replacement")
    value = string_value(replacement, "REGEXP_REPLACE", "replacement")
    if value is None:
        return typed(duck("CAST(NULL AS VARCHAR)"), "VARCHAR")
    duck_text = re.sub(r"\$(\d)", r"\\\1", value.replace("\\", "\\\\"))  # Java's $1 is RE2's \1
    literal = "'" + duck_text.replace("'", "''") + "'"
    return typed(
        duck(f"regexp_replace({text_of(node.this)}, {sql_of(node.expression)}, {literal}, 'g')"), "VARCHAR"
    )


def _call(template: str, result: str) -> Rewrite:
    def rewrite(node: exp.Expr, ctx: Context) -> exp.Expr:
        return typed(duck(template.format(*(text_of(a) for a in arguments(node)))), result)

    return rewrite


def _btrim(node: exp.Expr) -> exp.Expr:
    """BTRIM(expr[, chars]): spaces when no characters are given."""
    args = arguments(node)
    chars = f", {sql_of(args[1])}" if len(args) > 1 else ""
    return typed(duck(f"trim({sql_of(args[0])}{chars})"), "VARCHAR")


def _parse_long(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    radix = sql_of(args[1]) if len(args) > 1 else "10"
    return typed(duck(f"strata_parse_long({text_of(args[0])}, CAST({radix} AS INTEGER))"), "BIGINT")


def _string_format(node: exp.Expr, ctx: Context) -> exp.Expr:
    args = arguments(node)
    if not args:
        raise invalid("Function [STRING_FORMAT] needs a pattern")
    values = ", ".join(text_of(a) for a in args[1:])
    return typed(duck(f"strata_string_format({text_of(args[0])}, [{values}]::VARCHAR[])"), "VARCHAR")


def _lookup(node: exp.Expr, ctx: Context) -> exp.Expr:
    """LOOKUP(expr, 'name'[, 'replaceMissingValueWith']) in the broker's engine: the loaded lookup's
    pairs as a VALUES table (the native plan reads the registered table instead)."""
    args = arguments(node)
    if len(args) not in (2, 3):
        raise invalid("Function [LOOKUP] needs 2 or 3 arguments, got %d", len(args))
    name = string_value(args[1], "LOOKUP", "lookup name")
    found = REGISTRY.get(name or "")
    if found is None:
        raise invalid("Lookup [%s] not found", name)
    replacement = string_value(args[2], "LOOKUP", "replaceMissingValueWith") if len(args) == 3 else None
    pairs = ", ".join(f"({quote_str(k)}, {quote_str(v)})" for k, v in found.mapping.items())
    table = f"(SELECT * FROM (VALUES {pairs}) AS __m(k, v))" if pairs else "(SELECT NULL AS k, NULL AS v)"
    return typed(duck(lookup_sql(text_of(args[0]), table, replacement=replacement)), "VARCHAR")


STRINGS: dict[str, Rewrite] = {
    "LOOKUP": _lookup,
    "LENGTH": _length,
    "STRLEN": _length,
    "CONCAT": _concat,
    "TEXTCAT": _concat,
    "||": _concat,
    "LPAD": _pad,
    "RPAD": _pad,
    "REGEXP_EXTRACT": _regexp_extract,
    "REGEXP_REPLACE": _regexp_replace,
    "CONTAINS_STRING": _call("contains({0}, {1})", "BOOLEAN"),
    "ICONTAINS_STRING": _call("contains(lower({0}), lower({1}))", "BOOLEAN"),
    "BTRIM": lambda node, ctx: _btrim(node),
    "DECODE_BASE64_UTF8": _call("decode(from_base64({0}))", "VARCHAR"),
    "PARSE_LONG": _parse_long,
    "STRING_FORMAT": _string_format,
    "IPV4_MATCH": _call("strata_ipv4_match({0}, {1})", "BOOLEAN"),
    "IPV4_PARSE": _call("strata_ipv4_parse({0})", "BIGINT"),
    "IPV4_STRINGIFY": _call("strata_ipv4_stringify({0})", "VARCHAR"),
    "IPV6_MATCH": _call("strata_ipv6_match({0}, {1})", "BOOLEAN"),
}
OPERATOR_KEYS: dict[type[exp.Expr], str] = {exp.DPipe: "||"}


# -- Python functions -----------------------------------------------------------------------------
def parse_long(text: str, radix: int) -> int | None:
    """Java's Long.parseLong (an optional 0x prefix in base 16, as Druid accepts)."""
    body = text.strip()
    if radix == 16 and body.lower().startswith(("0x", "-0x")):
        body = body.replace("0x", "", 1).replace("0X", "", 1)
    try:
        value = int(body, radix)
    except ValueError:
        return None
    return value if -(2**63) <= value < 2**63 else None


_JAVA_FORMAT = re.compile(r"%(-?\d*(?:\.\d+)?)([a-zA-Z%])")


def string_format(pattern: str, values: list[str | None]) -> str:
    """Java's String.format for the common conversions (%s %d %f %x %e %b %n %%)."""
    items = iter(values)

    def one(match: re.Match[str]) -> str:
        flags, conversion = match.groups()
        if conversion == "%":
            return "%"
        if conversion == "n":
            return "\n"
        value = next(items, None)
        if conversion in ("s", "S"):
            text = "null" if value is None else value
            return (f"%{flags}s" % text).upper() if conversion == "S" else f"%{flags}s" % text
        if value is None:
            return "null"
        if conversion in ("d", "x", "X", "o"):
            return f"%{flags}{conversion}" % int(float(value))
        if conversion in ("f", "e", "E", "g"):
            return f"%{flags or '.6'}{conversion}" % float(value)
        if conversion == "b":
            return value
        raise invalid("STRING_FORMAT conversion [%%%s] is not supported", conversion)

    return _JAVA_FORMAT.sub(one, pattern)


def _ipv4(value: Any) -> ipaddress.IPv4Address | None:
    try:
        return ipaddress.IPv4Address(int(value) if isinstance(value, int) else str(value))
    except (ValueError, ipaddress.AddressValueError):
        return None


def ipv4_match(address: str, subnet: str) -> bool | None:
    ip = _ipv4(address)
    try:
        return None if ip is None else ip in ipaddress.IPv4Network(subnet, strict=False)
    except ValueError:
        return False


def ipv4_parse(address: str) -> int | None:
    ip = _ipv4(address)
    return None if ip is None else int(ip)


def ipv4_stringify(value: str) -> str | None:
    try:
        number = int(float(value))
    except ValueError:
        ip = _ipv4(value)  # a dotted address prints as itself
        return None if ip is None else str(ip)
    return str(ipaddress.IPv4Address(number)) if 0 <= number < 2**32 else None


def ipv6_match(address: str, subnet: str) -> bool | None:
    try:
        return ipaddress.IPv6Address(address) in ipaddress.IPv6Network(subnet, strict=False)
    except ValueError:
        return False


def _install(conn: duckdb.DuckDBPyConnection) -> None:
    create(
        conn, "strata_string_format", rows(string_format, pa.string(), 2), ["VARCHAR", "VARCHAR[]"], "VARCHAR"
    )
    create(conn, "strata_ipv4_match", rows(ipv4_match, pa.bool_(), 2), ["VARCHAR", "VARCHAR"], "BOOLEAN")
    create(conn, "strata_ipv6_match", rows(ipv6_match, pa.bool_(), 2), ["VARCHAR", "VARCHAR"], "BOOLEAN")
    parsers: list[tuple[str, Any, pa.DataType, list[str], str]] = [
        ("strata_parse_long", parse_long, pa.int64(), ["VARCHAR", "INTEGER"], "BIGINT"),
        ("strata_ipv4_parse", ipv4_parse, pa.int64(), ["VARCHAR"], "BIGINT"),
        ("strata_ipv4_stringify", ipv4_stringify, pa.string(), ["VARCHAR"], "VARCHAR"),
    ]
    for name, fn, kind, params, result in parsers:  # null for what they cannot parse
        create(conn, name, rows(fn, kind, len(params)), params, result, may_return_null=True)


register(_install)

STRING_SPECS: list[FunctionSpec] = [
    *specs(
        "scalar",
        "string",
        {
            "LENGTH": "Length in UTF-16 code units.",
            "CHAR_LENGTH": "Alias of LENGTH.",
            "CHARACTER_LENGTH": "Alias of LENGTH.",
            "STRLEN": "Alias of LENGTH.",
            "CONCAT": "Concatenation; null when any argument is null.",
            "TEXTCAT": "Concatenation of two strings.",
            "LOWER": "Lower case.",
            "UPPER": "Upper case.",
            "LPAD": "Pads on the left to a length (truncating longer strings).",
            "RPAD": "Pads on the right to a length (truncating longer strings).",
            "TRIM": "TRIM([BOTH|LEADING|TRAILING] [chars FROM] expr).",
            "BTRIM": "Trims characters from both ends.",
            "LTRIM": "Trims characters from the start.",
            "RTRIM": "Trims characters from the end.",
            "LEFT": "The leftmost N characters.",
            "RIGHT": "The rightmost N characters.",
            "SUBSTRING": "Substring from a 1-based index.",
            "SUBSTR": "Alias of SUBSTRING.",
            "STRPOS": "1-based index of a substring, 0 when absent.",
            "POSITION": "POSITION(sub IN expr [FROM start]): 1-based index, 0 when absent.",
            "REPLACE": "Replaces every occurrence of a substring.",
            "REPEAT": "Repeats a string N times.",
            "REVERSE": "Reverses a string.",
            "REGEXP_EXTRACT": "The first match of a pattern (or a group), null when none.",
            "REGEXP_LIKE": "Whether a pattern matches part of the string.",
            "REGEXP_REPLACE": "Replaces every match; $1 refers to a group.",
            "CONTAINS_STRING": "Whether a string contains another (case-sensitive).",
            "ICONTAINS_STRING": "Whether a string contains another (case-insensitive).",
            "DECODE_BASE64_UTF8": "Decodes Base64 to UTF-8 text.",
            "PARSE_LONG": "Parses a LONG in a radix (10 by default).",
            "STRING_FORMAT": "Java's String.format.",
            "LOOKUP": "Maps a value through a registered query-time lookup.",
        },
        native=frozenset(
            {
                "LENGTH",
                "CHAR_LENGTH",
                "CHARACTER_LENGTH",
                "STRLEN",
                "CONCAT",
                "LOWER",
                "UPPER",
                "TRIM",
                "LTRIM",
                "RTRIM",
                "LEFT",
                "RIGHT",
                "SUBSTRING",
                "SUBSTR",
                "STRPOS",
                "POSITION",
                "REPLACE",
                "REPEAT",
                "REVERSE",
                "REGEXP_EXTRACT",
                "REGEXP_LIKE",
                "CONTAINS_STRING",
                "ICONTAINS_STRING",
                "LOOKUP",
            }
        ),
    ),
    *specs(
        "scalar",
        "IP address",
        {
            "IPV4_MATCH": "Whether an IPv4 address is in a subnet.",
            "IPV4_PARSE": "An IPv4 address as an integer.",
            "IPV4_STRINGIFY": "An integer as a dotted IPv4 address.",
            "IPV6_MATCH": "Whether an IPv6 address is in a subnet.",
        },
    ),
]
