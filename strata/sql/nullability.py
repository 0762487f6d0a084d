"""Where Druid's planner knows a value is never null, and what it then makes of `IS NULL`.

Calcite types every expression NULL or NOT NULL, and simplifies `x IS NULL` to FALSE (and
`x IS NOT NULL` to TRUE) when `x` is NOT NULL, before anything runs. The type is the function's
declared one, not the value: Druid declares ARRAY_ORDINAL_OF `INTEGER` and ARRAY_TO_STRING
`VARCHAR` NOT NULL (where ARRAY_OFFSET_OF is nullable), ARRAY_SLICE and LENGTH as nullable as
their argument, ARRAY_AGG and COUNT NOT NULL. So over a subquery, `col IS NULL` of such a
column is false even on a row where the value is null (`ARRAY_SLICE(ARRAY_AGG(x), 100, 101)`
past the end): Strata folds the same predicates.
Only these declared types are known here; anything else is taken as nullable (nothing folds).
"""

from __future__ import annotations

from sqlglot import exp

from strata.sql.sql_types import first_argument

# functions Druid declares NOT NULL whatever their arguments
_NEVER_NULL = frozenset({"ARRAY_ORDINAL_OF", "ARRAY_TO_STRING", "ARRAY_AGG", "COUNT"})
# functions as nullable as their (first) argument
_AS_FIRST_ARGUMENT = frozenset({"ARRAY_SLICE", "LENGTH", "CHAR_LENGTH", "STRLEN"})


def never_null(node: exp.Expr) -> bool:
    """Whether Druid's planner types `node` NOT NULL (as far as this module knows)."""
    while isinstance(node, (exp.Alias, exp.Paren)):
        node = node.this
    if isinstance(node, exp.Literal):
        return True
    if isinstance(node, exp.Count):
        return True
    name = _name(node)
    if name in _NEVER_NULL:
        return True
    if name in _AS_FIRST_ARGUMENT:
        first = first_argument(node)
        return first is not None and never_null(first)
    return False


def fold_null_tests(outer: exp.Select, inner: exp.Select) -> exp.Select:
    """`outer`, a SELECT over the subquery `inner`, with `c IS NULL` of each column `c` that
    `inner` gives a NOT NULL type made FALSE, as Druid's planner simplifies it."""
    names = {item.alias_or_name for item in inner.expressions if never_null(item)}
    if not names:
        return outer
    for test in list(outer.find_all(exp.Is)):
        column = test.this
        if isinstance(column, exp.Column) and column.name in names and isinstance(test.expression, exp.Null):
            test.replace(exp.false())
    return outer


# aggregates Druid types VARCHAR NOT NULL when their argument is neither a number nor a string
# (an ARRAY): `EarliestLatestAnySqlAggregator`'s return type inference
_PICKING_AGGREGATES = frozenset({"EARLIEST", "LATEST", "EARLIEST_BY", "LATEST_BY", "ANY_VALUE"})


def fold_having_null_tests(tree: exp.Expr) -> exp.Expr:
    """A copy of `tree` with each `agg(x) IS NULL` of a HAVING made FALSE where Druid types the aggregate NOT
    NULL: EARLIEST / LATEST / ANY_VALUE (and the _BY forms) of an ARRAY (`JSON_VALUE(..
    RETURNING VARCHAR ARRAY)`), which Druid types VARCHAR NOT NULL."""
    if tree.find(exp.Having) is None:
        return tree
    tree = tree.copy()
    for having in tree.find_all(exp.Having):
        for test in list(having.find_all(exp.Is)):
            if isinstance(test.expression, exp.Null) and _picks_from_an_array(test.this):
                test.replace(exp.false())
    return tree


def _picks_from_an_array(node: exp.Expr) -> bool:
    if _name(node) not in _PICKING_AGGREGATES and not isinstance(node, exp.AnyValue):
        return False
    first = first_argument(node)
    returning = first.args.get("returning") if isinstance(first, exp.JSONValue) else None
    return isinstance(returning, exp.DataType) and returning.is_type(exp.DataType.Type.ARRAY)


def _name(node: exp.Expr) -> str | None:
    if isinstance(node, exp.Anonymous):
        return str(node.this).upper()
    if isinstance(node, exp.ArrayAgg):
        return "ARRAY_AGG"
    if isinstance(node, exp.ArraySlice):
        return "ARRAY_SLICE"
    if isinstance(node, exp.Func):
        return node.sql_name().upper()
    return None
