"""Druid expressions rendered as DuckDB SQL, with Druid's types and null handling.

Every node compiles to a `Typed` SQL fragment of a Druid type (LONG, DOUBLE, STRING, an ARRAY,
COMPLEX<json>; NULL for an untyped null literal). The rules are Druid's (SQL-compatible null
handling, strict booleans): arithmetic on two LONGs stays LONG (integer division truncates),
anything with a DOUBLE is DOUBLE, `+` with a STRING operand concatenates, other arithmetic reads
strings as numbers; comparisons and logical operators give LONG 1/0, or null when an operand is
null; a string is true when it reads `true` (Java's Boolean.parseBoolean), a number when it is not
zero. Functions live in `query.expressions.functions`, `.arrays` and `.json_functions`.

A multi-value column read where a scalar is expected maps the whole expression over its values
(Druid's implicit mapping: `concat(tags, 'x')` is `map((tags) -> concat(tags, 'x'), tags)`, two
such columns every pair of values); a row with no value is one null value. The result is then a
multi-value STRING. Read where an array is expected (`array_length(tags)`), it is its values.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping

from strata.query.duck import is_multi_value, quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.arrays import ARRAY_ARGUMENTS, ARRAY_FUNCTIONS
from strata.query.expressions.functions import FUNCTIONS
from strata.query.expressions.json_functions import JSON_FUNCTIONS
from strata.query.expressions.parser import (
    ArrayLiteral,
    Binary,
    Call,
    Identifier,
    Lambda,
    Literal,
    Node,
    Unary,
)
from strata.query.expressions.typed import (
    DOUBLE,
    FROM_DUCK,
    JSON,
    LONG,
    NULL,
    STRING,
    Typed,
    array_of,
    as_array,
    as_double,
    as_number,
    as_text,
    cast_to,
    common_kind,
    duck_of,
    element_kind,
    is_array_kind,
    java_long_sum,
    literal,
    truth,
)

_ALL_FUNCTIONS = {**FUNCTIONS, **ARRAY_FUNCTIONS, **JSON_FUNCTIONS}


class ColumnScope:
    """What an expression can read: columns with their DuckDB types, and lambda parameters."""

    def __init__(
        self,
        types: Mapping[str, str],
        bindings: Mapping[str, Typed] | None = None,
        names: Iterator[int] | None = None,
    ) -> None:
        self.types = types
        self.bindings = dict(bindings or {})
        self._names = names if names is not None else itertools.count()

    def fresh_name(self) -> str:
        return f"__p{next(self._names)}"

    def bind(self, bindings: dict[str, Typed]) -> ColumnScope:
        return ColumnScope(self.types, {**self.bindings, **bindings}, self._names)

    def reads_multi_value(self, node: Node) -> bool:
        return (
            isinstance(node, Identifier)
            and node.name not in self.bindings
            and is_multi_value(self.types.get(node.name))
        )

    def compile(self, node: Node) -> Typed:
        if isinstance(node, Literal):
            return literal(node.value)
        if isinstance(node, Identifier):
            return self._identifier(node.name)
        if isinstance(node, Unary):
            return self._unary(node)
        if isinstance(node, Binary):
            return self._binary(node)
        if isinstance(node, ArrayLiteral):
            return _array_literal(node)
        if isinstance(node, Lambda):
            raise invalid("A lambda expression is only an argument of an apply function (map, filter, ...)")
        compiler = _ALL_FUNCTIONS.get(node.name)
        if compiler is None:
            raise invalid("Function [%s] is not supported in expressions", node.name)
        return compiler(self, node.args)

    def _identifier(self, name: str) -> Typed:
        bound = self.bindings.get(name)
        if bound is not None:
            return bound
        duck = self.types.get(name)
        if duck is None:
            return Typed("CAST(NULL AS VARCHAR)", STRING)  # a missing column is all null
        if duck == "BOOLEAN":
            return Typed(f"CAST({quote_ident(name)} AS BIGINT)", LONG)
        kind = FROM_DUCK.get(duck)
        if kind is None:
            raise QueryUnsupported(f"Column [{name}] of type {duck} cannot be used in an expression")
        return Typed(quote_ident(name), kind)

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
        if is_array_kind(left.kind) or is_array_kind(right.kind):
            return self._array_binary(op, left, right)
        if op in ("&&", "||"):
            joined = " AND " if op == "&&" else " OR "
            return Typed(f"CAST(({truth(left)}{joined}{truth(right)}) AS BIGINT)", LONG)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            sql_op = {"==": "=", "!=": "<>"}.get(op, op)
            if left.kind == right.kind == JSON and op in ("==", "!="):  # nested values: equal when alike
                a, b = f"CAST({left.sql} AS VARCHAR)", f"CAST({right.sql} AS VARCHAR)"
            elif (left.kind == STRING and right.kind == STRING) or {left.kind, right.kind} <= {LONG, NULL}:
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
        if op in ("+", "-") and left.kind == right.kind == LONG:
            return Typed(java_long_sum(a, op, b), LONG)
        return Typed(f"({a} {op} {b})", kind)

    def _array_binary(self, op: str, left: Typed, right: Typed) -> Typed:
        """Arrays compare whole (element by element); no arithmetic applies to them."""
        if op not in ("<", "<=", ">", ">=", "==", "!="):
            raise invalid("Operator [%s] does not apply to arrays", op)
        kind = array_of(common_kind(left.kind, right.kind))
        a, b = as_array(left, kind).sql, as_array(right, kind).sql
        if op in ("<", "<=", ">", ">="):  # Druid orders a null element first, DuckDB last
            a, b = null_elements_first(a), null_elements_first(b)
        sql_op = {"==": "=", "!=": "<>"}.get(op, op)
        return Typed(f"CAST(({a} {sql_op} {b}) AS BIGINT)", LONG)


def null_elements_first(array_sql: str) -> str:
    """An array whose elements are (not null, value) pairs: DuckDB compares these as Druid
    compares the elements (a null one first)."""
    return f"list_transform({array_sql}, lambda __e: {{'n': __e IS NOT NULL, 'v': __e}})"


def _array_literal(node: ArrayLiteral) -> Typed:
    values = [literal(e.value) for e in node.elements]
    kind = node.element_type or common_kind(*(v.kind for v in values))
    if kind == NULL or (not values and node.element_type is None):
        kind = STRING
    items = ", ".join(cast_to(v, kind).sql for v in values)
    return Typed(f"CAST([{items}] AS {duck_of(array_of(kind))})", array_of(kind))


def mapped_columns(node: Node, types: Mapping[str, str]) -> list[str]:
    """The multi-value columns `node` reads where a scalar is expected (Druid maps over them)."""
    found: dict[str, None] = {}

    def walk(n: Node, as_array_argument: bool, bound: frozenset[str]) -> None:
        if isinstance(n, Identifier):
            if not as_array_argument and n.name not in bound and is_multi_value(types.get(n.name)):
                found[n.name] = None
        elif isinstance(n, Call):
            positions = ARRAY_ARGUMENTS.get(n.name, ())
            for i, arg in enumerate(n.args):
                walk(arg, i in positions, bound)
        elif isinstance(n, Lambda):
            walk(n.body, False, bound | set(n.params))
        elif isinstance(n, Unary):
            walk(n.arg, False, bound)
        elif isinstance(n, Binary):
            walk(n.left, False, bound)
            walk(n.right, False, bound)

    walk(node, False, frozenset())
    return list(found)


def compile_expression(node: Node, types: Mapping[str, str]) -> Typed:
    """SQL for `node` over columns of the given DuckDB types; mapped over the values of the
    multi-value columns it reads as scalars (the result then a multi-value STRING)."""
    scope = ColumnScope(types)
    mapped = mapped_columns(node, types)
    if not mapped:
        return scope.compile(node)
    params = {name: Typed(f'"{scope.fresh_name()}"', STRING) for name in mapped}
    body = scope.bind(params).compile(node)
    kind = array_of(body.kind)
    text = cast_to(body, element_kind(kind)).sql
    for depth, name in enumerate(reversed(mapped)):
        values = f"(CASE WHEN len({quote_ident(name)}) > 0 THEN {quote_ident(name)} ELSE [NULL::VARCHAR] END)"
        text = f"list_transform({values}, lambda {params[name].sql}: {text})"
        if depth:
            text = f"flatten({text})"
    return Typed(text, kind, multi=True)
