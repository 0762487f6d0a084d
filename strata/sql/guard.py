"""Checks a SQL request passes before anything parses it: field types, header values, statement size
and nesting.

The SQL parser and planner recurse once per nesting level, so a statement nested a thousand deep
would end in a RecursionError; a multi-megabyte statement would hold a CPU for seconds. These checks
are cheap, linear and recursion-free, and they answer Druid's 400 (`invalidInput`) instead. Pure:
no I/O, nothing parsed but the request's own JSON values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.errors import invalid
from strata.query.fields import as_object, get_bool, get_list, get_str
from strata.query.header_values import header_value

MAX_STATEMENT_CHARS = 1_000_000
"""Characters a statement may have (after its `?` parameters are bound): about a 100,000-item `IN`
list, which plans in about 8 s on two busy cores, inside the 30 s planning bound; past it the
statement is refused before it is parsed."""

MAX_NESTING = 32
"""Levels a statement may nest: each open parenthesis or bracket, each `CASE`, and each operator of
a chain of prefix operators (`NOT NOT x`, `- - x`) is one level. The parser spends some twenty
stack frames per level, so 32 levels stay well inside Python's recursion limit."""

MAX_OPERATOR_CHAIN = 256
"""Binary arithmetic or concatenation operators in one chain (`a + b + c ...`), counted across the
enclosing levels: each operator is one level of the expression tree the planner walks."""

BOOLEAN_FIELDS = ("header", "typesHeader", "sqlTypesHeader")

# an unterminated string or comment runs to the end of the text: one pass, never quadratic
_TOKEN = re.compile(
    r"""(?P<text>'[^']*(?:''[^']*)*(?:'|\Z)|"[^"]*(?:""[^"]*)*(?:"|\Z))
      |(?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
      |(?P<word>[A-Za-z_][A-Za-z_0-9$]*)
      |(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
      |(?P<op>\|\||<<|>>|[-+*/%^&|~])
      |(?P<open>[(\[])
      |(?P<close>[)\]])
      |(?P<sep>[,;=<>!])
      |(?P<space>\s+)
      |(?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)
_EXPECTING = frozenset(
    [
        "SELECT",
        "WHERE",
        "AND",
        "OR",
        "WHEN",
        "THEN",
        "ELSE",
        "ON",
        "HAVING",
        "BY",
        "IS",
        "LIKE",
        "ILIKE",
        "SIMILAR",
        "IN",
        "BETWEEN",
        "EXISTS",
        "DISTINCT",
        "ALL",
        "ANY",
        "SOME",
        "AS",
        "FROM",
        "TO",
        "FILTER",
        "OVER",
        "PARTITION",
        "ORDER",
        "GROUP",
        "UNION",
        "EXCEPT",
        "INTERSECT",
        "SET",
        "ESCAPE",
        "LIMIT",
        "OFFSET",
        "FETCH",
        "RETURN",
        "WITH",
        "VALUES",
        "USING",
        "JOIN",
    ]
)
"""Keywords after which an operand is expected (a `-` there is a prefix minus); every other word is an
operand: a name, a literal like NULL, a function called next."""


@dataclass
class _Level:
    """One open parenthesis, bracket or CASE: the prefix and binary operators running in it."""

    case: bool
    prefix: int = 0
    chain: int = 0


def check_body(body: Any) -> dict[str, Any]:
    """The JSON body of POST /druid/v2/sql with its fields of the types Druid takes (a 400 names the
    field otherwise); the boolean flags come back as booleans."""
    checked = dict(as_object(body, "Request body"))
    get_str(checked, "query")
    get_str(checked, "resultFormat", None)
    if checked.get("context") is not None:
        as_object(checked["context"], "Field [context]")
    for i, parameter in enumerate(get_list(checked, "parameters", [])):
        value = parameter.get("value") if isinstance(parameter, dict) else parameter
        if isinstance(value, dict):  # an ARRAY parameter's value is a list; no type's is an object
            raise invalid("Parameter [%d] must have a scalar or array [value], not an object", i + 1)
    for name in BOOLEAN_FIELDS:
        checked[name] = get_bool(checked, name, False)
    return checked


def query_id(context: Mapping[str, Any], default: str) -> str:
    """The statement's id from `sqlQueryId`: it goes back in a response header, so it must fit one."""
    value = context.get("sqlQueryId")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    value = get_str({"sqlQueryId": value}, "sqlQueryId", None, what="of [context]")
    return default if not value else header_value("sqlQueryId", value)


def check_size(sql: str) -> None:
    if len(sql) > MAX_STATEMENT_CHARS:
        raise invalid(
            "SQL statement of %d characters is longer than the limit of %d", len(sql), MAX_STATEMENT_CHARS
        )


def check_statement(sql: str) -> None:
    """Size, then nesting, scanned token by token without recursion (before any parser sees it)."""
    check_size(sql)
    if _within_limits_at_a_glance(sql):
        return
    levels = [_Level(case=False)]
    prefixes = chained = 0  # sums over `levels`
    operand = False  # the previous token ended an operand (a following `-` is binary)
    for m in _TOKEN.finditer(sql):
        kind, top = m.lastgroup, levels[-1]
        if kind in ("space", "comment"):
            continue
        word = m.group().upper() if kind == "word" else ""
        if kind == "open" or word == "CASE":
            levels.append(_Level(case=word == "CASE"))
            operand = False
        elif (kind == "close" and len(levels) > 1 and not top.case) or (word == "END" and top.case):
            levels.pop()
            prefixes -= top.prefix + levels[-1].prefix
            chained -= top.chain
            levels[-1].prefix, operand = 0, True
        elif word == "NOT" or (kind == "op" and m.group() in "-+~" and not operand):
            top.prefix += 1
            prefixes += 1
            operand = False
        elif kind == "op":
            top.chain += 1
            chained += 1
            operand = False
        elif kind == "sep" or word in _EXPECTING:
            chained -= top.chain
            top.chain, operand = 0, False
        elif kind in ("word", "number", "text"):
            prefixes -= top.prefix
            top.prefix, operand = 0, True
        else:
            operand = False
        if len(levels) - 1 + prefixes > MAX_NESTING:
            raise invalid(
                "SQL nests deeper than the limit of %d levels (parentheses, CASE, chains of NOT or of "
                "signs) at %s",
                MAX_NESTING,
                _position(sql, m.start()),
            )
        if chained > MAX_OPERATOR_CHAIN:
            raise invalid(
                "SQL chains more than %d arithmetic operators in one expression at %s",
                MAX_OPERATOR_CHAIN,
                _position(sql, m.start()),
            )


def _within_limits_at_a_glance(sql: str) -> bool:
    """Whether counting characters already shows the limits cannot be reached: every level of
    nesting needs a `(`, `[`, CASE, NOT or sign, every chained operator an operator character. Most
    statements pass here in microseconds; the others get the token-by-token scan."""
    upper = sql.upper()
    openers = sum(sql.count(c) for c in "([-+~") + upper.count("CASE") + upper.count("NOT")
    operators = sum(sql.count(c) for c in "-+*/%^&|~<>")
    return openers <= MAX_NESTING and operators <= MAX_OPERATOR_CHAIN


def _position(sql: str, offset: int) -> str:
    line = sql.count("\n", 0, offset) + 1
    return f"line [{line}], column [{offset - (sql.rfind(chr(10), 0, offset) + 1) + 1}]"
