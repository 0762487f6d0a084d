"""Druid's `expression` filter: rows where a native expression is true.

Truth is Druid's (a number other than 0, a string reading `true`); an expression that is null is
unknown, so it matches neither the filter nor its `not`, as in SQL-compatible null handling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import quote_ident
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.parser import Node, identifiers, parse_expression
from strata.query.expressions.typed import Typed, element_kind, truth
from strata.query.fields import get_str
from strata.query.filters.base import Filter, filter_type
from strata.query.filters.sql import VALUE, any_of


@dataclass(frozen=True, slots=True)
class ExpressionFilter(Filter):
    filter_type = "expression"
    expression: str
    tree: Node

    def to_sql(self, types: Mapping[str, str]) -> str:
        typed = compile_expression(self.tree, types)
        if not typed.multi:
            return truth(typed)
        # mapped over a multi-value row's values: true when one value is (unknown when none is
        # but one is unknown), as Druid's filters match multi-value rows
        return any_of(typed.sql, truth(Typed(quote_ident(VALUE), element_kind(typed.kind))))

    def columns(self) -> set[str]:
        return identifiers(self.tree)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "expression": self.expression}


@filter_type("expression")
def _parse_expression(obj: Mapping[str, Any]) -> Filter:
    text = get_str(obj, "expression", what="expression filter")
    tree = parse_expression(text)
    compile_expression(tree, {})  # functions and their literal arguments checked up front
    return ExpressionFilter(text, tree)
