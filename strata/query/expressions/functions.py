"""Druid expression functions (strings, math, conditionals, casts) as DuckDB SQL.

Each compiler takes the scope and the call's argument trees and returns a `Typed` fragment.
Semantics follow Druid's function reference: string positions are 0-based (`substring`,
`strpos`), `regexp_extract` gives null when nothing matches, `concat` is null when any argument
is, `ceil`/`floor` give DOUBLE, `round` keeps a LONG a LONG.
"""

from __future__ import annotations

from collections.abc import Callable

from strata.query.duck import quote_str
from strata.query.errors import invalid
from strata.query.expressions.parser import Literal, Node
from strata.query.expressions.time_functions import TIME_FUNCTIONS
from strata.query.expressions.typed import (
    DOUBLE,
    LONG,
    NAMED_KINDS,
    NULL,
    STRING,
    Scope,
    Typed,
    as_double,
    as_long,
    as_text,
    cast_to,
    common_kind,
    truth,
)
from strata.query.lookup_refs import lookup_sql, lookup_table

FunctionCompiler = Callable[[Scope, tuple[Node, ...]], Typed]


def arity(name: str, args: tuple[Node, ...], low: int, high: int | None = None) -> None:
    high = low if high is None else high
    if not low <= len(args) <= high:
        wanted = str(low) if low == high else f"{low} to {high}"
        raise invalid("Function [%s] needs %s arguments, got %d", name, wanted, len(args))


def constant_string(name: str, node: Node, what: str) -> str:
    if not isinstance(node, Literal) or not isinstance(node.value, str):
        raise invalid("Function [%s] needs a string literal as %s", name, what)
    return node.value


def constant_int(name: str, node: Node, what: str) -> int:
    if not isinstance(node, Literal) or not isinstance(node.value, int):
        raise invalid("Function [%s] needs an integer literal as %s", name, what)
    return node.value


def _text_fn(sql_name: str, kind: str = STRING) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity(sql_name, args, 1)
        return Typed(f"{sql_name}({as_text(scope.compile(args[0]))})", kind)

    return compile_


