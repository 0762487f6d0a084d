"""`FROM t CROSS JOIN UNNEST(expr) AS u(c)` (or `t, UNNEST(...)`) as Druid plans it: one native
query over an `unnest` dataSource whose virtual column is `expr`, so filters, grouping and
aggregation over the unnested column run on the data nodes.

Each UNNEST names its column `j<i>.unnest` in the native query; the statement's references to the
alias (`c`, `u.c`) read it, and `*` lists the table's columns then the unnested ones. UNNEST takes
an array: a VARCHAR column (a multi-value string too: unnest `MV_TO_ARRAY(col)`) or a
COMPLEX<json> column is refused with Druid's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp

from strata.query.errors import QueryUnsupported, TypeMismatch, invalid
from strata.sql.array_expressions import function_name
from strata.sql.column_types import is_array_type, planner_type
from strata.sql.expressions import ExpressionWriter, expression_kind
from strata.sql.filters import TIME, column_name, now_millis
from strata.sql.sql_types import is_boolean_array, star_name

# SQL functions whose value is an array (UNNEST takes them)
_ARRAY_VALUED = frozenset({
    "ARRAY", "MV_TO_ARRAY", "ARRAY_APPEND", "ARRAY_PREPEND", "ARRAY_CONCAT", "ARRAY_SLICE",
    "STRING_TO_ARRAY", "JSON_QUERY_ARRAY", "JSON_KEYS", "JSON_PATHS",
})  # fmt: skip
_SQL_TYPES = {"STRING": "VARCHAR", "LONG": "BIGINT", "DOUBLE": "DOUBLE", "FLOAT": "FLOAT"}


def unnest_joins(select: exp.Select) -> list[exp.Join] | None:
    """The SELECT's joins when every one is a cross join with UNNEST (None otherwise)."""
    joins = select.args.get("joins") or []
    if not joins:
        return None
    for join in joins:
        if not isinstance(join.this, exp.Unnest) or join.args.get("on") or join.args.get("using"):
            return None
        if (join.side or "") or (join.kind or "CROSS").upper() not in ("CROSS", ""):
            return None
    return list(joins)


def plan_unnest(
    select: exp.Select, joins: list[exp.Join], table: str, columns: Mapping[str, str]
) -> tuple[exp.Select, dict[str, Any], dict[str, str]]:
    """(the SELECT over the unnest dataSource, that dataSource, the columns it has)."""
    writer = ExpressionWriter(now_millis())
    types = {name: planner_type(kind) for name, kind in columns.items()}
    source: Any = table
    renames: dict[str, str] = {}
    added: list[tuple[str, str]] = []  # (alias, native name)
    for i, join in enumerate(joins):
        unnest = join.this
        if len(unnest.expressions) != 1:
            raise QueryUnsupported(
                "UNNEST of several arrays at once is not supported; unnest them one by one"
            )
        argument = _renamed(unnest.expressions[0], renames)
        _check_array(argument, types)
        text = writer.write(argument)
        kind = expression_kind(text, types)
        element = kind[len("ARRAY<") : -1] if kind.startswith("ARRAY<") else kind
        name = f"j{i}.unnest"
        source = {
            "type": "unnest",
            "base": source if isinstance(source, dict) else {"type": "table", "name": source},
            "virtualColumn": {"type": "expression", "name": name, "expression": text, "outputType": kind},
        }
        alias = unnest.args.get("alias")
        column_aliases = alias.columns if alias is not None else []
        label = column_aliases[0].name if column_aliases else (alias.name if alias is not None else "EXPR$0")
        table_alias = alias.name if alias is not None and column_aliases else None
        renames[label] = name
        if table_alias:
            renames[f"{table_alias}.{label}"] = name
        types[name] = element
        added.append((label, name))
    rewritten = _rewrite_select(select, renames, list(columns), added)
    return rewritten, source, {**dict(columns), **{name: types[name] for _, name in added}}


