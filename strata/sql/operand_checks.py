"""The operand type checks of Druid's SQL validator: a statement whose operand types Druid refuses
gets Druid's 400 (`Cannot apply 'EXP' to arguments of type 'EXP(<BIGINT ARRAY>)'. Supported
form(s): 'EXP(<NUMERIC>)'`) before it is planned, instead of an answer Druid never gives.

Druid validates with Calcite: each operator has an operand type checker, with implicit casts
between strings and numbers (`ABS(c_varchar)` is valid). What it refuses, and what these checks
refuse, is an ARRAY or a nested JSON (`COMPLEX<JSON>`) value where a scalar is expected (numeric,
string and time functions, arithmetic, comparisons), a scalar where an array is expected (ARRAY_
and MV_ functions; a string counts as a multi-value string there), and an array as an array's
element. Types come from the catalog's column types through every FROM source (tables, subqueries,
WITH, UNNEST aliases, joins); an operand whose type is not known is never refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sqlglot import exp

from strata.query.errors import TypeMismatch
from strata.sql.functions import druid_name
from strata.sql.operand_rules import RULES, Rule, result_type
from strata.sql.operand_types import BOOLEAN, SqlType, of_data_type, of_druid, of_literal, shown

log = logging.getLogger(__name__)
Columns = Callable[[str], Mapping[str, str] | None]


@dataclass
class Scope:
    """The columns a SELECT's expressions can name: per source alias, and the enclosing scope."""

    sources: dict[str, dict[str, SqlType | None]] = field(default_factory=dict)
    outer: Scope | None = None
    aliases: dict[str, SqlType | None] = field(default_factory=dict)

    def lookup(self, column: exp.Column) -> SqlType | None:
        name, table = column.name, column.table
        if table:
            if table in self.sources:
                return self.sources[table].get(name)
        else:
            found = [cols[name] for cols in self.sources.values() if name in cols]
            if len(found) == 1:
                return found[0]
            if not found and name in self.aliases:
                return self.aliases[name]
            if found:
                return None
        return self.outer.lookup(column) if self.outer is not None else None


def check_operand_types(tree: exp.Expr, columns: Columns) -> None:
    """Raise Druid's `Cannot apply ...` 400 for the first call whose operand types it refuses.

    A shape the checks do not follow is let through (the planner reports what is wrong with it):
    they must never refuse a statement Druid runs."""
    try:
        _Checker(columns).query(tree, None, {})
    except (KeyError, AttributeError, IndexError, TypeError, ValueError):
        log.warning("operand type checks skipped a statement they could not follow", exc_info=True)


def walk_calls(tree: exp.Expr, columns: Columns, on_call: OnCall) -> None:
    """Type `tree` as the checks do, calling `on_call` for each call, innermost first (it may
    replace the call's operands). Raises what a shape the walk does not follow raises."""
    _Checker(columns, on_call).query(tree, None, {})


Ctes = Mapping[str, dict[str, SqlType | None]]


# called with each call's node, Druid name, operands and their types once the operands are checked
OnCall = Callable[[exp.Expr, str, Sequence[exp.Expr], Sequence[SqlType | None]], None]


