"""Druid's implicit casts of strings in numeric operations, written into the statement before it
is planned, so the native planner and the broker's DuckDB compute what Druid computes.

Druid's validator (Calcite's type coercion) casts a VARCHAR operand of arithmetic to the other
operand's numeric type (`'2' + c_long` is a BIGINT sum), both to DOUBLE when both are strings
(`c + c` over unnested multi-value strings is `2.0`), and a VARCHAR argument of a function that
takes a number (`SIN(c)`, `SUM(c)`) to DOUBLE, and a computed string ordered against a number
(`HUMAN_READABLE_DECIMAL_FORMAT(x) < 99999`) to DOUBLE; a string that is no number is null. Without the
cast, native `+` concatenates two strings and DuckDB has no `sin(VARCHAR)`. Types come from the
operand checks' walk (`strata.sql.operand_checks`); an operand whose type is unknown is left as is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sqlglot import exp

from strata.sql.operand_checks import Columns, walk_calls
from strata.sql.operand_types import SqlType

log = logging.getLogger(__name__)

_ARITHMETIC = frozenset({"+", "-", "*", "/"})
_ORDERINGS = frozenset({"<", "<=", ">", ">="})
_INTEGERS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT"})
# functions whose numeric operands Calcite types as DOUBLE (a string argument is cast to it)
_TAKE_DOUBLES = frozenset({
    "SIN", "COS", "TAN", "COT", "ASIN", "ACOS", "ATAN", "ATAN2", "EXP", "LN", "LOG10", "SQRT",
    "POWER", "DEGREES", "RADIANS", "SUM", "AVG",
})  # fmt: skip


def implicit_casts(tree: exp.Expr, columns: Columns) -> exp.Expr:
    """A copy of `tree` with Druid's implicit casts of strings written as CASTs (`tree` itself when
    its shape is one the walk does not follow)."""
    out = tree.copy()
    try:
        walk_calls(out, columns, _cast_strings)
    except (KeyError, AttributeError, IndexError, TypeError, ValueError):
        log.warning("implicit casts skipped a statement the type walk could not follow", exc_info=True)
        return tree
    return out


def _cast_strings(
    node: exp.Expr, name: str, operands: Sequence[exp.Expr], kinds: Sequence[SqlType | None]
) -> None:
    if name in _ARITHMETIC and len(operands) == 2:
        known = [k for k in kinds if k is not None]
        if len(known) != 2 or not all(k.is_string or k.is_numeric for k in known):
            return
        numbers = [k for k in known if k.is_numeric]
        target = "BIGINT" if numbers and numbers[0].name.split("(")[0] in _INTEGERS else "DOUBLE"
        for operand, kind in zip(operands, known, strict=True):
            if kind.is_string:
                _cast(operand, target)
    elif name in _ORDERINGS and len(operands) == 2:
        # a computed string ordered against a number is read as one (a column keeps its native
        # range filter, which compares so already)
        known = [k for k in kinds if k is not None]
        if len(known) != 2 or not any(k.is_numeric for k in known):
            return
        for operand, kind in zip(operands, known, strict=True):
            if kind.is_string and not isinstance(operand, (exp.Column, exp.Literal)):
                _cast(operand, "DOUBLE")
    elif name in _TAKE_DOUBLES:
        for operand, maybe in zip(operands, kinds, strict=False):
            if maybe is not None and maybe.is_string:
                _cast(operand, "DOUBLE")


def _cast(operand: exp.Expr, target: str) -> None:
    if isinstance(operand, exp.Null) or operand.parent is None:
        return
    operand.replace(exp.Cast(this=operand.copy(), to=exp.DataType.build(target)))