def boolean_elements(joins: list[exp.Join]) -> set[str]:
    """The native columns (`j<i>.unnest`) of the UNNESTs whose elements Druid SQL types BOOLEAN: of
    a BOOLEAN ARRAY (`JSON_VALUE(.. RETURNING BOOLEAN ARRAY)`, an ARRAY of TRUE/FALSE, a cast to
    BOOLEAN ARRAY). The native values are 1/0; the SQL answer prints them true/false."""
    out = set()
    for i, join in enumerate(joins):
        arguments = join.this.expressions
        if len(arguments) == 1 and is_boolean_array(arguments[0]):
            out.add(f"j{i}.unnest")
    return out


def _check_array(node: exp.Expr, types: Mapping[str, str]) -> None:
    """UNNEST takes arrays: Druid refuses a VARCHAR (or COMPLEX<json>) with its message, and an
    argument naming a column the table does not have (a select item's alias is none)."""
    for column in node.find_all(exp.Column):
        if column.name != TIME and column.name not in types:
            raise invalid("Column '%s' not found in any table", column.name)
    col = column_name(node)
    if col is not None:
        kind = TIME if col == TIME else types.get(col)
        if kind is None:
            raise invalid("Column '%s' not found in any table", col)
        if not is_array_type(kind):
            shown = "COMPLEX<JSON>" if kind == "COMPLEX<json>" else _SQL_TYPES.get(kind, "TIMESTAMP(3)")
            raise TypeMismatch(f"Cannot apply 'UNNEST' to arguments of type 'UNNEST(<{shown}>)'")
        return
    name = function_name(node)
    if (
        name in _ARRAY_VALUED
        or isinstance(node, exp.Array)
        or (isinstance(node, exp.JSONValue) and _returns_array(node))
    ):
        return
    if isinstance(node, exp.Cast) and node.to.is_type("array"):
        return
    raise TypeMismatch(f"Cannot apply 'UNNEST' to arguments of type 'UNNEST(<{node.sql(dialect='druid')}>)'")


def _returns_array(node: exp.JSONValue) -> bool:
    returning = node.args.get("returning")
    return isinstance(returning, exp.DataType) and returning.is_type("array")


def _renamed(node: exp.Expr, renames: Mapping[str, str]) -> exp.Expr:
    """`node` with references to earlier UNNEST aliases reading their native columns."""

    def swap(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column):
            key = f"{n.table}.{n.name}" if n.table else n.name
            target = renames.get(key) or (renames.get(n.name) if not n.table else None)
            if target is not None:
                return exp.column(target, quoted=True)
        return n

    return node.copy().transform(swap)


def _rewrite_select(
    select: exp.Select, renames: Mapping[str, str], table_columns: list[str], added: list[tuple[str, str]]
) -> exp.Select:
    """The SELECT reading one table: the joins gone, UNNEST aliases read as native columns (a bare
    select item keeps its name), `*` listing the table's columns then the unnested ones, each named
    apart from the items before it as Calcite's expansion of `*` names them (`u(s_int)` beside the
    table's `s_int` is `s_int0`: what a subquery's `SELECT *` hands its outer query)."""
    out = select.copy()
    out.set("joins", None)
    items: list[exp.Expr] = []
    used: set[str] = set()
    for item in out.expressions:
        if isinstance(item, exp.Star):
            starred = [(c, c) for c in table_columns] + added
            for label, native in starred:
                name = star_name(label, used)
                column = exp.column(native, quoted=True)
                items.append(column if name == native else exp.alias_(column, name, quoted=True))
            continue
        used.add(item.alias_or_name)
        if isinstance(item, exp.Column) and _target(item, renames) is not None:
            items.append(exp.alias_(_renamed(item, renames), item.name, quoted=True))
        elif isinstance(item, exp.Alias):
            items.append(exp.alias_(_renamed(item.this, renames), item.alias, quoted=True))
        else:
            items.append(_renamed(item, renames))
    out.set("expressions", items)
    for key in ("where", "group", "having", "order", "qualify"):
        part = out.args.get(key)
        if part is not None:
            out.set(key, _renamed(part, renames))
    return out


def _target(column: exp.Column, renames: Mapping[str, str]) -> str | None:
    key = f"{column.table}.{column.name}" if column.table else column.name
    return renames.get(key) or (renames.get(column.name) if not column.table else None)