class _Checker:
    def __init__(self, columns: Columns, on_call: OnCall | None = None) -> None:
        self.columns = columns
        self.on_call = on_call
        self.typed: dict[int, SqlType | None] = {}  # id of a node -> its type, once checked

    def query(self, node: exp.Expr, outer: Scope | None, ctes: Ctes) -> dict[str, SqlType | None]:
        """Check a query; its output columns' types."""
        with_ = node.args.get("with_") or node.args.get("with")
        if isinstance(with_, exp.With):
            ctes = dict(ctes)
            for cte in with_.expressions:
                ctes[cte.alias_or_name] = self.query(cte.this, outer, ctes)
        if isinstance(node, exp.Subquery):
            return self.query(node.this, outer, ctes)
        if isinstance(node, exp.SetOperation):
            left = self.query(node.this, outer, ctes)
            self.query(node.expression, outer, ctes)
            return left
        if not isinstance(node, exp.Select):
            return {}
        scope = Scope(outer=outer)
        sources = [node.args.get("from_") or node.args.get("from"), *(node.args.get("joins") or [])]
        for source in sources:
            if source is not None:
                self.source(source.this, scope, ctes)
        for join in node.args.get("joins") or []:
            if join.args.get("on") is not None:
                self.expr(join.args["on"], scope, ctes)
                _check_join_keys(join.args["on"], scope, every_equality=True)
        tables = [s for s in sources if s is not None and not isinstance(s.this, exp.Unnest)]
        if len(tables) > 1 and node.args.get("where") is not None:
            _check_join_keys(node.args["where"].this, scope, every_equality=False)
        # in Calcite's order: WHERE, GROUP BY, HAVING, then the select list, then ORDER BY
        for key in ("where", "group", "having", "qualify"):
            clause = node.args.get(key)
            if clause is not None:
                for part in clause.expressions if key == "group" else [clause.this]:
                    self.expr(part, scope, ctes)
        out: dict[str, SqlType | None] = {}
        for item in node.expressions:
            if isinstance(item, exp.Star):
                for cols in scope.sources.values():
                    out.update(cols)
                continue
            kind = self.expr(item.this if isinstance(item, exp.Alias) else item, scope, ctes)
            out[item.alias_or_name] = kind
        scope.aliases = out
        order = node.args.get("order")
        if order is not None:
            for ordered in order.expressions:
                self.expr(ordered.this, scope, ctes)
        return out

    def source(self, source: exp.Expr, scope: Scope, ctes: Ctes) -> None:
        alias = source.alias_or_name
        if isinstance(source, exp.Table):
            if not source.db and source.name in ctes:
                scope.sources[alias] = dict(ctes[source.name])
                return
            known = self.columns(source.name) if (source.db or "druid").lower() == "druid" else None
            scope.sources[alias] = {
                name: of_druid(kind, name) for name, kind in (known or {}).items()
            } or _UNKNOWN
            return
        if isinstance(source, exp.Subquery):
            scope.sources[alias] = self.query(source.this, scope.outer, ctes)
            return
        if isinstance(source, exp.Unnest):
            kinds = [self.expr(e, scope, ctes) for e in source.expressions]
            table_alias = source.args.get("alias")
            names = [c.name for c in table_alias.columns] if isinstance(table_alias, exp.TableAlias) else []
            scope.sources[alias or "unnest"] = {
                name: _element(kind) for name, kind in zip(names, kinds, strict=False)
            }
            return
        scope.sources[alias or f"source{len(scope.sources)}"] = _UNKNOWN

    def expr(self, node: exp.Expr, scope: Scope, ctes: Ctes) -> SqlType | None:
        """The node's type, its operands checked first (innermost call refused first)."""
        kind = self._expr(node, scope, ctes)
        self.typed[id(node)] = kind
        return kind

    def _expr(self, node: exp.Expr, scope: Scope, ctes: Ctes) -> SqlType | None:
        if isinstance(node, (exp.Subquery, exp.Query)):
            outputs = self.query(node, scope, ctes)
            return next(iter(outputs.values())) if len(outputs) == 1 else None
        if isinstance(node, exp.Column):
            return scope.lookup(node)
        if isinstance(node, (exp.Literal, exp.Null, exp.Boolean)):
            return of_literal(node)
        if isinstance(node, (exp.Paren, exp.Alias)):
            return self.expr(node.this, scope, ctes)
        operands = _operands(node)
        kinds = [self.expr(o, scope, ctes) for o in operands]
        if isinstance(node, exp.In):
            if node.args.get("query") is not None:
                _check_in_subquery(kinds[0])
            return BOOLEAN
        if isinstance(node, exp.Cast):
            target = of_data_type(node.to)
            _check_cast(kinds[0], target)
            return target
        if isinstance(node, exp.Nullif):  # Calcite's CASE WHEN a = b THEN NULL ELSE a
            _apply(RULES["="], "=", node, kinds[:2])
        if isinstance(node, exp.Case) and node.this is not None:  # CASE a WHEN b: a = b
            for when in node.args.get("ifs") or []:
                _apply(RULES["="], "=", node, [kinds[0], self.typed.get(id(when.this))])
        if isinstance(node, exp.JSONValue):
            returning = node.args.get("returning")
            return of_data_type(returning) if isinstance(returning, exp.DataType) else SqlType("VARCHAR")
        name = _OPERATORS.get(type(node)) or druid_name(node)
        if isinstance(node, (exp.Floor, exp.Ceil)) and node.args.get("to") is not None:
            name = f"{name} TO"
        if name is None:
            return None
        if self.on_call is not None:
            self.on_call(node, name, operands, kinds)
        rule = RULES.get(name)
        if rule is not None:
            _apply(rule, name, node, kinds)
        if name == "COALESCE":
            _check_common_type(kinds)
        return result_type(name, kinds)


