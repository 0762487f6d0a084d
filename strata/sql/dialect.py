"""The SQL dialect Strata parses: sqlglot's Druid dialect, with Druid's case-sensitive names.

Druid (through Calcite) keeps identifiers as written, quoted or not: `Page` and `page` are two
columns. sqlglot's Druid dialect lowercases unquoted names, which would break qualification
against the catalog, so the strategy is overridden here. Parsing of Druid's own functions is
extended here too, so every module reads statements the same way:

- `TIMESTAMPADD(unit, count, ts)` and `TIMESTAMPDIFF(unit, t1, t2)` take a bare time unit first
  (sqlglot read the unit as a column); they become `TimestampAdd(this=ts, expression=count)` and
  `TimestampDiff(this=t2, expression=t1)` with the unit as a `Var`.
- `POSITION(sub IN expr FROM start)` keeps its start position.
- `PI` is Calcite's niladic function, not a column.
- `ANY_VALUE(expr, maxBytes[, aggregateMultipleValues])` and `DIV(x, y)` keep all their arguments
  (as `Anonymous` calls, which the native planner reads by name).
- `x < y IS NULL` is `(x < y) IS NULL`: Calcite's `IS [NOT] NULL/TRUE/FALSE` binds looser than
  every comparison (precedence 28 below their 30), where sqlglot's default binds it to `y`.
- `ARRAY_AGG([DISTINCT] expr, size)` keeps its size in bytes (a literal, in the node's
  `meta["size"]`), which sqlglot dropped; `STRING_AGG`'s third argument is its size too (sqlglot
  files it as `on_overflow`).
- A bracket that starts an operand (`[1, 2]`, `{'a': 1}`: DuckDB's list and struct literals) is a
  syntax error, as in Calcite's parser, which knows only `ARRAY[...]`, `MAP[...]` and subscripts:
  a statement Druid refuses is never answered here. JDBC's `{fn ...}` escapes, which the tokenizer
  reads apart, stay (sqlglot's Druid dialect has no `{d '...'}` literals to keep).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import NormalizationStrategy
from sqlglot.dialects.druid import Druid
from sqlglot.generators.druid import DruidGenerator
from sqlglot.parser import IsPredicatePrecedence
from sqlglot.parsers.druid import DruidParser
from sqlglot.tokenizer_core import TokenType
from sqlglot.tokens import Tokenizer as BaseTokenizer


def _unit(parser: Any) -> exp.Var:
    token = parser._curr
    if token is None or token.token_type not in (TokenType.VAR, *parser.ID_VAR_TOKENS):
        parser.raise_error("Expected a time unit")
    parser._advance()
    return exp.var(token.text.upper())


def _unit_call(node_type: type[exp.Expr]) -> Any:
    """`FN(unit, a, b)` as `node_type(this=b, expression=a, unit=unit)`."""

    def parse(parser: Any) -> exp.Expr:
        unit = _unit(parser)
        parser._match(TokenType.COMMA)
        first = parser._parse_bitwise()
        parser._match(TokenType.COMMA)
        return node_type(this=parser._parse_bitwise(), expression=first, unit=unit)

    return parse


def _position(parser: Any) -> exp.Expr:
    needle = parser._parse_bitwise()
    if parser._match(TokenType.IN):
        haystack = parser._parse_bitwise()
        start = parser._parse_bitwise() if parser._match(TokenType.FROM) else None
        return exp.StrPosition(this=haystack, substr=needle, position=start)
    args = [needle]
    while parser._match(TokenType.COMMA):
        args.append(parser._parse_bitwise())
    return exp.StrPosition(this=args[1] if len(args) > 1 else None, substr=needle, position=None)


def _pi(parser: Any) -> exp.Expr:
    if parser._match_pair(TokenType.L_PAREN, TokenType.R_PAREN):  # PI() reads as PI
        pass
    return exp.Anonymous(this="PI", expressions=[])


def _array_agg(args: list[exp.Expr]) -> exp.Expr:
    first = args[0]
    size = args[1] if len(args) > 1 else None
    if isinstance(first, exp.Distinct) and len(first.expressions) > 1:  # DISTINCT x, size
        first, size = exp.Distinct(expressions=[first.expressions[0]]), first.expressions[1]
    node = exp.ArrayAgg(this=first)
    if size is not None:
        node.meta["size"] = size  # sqlglot's ArrayAgg has no argument for it
    return node


_LITERAL_BRACKETS = frozenset([TokenType.L_BRACKET, TokenType.L_BRACE])


def _any_value(args: list[exp.Expr]) -> exp.Expr:
    if len(args) == 1:
        return exp.AnyValue(this=args[0])
    return exp.Anonymous(this="ANY_VALUE", expressions=args)


class DruidSQL(Druid):
    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE

    class Tokenizer(BaseTokenizer):
        # `DIV` is a function in Druid, not MySQL's integer-division operator
        KEYWORDS = {k: v for k, v in BaseTokenizer.KEYWORDS.items() if k != "DIV"}

    class Parser(DruidParser):
        IS_PREDICATE_PRECEDENCE = IsPredicatePrecedence.LOW
        FUNCTIONS = {
            **DruidParser.FUNCTIONS,
            "ANY_VALUE": _any_value,
            "ARRAY_AGG": _array_agg,
            "DIV": lambda args: exp.Anonymous(this="DIV", expressions=args),
        }
        FUNCTION_PARSERS = {
            **DruidParser.FUNCTION_PARSERS,
            "TIMESTAMPADD": _unit_call(exp.TimestampAdd),
            "TIMESTAMPDIFF": _unit_call(exp.TimestampDiff),
            "POSITION": _position,
        }
        NO_PAREN_FUNCTION_PARSERS = {
            **DruidParser.NO_PAREN_FUNCTION_PARSERS,
            "PI": lambda self: _pi(self),
        }

        def _parse_bracket(self, this: exp.Expr | None = None) -> exp.Expr | None:
            opening = self._curr
            if this is None and opening is not None and opening.token_type in _LITERAL_BRACKETS:
                self.raise_error(f"Received an unexpected token [{opening.text}]", opening)
            return super()._parse_bracket(this)

    class Generator(DruidGenerator):
        TRANSFORMS = {
            **DruidGenerator.TRANSFORMS,
            exp.TimestampAdd: lambda self, e: self.func(
                "TIMESTAMPADD", e.args.get("unit"), e.expression, e.this
            ),
            exp.TimestampDiff: lambda self, e: self.func(
                "TIMESTAMPDIFF", e.args.get("unit"), e.expression, e.this
            ),
            exp.StrPosition: lambda self, e: (
                self.func("STRPOS", e.this, e.args.get("substr"))
                if e.args.get("position") is None
                else f"POSITION({self.sql(e, 'substr')} IN {self.sql(e, 'this')} "
                f"FROM {self.sql(e, 'position')})"
            ),
        }


DIALECT = DruidSQL()