def _concat(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if not args:
        return Typed("CAST(NULL AS VARCHAR)", STRING)
    return Typed("(" + " || ".join(as_text(scope.compile(a)) for a in args) + ")", STRING)


def _substring(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("substring", args, 2, 3)
    text = as_text(scope.compile(args[0]))
    index = as_long(scope.compile(args[1]))
    length = as_long(scope.compile(args[2])) if len(args) == 3 else "-1"
    part = f"substring({text}, {index} + 1, CASE WHEN {length} < 0 THEN length({text}) ELSE {length} END)"
    return Typed(f"(CASE WHEN {index} >= 0 AND {index} < length({text}) THEN {part} END)", STRING)


def _left_right(which: str) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity(which, args, 2)
        text, n = as_text(scope.compile(args[0])), as_long(scope.compile(args[1]))
        return Typed(f"{which}({text}, {n})", STRING)

    return compile_


def _strpos(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("strpos", args, 2, 3)
    text, needle = as_text(scope.compile(args[0])), as_text(scope.compile(args[1]))
    start = as_long(scope.compile(args[2])) if len(args) == 3 else "0"
    found = f"strpos(substring({text}, {start} + 1), {needle})"
    return Typed(f"(CASE WHEN {found} = 0 THEN -1 ELSE {found} + {start} - 1 END)", LONG)


def _replace(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("replace", args, 3)
    text, old, new = (as_text(scope.compile(a)) for a in args)
    return Typed(f"replace({text}, {old}, {new})", STRING)


def _trim(sql_name: str) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity(sql_name, args, 1, 2)
        text = as_text(scope.compile(args[0]))
        chars = as_text(scope.compile(args[1])) if len(args) == 2 else "' '"
        return Typed(f"{sql_name}({text}, {chars})", STRING)

    return compile_


def _pad(sql_name: str) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity(sql_name, args, 3)
        text, n = as_text(scope.compile(args[0])), as_long(scope.compile(args[1]))
        pad = as_text(scope.compile(args[2]))
        return Typed(
            f"(CASE WHEN {pad} = '' THEN NULL ELSE {sql_name}({text}, CAST({n} AS INTEGER), {pad}) END)",
            STRING,
        )

    return compile_


def _repeat(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("repeat", args, 2)
    text, n = as_text(scope.compile(args[0])), as_long(scope.compile(args[1]))
    return Typed(f"repeat({text}, greatest({n}, 0))", STRING)


def _contains(ignore_case: bool) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity("contains_string", args, 2)
        text, needle = as_text(scope.compile(args[0])), as_text(scope.compile(args[1]))
        if ignore_case:
            text, needle = f"lower({text})", f"lower({needle})"
        return Typed(f"CAST(contains({text}, {needle}) AS BIGINT)", LONG)

    return compile_


def _regexp_extract(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("regexp_extract", args, 2, 3)
    text = as_text(scope.compile(args[0]))
    pattern = quote_str(constant_string("regexp_extract", args[1], "its pattern"))
    index = constant_int("regexp_extract", args[2], "its group index") if len(args) == 3 else 0
    found = f"regexp_extract({text}, {pattern}, {index})"
    return Typed(f"(CASE WHEN regexp_matches({text}, {pattern}) THEN {found} END)", STRING)


def _regexp_like(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("regexp_like", args, 2)
    text = as_text(scope.compile(args[0]))
    pattern = quote_str(constant_string("regexp_like", args[1], "its pattern"))
    return Typed(f"CAST(regexp_matches({text}, {pattern}) AS BIGINT)", LONG)


def _like(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("like", args, 2, 3)
    text = as_text(scope.compile(args[0]))
    pattern = quote_str(constant_string("like", args[1], "its pattern"))
    escape = f" ESCAPE {quote_str(constant_string('like', args[2], 'its escape'))}" if len(args) == 3 else ""
    return Typed(f"CAST(({text} LIKE {pattern}{escape}) AS BIGINT)", LONG)


def _nvl(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("nvl", args, 2)
    a, b = scope.compile(args[0]), scope.compile(args[1])
    kind = common_kind(a.kind, b.kind)
    return Typed(f"coalesce({cast_to(a, kind).sql}, {cast_to(b, kind).sql})", kind)


def _if(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("if", args, 3)
    cond, a, b = (scope.compile(x) for x in args)
    kind = common_kind(a.kind, b.kind)
    return Typed(
        f"(CASE WHEN {truth(cond)} THEN {cast_to(a, kind).sql} ELSE {cast_to(b, kind).sql} END)", kind
    )


def _case_searched(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) < 2:
        raise invalid("Function [case_searched] needs at least 2 arguments")
    pairs = [(scope.compile(args[i]), scope.compile(args[i + 1])) for i in range(0, len(args) - 1, 2)]
    default = scope.compile(args[-1]) if len(args) % 2 else None
    kind = common_kind(*(v.kind for _, v in pairs), *([default.kind] if default else []))
    whens = " ".join(f"WHEN {truth(c)} THEN {cast_to(v, kind).sql}" for c, v in pairs)
    other = f" ELSE {cast_to(default, kind).sql}" if default is not None else ""
    return Typed(f"(CASE {whens}{other} END)", kind)


def _case_simple(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) < 3:
        raise invalid("Function [case_simple] needs at least 3 arguments")
    subject = scope.compile(args[0])
    rest = args[1:]
    pairs = [(scope.compile(rest[i]), scope.compile(rest[i + 1])) for i in range(0, len(rest) - 1, 2)]
    default = scope.compile(rest[-1]) if len(rest) % 2 else None
    kind = common_kind(*(v.kind for _, v in pairs), *([default.kind] if default else []))
    compare = common_kind(subject.kind, *(k.kind for k, _ in pairs))
    s = cast_to(subject, compare).sql
    whens = " ".join(f"WHEN {s} = {cast_to(k, compare).sql} THEN {cast_to(v, kind).sql}" for k, v in pairs)
    other = f" ELSE {cast_to(default, kind).sql}" if default is not None else ""
    return Typed(f"(CASE {whens}{other} END)", kind)


def _null_test(negate: bool) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity("isnull", args, 1)
        value = scope.compile(args[0])
        return Typed(f"CAST(({value.sql} IS {'NOT ' if negate else ''}NULL) AS BIGINT)", LONG)

    return compile_


def _nullif(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("nullif", args, 2)
    a, b = scope.compile(args[0]), scope.compile(args[1])
    kind = common_kind(a.kind, b.kind)
    return Typed(f"nullif({cast_to(a, kind).sql}, {cast_to(b, kind).sql})", kind)


def _cast(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("cast", args, 2)
    target = constant_string("cast", args[1], "its type").upper()
    if target not in NAMED_KINDS:
        raise invalid("Function [cast] cannot cast to type [%s]", target)
    return cast_to(scope.compile(args[0]), NAMED_KINDS[target])


def _math(sql_name: str, keep_long: bool = False) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity(sql_name, args, 1)
        value = scope.compile(args[0])
        if keep_long and value.kind == LONG:
            return Typed(f"{sql_name}({value.sql})", LONG)
        return Typed(f"{sql_name}({as_double(value)})", DOUBLE)

    return compile_


def _round(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("round", args, 1, 2)
    value = scope.compile(args[0])
    scale = constant_int("round", args[1], "its scale") if len(args) == 2 else 0
    if value.kind == LONG:
        if scale >= 0:
            return value
        return Typed(f"CAST(round({value.sql}, {scale}) AS BIGINT)", LONG)
    return Typed(f"round({as_double(value)}, {scale})", DOUBLE)


def _binary_math(sql_name: str) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        arity(sql_name, args, 2)
        a, b = (as_double(scope.compile(x)) for x in args)
        return Typed(f"{sql_name}({a}, {b})", DOUBLE)

    return compile_


def _div(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("div", args, 2)
    a, b = (as_long(scope.compile(x)) for x in args)
    return Typed(f"(CASE WHEN {b} <> 0 THEN {a} // {b} END)", LONG)


def _extreme(sql_name: str) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        if not args:
            return Typed("NULL", NULL)
        values = [scope.compile(a) for a in args]
        kind = common_kind(*(v.kind for v in values))
        # Druid's greatest/least skip nulls, as DuckDB's do
        return Typed(f"{sql_name}({', '.join(cast_to(v, kind).sql for v in values)})", kind)

    return compile_


def _abs(scope: Scope, args: tuple[Node, ...]) -> Typed:
    arity("abs", args, 1)
    value = scope.compile(args[0])
    return Typed(
        f"abs({value.sql if value.kind == LONG else as_double(value)})",
        LONG if value.kind == LONG else DOUBLE,
    )


def _lookup(scope: Scope, args: tuple[Node, ...]) -> Typed:
    """Druid's `lookup(expr, 'name'[, 'replaceMissingValueWith'])` over a loaded lookup."""
    arity("lookup", args, 2, 3)
    name = constant_string("lookup", args[1], "its lookup name")
    replacement = None
    if len(args) == 3:
        replacement = constant_string("lookup", args[2], "its replaceMissingValueWith")
    text = as_text(scope.compile(args[0]))
    return Typed(lookup_sql(text, lookup_table(name), replacement=replacement), STRING)


FUNCTIONS: dict[str, FunctionCompiler] = {
    "lookup": _lookup,
    "concat": _concat,
    "lower": _text_fn("lower"),
    "upper": _text_fn("upper"),
    "reverse": _text_fn("reverse"),
    "strlen": _text_fn("length", LONG),
    "substring": _substring,
    "left": _left_right("left"),
    "right": _left_right("right"),
    "strpos": _strpos,
    "replace": _replace,
    "trim": _trim("trim"),
    "ltrim": _trim("ltrim"),
    "rtrim": _trim("rtrim"),
    "lpad": _pad("lpad"),
    "rpad": _pad("rpad"),
    "repeat": _repeat,
    "contains_string": _contains(False),
    "icontains_string": _contains(True),
    "regexp_extract": _regexp_extract,
    "regexp_like": _regexp_like,
    "like": _like,
    "nvl": _nvl,
    "if": _if,
    "case_searched": _case_searched,
    "case_simple": _case_simple,
    "isnull": _null_test(False),
    "notnull": _null_test(True),
    "nullif": _nullif,
    "cast": _cast,
    "abs": _abs,
    "ceil": _math("ceil"),
    "floor": _math("floor"),
    "sqrt": _math("sqrt"),
    "exp": _math("exp"),
    "log": _math("ln"),
    "log10": _math("log10"),
    "signum": _math("sign"),
    "round": _round,
    "pow": _binary_math("pow"),
    "div": _div,
    "greatest": _extreme("greatest"),
    "least": _extreme("least"),
    "max": _extreme("greatest"),
    "min": _extreme("least"),
    **TIME_FUNCTIONS,
}