_UNKNOWN: dict[str, SqlType | None] = {}


def _element(kind: SqlType | None) -> SqlType | None:
    if kind is None:
        return None
    if kind.element is not None:
        return kind.element
    return kind if kind.is_string else None


def _operands(node: exp.Expr) -> list[exp.Expr]:
    """A call's operands in the order Druid's signature lists them."""
    if isinstance(node, exp.Between):
        return [node.this, node.args["low"], node.args["high"]]
    if isinstance(node, (exp.TimestampAdd, exp.TimestampDiff)):
        return [node.expression, node.this]
    if isinstance(node, (exp.Extract, exp.DateTrunc)):
        return [node.expression] if isinstance(node, exp.Extract) else [node.this]
    out: list[exp.Expr] = []
    for key, value in node.args.items():
        if key in ("to", "returning", "unit", "alias", "position") and not isinstance(node, exp.Substring):
            continue
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, exp.Expr) and not isinstance(child, (exp.DataType, exp.Var)):
                out.extend(child.expressions if isinstance(child, exp.Distinct) else [child])
    return out


_OPERATORS: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "<>",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Like: "LIKE",
    exp.Between: "BETWEEN ASYMMETRIC",
    exp.DPipe: "||",
}


def _check_join_keys(condition: exp.Expr, scope: Scope, *, every_equality: bool) -> None:
    """Druid joins on scalar keys: an equality of ARRAY or nested JSON values between two sources
    (in ON, or in WHERE between columns of two tables) is refused."""
    for eq in condition.find_all(exp.EQ):
        left, right = eq.this, eq.expression
        if not every_equality and not (
            isinstance(left, exp.Column) and isinstance(right, exp.Column) and left.table != right.table
        ):
            continue
        for side in (left, right):
            kind = scope.lookup(side) if isinstance(side, exp.Column) else None
            if kind is not None and (kind.is_array or kind.is_json):
                raise TypeMismatch(
                    f"Cannot join on values of type [{kind}]: join conditions do not support "
                    "ARRAY or COMPLEX<JSON> keys"
                )


def _check_in_subquery(kind: SqlType | None) -> None:
    """Druid plans `x IN (SELECT ...)` as a join on `x`: an ARRAY or nested JSON `x` is refused."""
    if kind is not None and (kind.is_array or kind.is_json):
        raise TypeMismatch(  # Druid's words for the join it plans ("Cannot join")
            f"Cannot join an IN (subquery) on values of type [{kind}]: "
            "joins on ARRAY or COMPLEX<JSON> values are not supported"
        )


def _check_cast(source: SqlType | None, target: SqlType | None) -> None:
    """An ARRAY or nested JSON value cast to a scalar type, as Calcite's cast rules refuse."""
    if source is None or target is None or source.name == "NULL":
        return
    if (source.is_array and not target.is_array) or (target.is_array and source.is_json):
        raise TypeMismatch(f"Cast function cannot convert value of type {source} to type {target}")


def _check_common_type(kinds: Sequence[SqlType | None]) -> None:
    """COALESCE (NVL too) needs a type all its operands have in common (Calcite's least restrictive
    type): arrays of BOOLEAN beside arrays of numbers have none."""
    elements = {k.element for k in kinds if k is not None and k.element is not None}
    if any(e.name == "BOOLEAN" for e in elements) and any(e.is_numeric for e in elements):
        raise TypeMismatch("Illegal mixing of types in CASE or COALESCE statement")


def _apply(rule: Rule, name: str, node: exp.Expr, kinds: Sequence[SqlType | None]) -> None:
    refused = rule.refuses(kinds)
    if not refused:
        return
    shown_name = rule.shown or name
    if isinstance(node, (exp.Like, exp.Between)) and isinstance(node.parent, exp.Not):
        shown_name = f"NOT {shown_name}"  # `x NOT LIKE p`, `x NOT BETWEEN a AND b`
    if rule.form == "binary":
        args = f" {shown_name} ".join(shown(k) for k in kinds[:2])
    elif rule.form == "between":
        args = f"{shown(kinds[0])} {shown_name} {shown(kinds[1])} AND {shown(kinds[2])}"
    else:
        args = f"{shown_name}({', '.join(shown(k) for k in kinds)})"
    message = (
        f"Cannot apply '{shown_name}' to arguments of type '{args}'. Supported form(s): {rule.supported}"
    )
    raise TypeMismatch(rule.message or message)


Form = Literal["call", "binary", "between"]
