"""Druid expressions rendered as DuckDB SQL, with Druid's types and null handling.

Every node compiles to a `Typed` SQL fragment of Druid type LONG, DOUBLE or STRING (NULL for an
untyped null literal). The rules are Druid's (SQL-compatible null handling, strict booleans):
arithmetic on two LONGs stays LONG (integer division truncates), anything with a DOUBLE is DOUBLE,
`+` with a STRING operand concatenates, other arithmetic reads strings as numbers; comparisons and
logical operators give LONG 1/0, or null when an operand is null; a string is true when it reads
`true` (Java's Boolean.parseBoolean), a number when it is not zero. Functions live in
`query.expressions.functions`.
"""

from __future__ import annotations

from collections.abc import Mapping

from strata.query.duck import quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.functions import FUNCTIONS
from strata.query.expressions.parser import Binary, Identifier, Literal, Node, Unary
from strata.query.expressions.typed import (
    DOUBLE,
    LONG,
    NULL,
    STRING,
    Typed,
    as_double,
    as_number,
    as_text,
    literal,
    truth,
)

_FROM_DUCK = {
    "BIGINT": LONG,
    "INTEGER": LONG,
    "BOOLEAN": LONG,
    "DOUBLE": DOUBLE,
    "FLOAT": DOUBLE,
    "VARCHAR": STRING,
}


class ColumnScope:
    """What an expression can read: columns with their DuckDB types."""

    def __init__(self, types: Mapping[str, str]) -> None:
        self.types = types

    def compile(self, node: Node) -> Typed:
        if isinstance(node, Literal):
            return literal(node.value)
        if isinstance(node, Identifier):
            duck = self.types.get(node.name)
            if duck is None:
                return Typed("CAST(NULL AS VARCHAR)", STRING)  # a missing column is all null
            if duck == "BOOLEAN":
                return Typed(f"CAST({quote_ident(node.name)} AS BIGINT)", LONG)
            kind = _FROM_DUCK.get(duck)
            if kind is None:
                raise QueryUnsupported(f"Column [{node.name}] of type {duck} cannot be used in an expression")
            return Typed(quote_ident(node.name), kind)
        if isinstance(node, Unary):
            return self._unary(node)
        if isinstance(node, Binary):
            return self._binary(node)
        compiler = FUNCTIONS.get(node.name)
        if compiler is None:
            raise invalid("Function [%s] is not supported in expressions", node.name)
        return compiler(self, node.args)

    def _unary(self, node: Unary) -> Typed:
        arg = self.compile(node.arg)
        if node.op == "!":
            return Typed(f"CAST(NOT {truth(arg)} AS BIGINT)", LONG)
        if arg.kind == STRING or arg.kind == NULL:
            return Typed(f"(-{as_number(arg)})", DOUBLE)
        return Typed(f"(-{arg.sql})", arg.kind)

    def _binary(self, node: Binary) -> Typed:
        left, right = self.compile(node.left), self.compile(node.right)
        op = node.op
        if op in ("&&", "||"):
            joined = " AND " if op == "&&" else " OR "
            return Typed(f"CAST(({truth(left)}{joined}{truth(right)}) AS BIGINT)", LONG)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            sql_op = {"==": "=", "!=": "<>"}.get(op, op)
            if (left.kind == STRING and right.kind == STRING) or {left.kind, right.kind} <= {LONG, NULL}:
                a, b = left.sql, right.sql
            else:
                a, b = as_double(left), as_double(right)
            return Typed(f"CAST(({a} {sql_op} {b}) AS BIGINT)", LONG)
        if op == "+" and STRING in (left.kind, right.kind):
            return Typed(f"({as_text(left)} || {as_text(right)})", STRING)
        kind = LONG if left.kind in (LONG, NULL) and right.kind in (LONG, NULL) else DOUBLE
        a, b = (left.sql, right.sql) if kind == LONG else (as_double(left), as_double(right))
        if op == "/" and kind == LONG:
            # Java's long division truncates; by zero Druid fails the query, here it is null
            return Typed(f"(CASE WHEN {b} <> 0 THEN {a} // {b} END)", LONG)
        if op == "%" and kind == LONG:
            return Typed(f"(CASE WHEN {b} <> 0 THEN {a} % {b} END)", LONG)
        if op == "^":
            if kind == LONG:
                return Typed(f"CAST(pow({a}, {b}) AS BIGINT)", LONG)
            return Typed(f"pow({a}, {b})", DOUBLE)
        if op == "%":  # Java's double remainder, NaN for a zero divisor
            return Typed(f"(CASE WHEN {b} = 0 THEN CAST('NaN' AS DOUBLE) ELSE fmod({a}, {b}) END)", DOUBLE)
        return Typed(f"({a} {op} {b})", kind)


def compile_expression(node: Node, types: Mapping[str, str]) -> Typed:
    """SQL for `node` over columns of the given DuckDB types."""
    return ColumnScope(types).compile(node)
