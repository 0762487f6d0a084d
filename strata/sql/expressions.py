"""SQL scalar expressions as Druid native expressions, as Druid's planner writes them.

A SQL expression that is more than a column (`UPPER(page)`, `added - deleted`,
`TIME_FLOOR(__time, 'PT1H')`, `CASE ...`) becomes an expression virtual column, an `expression`
filter or the input of an aggregator. Timestamps are epoch milliseconds in both languages, so
`TIMESTAMP '...'` literals become numbers and `MILLIS_TO_TIMESTAMP` disappears. SQL positions are
1-based where Druid's functions are 0-based; the translation adjusts them.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Callable, Mapping
from typing import Any

from sqlglot import exp

from strata.query.errors import QueryUnsupported
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.parser import parse_expression
from strata.sql.array_expressions import function_name, write_function
from strata.sql.filters import TIME, column_name, interval_ms, literal, timestamp_ms
from strata.sql.session import current_zone, current_zone_info
from strata.sql.sql_types import DATE, TIMESTAMP, sql_type

_DUCK = {
    "STRING": "VARCHAR",
    "LONG": "BIGINT",
    "DOUBLE": "DOUBLE",
    "FLOAT": "FLOAT",
    "ARRAY<STRING>": "VARCHAR[]",
    "ARRAY<LONG>": "BIGINT[]",
    "ARRAY<DOUBLE>": "DOUBLE[]",
    "COMPLEX<json>": "JSON",
}
FLOOR_UNITS = {
    "SECOND": "PT1S",
    "MINUTE": "PT1M",
    "HOUR": "PT1H",
    "DAY": "P1D",
    "WEEK": "P1W",
    "MONTH": "P1M",
    "QUARTER": "P3M",
    "YEAR": "P1Y",
}
_BINARY: dict[type[exp.Expr], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.EQ: "==",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.And: "&&",
    exp.Or: "||",
}
_COMPARISONS = frozenset({"==", "!=", ">", ">=", "<", "<="})
_SIMPLE: dict[type[exp.Expr], str] = {
    exp.Lower: "lower",
    exp.Upper: "upper",
    exp.Length: "strlen",
    exp.Abs: "abs",
    exp.Sqrt: "sqrt",
    exp.Exp: "exp",
    exp.Ln: "log",
}
_NAMED = {
    "LOWER": "lower",
    "UPPER": "upper",
    "CHAR_LENGTH": "strlen",
    "CHARACTER_LENGTH": "strlen",
    "STRLEN": "strlen",
    "REVERSE": "reverse",
    "REPEAT": "repeat",
    "LPAD": "lpad",
    "RPAD": "rpad",
    "REPLACE": "replace",
    "LOG10": "log10",
    "POWER": "pow",
    "POW": "pow",
    "ROUND": "round",
    "CONTAINS_STRING": "contains_string",
    "ICONTAINS_STRING": "icontains_string",
    "REGEXP_EXTRACT": "regexp_extract",
    "LOOKUP": "lookup",
    "REGEXP_LIKE": "regexp_like",
    "NVL": "nvl",
    "GREATEST": "greatest",
    "LEAST": "least",
    "TIME_FLOOR": "timestamp_floor",
    "TIME_CEIL": "timestamp_ceil",
    "TIME_SHIFT": "timestamp_shift",
    "TIME_EXTRACT": "timestamp_extract",
    "TIME_FORMAT": "timestamp_format",
    "TIME_PARSE": "timestamp_parse",
    "DIV": "div",
}
# position of the time zone argument of the time functions: it defaults to sqlTimeZone
_ZONE_ARGUMENT = {
    "timestamp_floor": 3,
    "timestamp_ceil": 3,
    "timestamp_shift": 3,
    "timestamp_extract": 2,
    "timestamp_format": 2,
    "timestamp_parse": 2,
}
_TIME_RESULT = {"timestamp_floor", "timestamp_ceil", "timestamp_shift", "timestamp_parse"}


def _zone() -> str:
    return string_literal(current_zone() or "UTC")


def quote(name: str) -> str:
    return json.dumps(name)


def string_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class ExpressionWriter:
    """Translates sqlglot trees; `now_ms` fixes CURRENT_TIMESTAMP for the whole statement."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def write(self, node: exp.Expr) -> str:
        handler = self._handler(node)
        return handler(node)

    def _handler(self, node: exp.Expr) -> Callable[[Any], str]:
        if isinstance(node, exp.Paren):
            return lambda n: self.write(n.this)
        if function_name(node) is not None:  # ARRAY_, MV_ and JSON_ functions
            return lambda n: write_function(n, self._argument)
        if column_name(node) is not None and not isinstance(node, exp.Cast):
            return lambda n: quote(n.name)
        if isinstance(node, (exp.Add, exp.Sub)) and isinstance(node.expression, exp.Interval):
            return self._shift_interval
        op = _BINARY.get(type(node))
        if op is not None:
            return functools.partial(self._binary, op)
        simple = _SIMPLE.get(type(node))
        if simple is not None:
            return functools.partial(self._unary_function, simple)
        handlers: dict[type, Callable[[Any], str]] = {
            exp.Literal: self._literal,
            exp.Null: lambda n: "null",
            exp.Boolean: lambda n: "1" if n.this else "0",
            exp.Neg: lambda n: f"(-{self.write(n.this)})",
            exp.Not: lambda n: f"(!{self.write(n.this)})",
            exp.DPipe: lambda n: f"concat({self.write(n.this)}, {self.write(n.expression)})",
            exp.Concat: lambda n: "concat(" + ", ".join(self.write(a) for a in n.expressions) + ")",
            exp.Is: self._is,
            exp.Case: self._case,
            exp.If: self._if,
            exp.Coalesce: self._coalesce,
            exp.Nullif: lambda n: self._nullif(n.this, n.expression),
            exp.Cast: self._cast,
            exp.TryCast: self._cast,
            exp.Substring: self._substring,
            exp.StrPosition: self._strpos,
            exp.Like: self._like,
            exp.Trim: self._trim,
            exp.Floor: self._floor,
            exp.Ceil: self._floor,
            exp.TimestampTrunc: self._date_trunc,
            exp.DateTrunc: self._date_trunc,
            exp.Extract: self._extract,
            exp.CurrentTimestamp: lambda n: str(self.now_ms),
            exp.Between: self._between,
            exp.In: self._in,
            exp.Mod: lambda n: f"({self.write(n.this)} % {self.write(n.expression)})",
            exp.Pow: lambda n: f"pow({self.write(n.this)}, {self.write(n.expression)})",
            exp.Round: self._round,
            exp.Left: lambda n: f"left({self.write(n.this)}, {self.write(n.expression)})",
            exp.Right: lambda n: f"right({self.write(n.this)}, {self.write(n.expression)})",
            exp.RegexpLike: lambda n: f"regexp_like({self.write(n.this)}, {self.write(n.expression)})",
            exp.RegexpExtract: self._regexp_extract,
            exp.Anonymous: self._anonymous,
        }
        handler = handlers.get(type(node))
        if handler is not None:
            return handler
        if isinstance(node, exp.Func):
            return self._named_function
        raise QueryUnsupported(f"Expression [{node.sql(dialect='druid')}] is not supported")

    # -- leaves and operators ---------------------------------------------------------------------
    def _binary(self, op: str, node: exp.Expr) -> str:
        left, right = node.this, node.expression
        if op in _COMPARISONS:  # a string compared with a timestamp is one (Calcite casts it)
            return f"({self._compared(left, right)} {op} {self._compared(right, left)})"
        return f"({self.write(left)} {op} {self.write(right)})"

    def _compared(self, node: exp.Expr, other: exp.Expr) -> str:
        if self._is_string(node) and sql_type(other) in (TIMESTAMP, DATE):
            return str(timestamp_ms(literal(node, self.now_ms)))
        return self.write(node)

    def _unary_function(self, fn: str, node: exp.Expr) -> str:
        return f"{fn}({self.write(node.this)})"

    def _literal(self, node: exp.Literal) -> str:
        if node.is_string:
            return string_literal(node.this)
        return str(literal(node, self.now_ms))

    def _is(self, node: exp.Is) -> str:
        if isinstance(node.expression, exp.Null):
            return f"isnull({self.write(node.this)})"
        if isinstance(node.expression, exp.Boolean):  # never unknown: `null IS TRUE` is false
            truth = self.write(node.this)
            return f"nvl(({truth} == {1 if node.expression.this else 0}), 0)"
        raise QueryUnsupported(f"[{node.sql(dialect='druid')}] is not supported")

    def _case(self, node: exp.Case) -> str:
        parts: list[str] = []
        subject = node.this
        for when in node.args.get("ifs") or []:
            parts += [self.write(when.this), self.write(when.args["true"])]
        default = node.args.get("default")
        if default is not None:
            parts.append(self.write(default))
        if subject is not None:
            return f"case_simple({self.write(subject)}, {', '.join(parts)})"
        return f"case_searched({', '.join(parts)})"

    def _if(self, node: exp.If) -> str:
        other = node.args.get("false")
        return (
            f"if({self.write(node.this)}, {self.write(node.args['true'])}, "
            f"{'null' if other is None else self.write(other)})"
        )

    def _coalesce(self, node: exp.Coalesce) -> str:
        args = [node.this, *node.expressions]
        out = self.write(args[-1])
        for arg in reversed(args[:-1]):
            out = f"nvl({self.write(arg)}, {out})"
        return out

    def _nullif(self, a: exp.Expr, b: exp.Expr) -> str:
        left = self.write(a)
        return f"case_searched(({left} == {self.write(b)}), null, {left})"

    def _cast(self, node: exp.Cast) -> str:
        inner = node.this
        if node.to.is_type("timestamp", "timestamptz", "date"):
            if isinstance(inner, exp.Literal):
                value = timestamp_ms(literal(inner, self.now_ms))
                return str(value if not node.to.is_type("date") else _day_start(value))
            if column_name(inner) == TIME:
                text = quote(TIME)
            else:
                text = self.write(inner)
                text = f"timestamp_parse({text})" if self._is_string(inner) else text
            return f"timestamp_floor({text}, 'P1D', null, {_zone()})" if node.to.is_type("date") else text
        if node.to.is_type(*exp.DataType.INTEGER_TYPES):
            return f"cast({self.write(inner)}, 'LONG')"
        if node.to.is_type(*exp.DataType.REAL_TYPES):
            return f"cast({self.write(inner)}, 'DOUBLE')"
        if node.to.is_type(*exp.DataType.TEXT_TYPES):
            kind = sql_type(inner)
            if kind in (TIMESTAMP, DATE):  # Druid prints the instant in the zone, as SQL text
                pattern = "yyyy-MM-dd HH:mm:ss" if kind == TIMESTAMP else "yyyy-MM-dd"
                return f"timestamp_format({self.write(inner)}, '{pattern}', {_zone()})"
            return f"cast({self.write(inner)}, 'STRING')"
        raise QueryUnsupported(f"CAST to [{node.to.sql(dialect='druid')}] is not supported")

    def _is_string(self, node: exp.Expr) -> bool:
        return isinstance(node, exp.Literal) and node.is_string

    def _substring(self, node: exp.Substring) -> str:
        start = node.args.get("start")
        length = node.args.get("length")
        text = self.write(node.this)
        begin = "0" if start is None else f"({self.write(start)} - 1)"
        if length is None:
            return f"substring({text}, {begin}, -1)"
        return f"substring({text}, {begin}, {self.write(length)})"

    def _strpos(self, node: exp.StrPosition) -> str:
        return f"(strpos({self.write(node.this)}, {self.write(node.args['substr'])}) + 1)"

    def _like(self, node: exp.Like) -> str:
        return f"like({self.write(node.this)}, {self.write(node.expression)})"

    def _trim(self, node: exp.Trim) -> str:
        position = (node.args.get("position") or "BOTH").upper()
        fn = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
        chars = node.expression
        if chars is None:
            return f"{fn}({self.write(node.this)})"
        return f"{fn}({self.write(node.this)}, {self.write(chars)})"

    def _round(self, node: exp.Round) -> str:
        digits = node.args.get("decimals")
        if digits is None:
            return f"round({self.write(node.this)})"
        return f"round({self.write(node.this)}, {self.write(digits)})"

    def _between(self, node: exp.Between) -> str:
        value = self.write(node.this)
        low, high = self.write(node.args["low"]), self.write(node.args["high"])
        return f"(({value} >= {low}) && ({value} <= {high}))"

    def _in(self, node: exp.In) -> str:
        if node.args.get("query"):
            raise QueryUnsupported("IN (subquery) inside an expression is not supported")
        value = self.write(node.this)
        return "(" + " || ".join(f"({value} == {self.write(v)})" for v in node.expressions) + ")"

    # -- time ---------------------------------------------------------------------------------------
    def _floor(self, node: exp.Floor | exp.Ceil) -> str:
        """FLOOR / CEIL of a number, or of a timestamp TO a unit (a time floor or ceiling)."""
        name = "floor" if isinstance(node, exp.Floor) else "ceil"
        unit = node.args.get("to")
        if unit is None:
            return f"{name}({self.write(node.this)})"
        period = FLOOR_UNITS.get(unit.name.upper())
        if period is None:
            raise QueryUnsupported(f"{name.upper()}(... TO {unit.name}) is not supported")
        return f"timestamp_{name}({self._time(node.this)}, '{period}', null, {_zone()})"

    def _date_trunc(self, node: exp.Expr) -> str:
        unit = node.args.get("unit")
        name = (unit.name if unit is not None else "").upper().strip("'")
        period = FLOOR_UNITS.get(name)
        if period is None:
            raise QueryUnsupported(f"DATE_TRUNC unit [{name}] is not supported")
        return f"timestamp_floor({self._time(node.this)}, '{period}', null, {_zone()})"

    def _extract(self, node: exp.Extract) -> str:
        unit = node.this.name.upper()
        return f"timestamp_extract({self._time(node.expression)}, '{unit}', {_zone()})"

    def _time(self, node: exp.Expr) -> str:
        if column_name(node) == TIME:
            return quote(TIME)
        return self.write(node)

    def _shift_interval(self, node: exp.Expr) -> str:
        step = interval_ms(node.expression)
        sign = -1 if isinstance(node, exp.Sub) else 1
        try:
            return str(timestamp_ms(literal(node.this, self.now_ms)) + sign * step)
        except QueryUnsupported:
            return f"({self._time(node.this)} + {sign * step})"

    # -- functions --------------------------------------------------------------------------------
    def _anonymous(self, node: exp.Anonymous) -> str:
        name = node.name.upper()
        args = node.expressions
        if name in ("MILLIS_TO_TIMESTAMP", "TIMESTAMP_TO_MILLIS") and len(args) == 1:
            return self.write(args[0])
        if name == "STRPOS" and len(args) == 2:
            return f"(strpos({self.write(args[0])}, {self.write(args[1])}) + 1)"
        if name == "NULLIF" and len(args) == 2:
            return self._nullif(args[0], args[1])
        if name == "TIME_PARSE" and args and isinstance(args[0], exp.Literal) and len(args) == 1:
            return str(timestamp_ms(literal(args[0], self.now_ms)))
        fn = _NAMED.get(name)
        if fn is None:
            raise QueryUnsupported(f"Function [{name}] is not supported")
        written = [self._argument(a) for a in args]
        zone_at = _ZONE_ARGUMENT.get(fn)
        if zone_at is not None and len(written) <= zone_at:  # the session's zone by default
            written += ["null"] * (zone_at - len(written)) + [_zone()]
        return f"{fn}({', '.join(written)})"

    def _argument(self, node: exp.Expr) -> str:
        return quote(TIME) if column_name(node) == TIME else self.write(node)

    def _regexp_extract(self, node: exp.RegexpExtract) -> str:
        """REGEXP_EXTRACT(expr, pattern[, index]): the third argument is the capture group (sqlglot
        files it as `group`, or as `position` for Druid's spelling)."""
        index = node.args.get("group") or node.args.get("position")
        args = [self.write(node.this), self.write(node.expression)]
        return f"regexp_extract({', '.join(args + ([self.write(index)] if index is not None else []))})"

    def _named_function(self, node: exp.Func) -> str:
        name = (node.sql_name() or type(node).__name__).upper()
        fn = _NAMED.get(name)
        if fn is None:
            raise QueryUnsupported(f"Function [{name}] is not supported")
        args = [a for a in (node.this, *node.expressions) if isinstance(a, exp.Expr)]
        if node.args.get("expression") is not None and node.args["expression"] not in args:
            args.append(node.args["expression"])
        return f"{fn}({', '.join(self._argument(a) for a in args)})"


def _day_start(ms: int) -> int:
    """Midnight, in the session's zone, of the day holding `ms` (a DATE as epoch milliseconds)."""
    zone = current_zone_info() or datetime.UTC
    day = datetime.datetime.fromtimestamp(ms / 1000, zone).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(day.timestamp() * 1000)


def is_time_expression(text: str) -> bool:
    """Whether an expression yields a timestamp (so SQL types and prints it as TIMESTAMP)."""
    tree = parse_expression(text)
    name = getattr(tree, "name", None)
    return (type(tree).__name__ == "Call" and name in _TIME_RESULT) or text == quote(TIME)


def expression_kind(text: str, types: Mapping[str, str]) -> str:
    """The Druid type (LONG, DOUBLE, STRING, an ARRAY, COMPLEX<json>) of an expression over
    columns of Druid `types`; a multi-value result is a STRING, as Druid SQL types it."""
    duck = {name: _DUCK.get(kind, "VARCHAR") for name, kind in types.items()}
    duck[TIME] = "BIGINT"
    typed = compile_expression(parse_expression(text), duck)
    if typed.kind == "NULL" or typed.multi:
        return "STRING"
    return "COMPLEX<json>" if typed.kind == "COMPLEX<json>" else typed.kind
