"""Druid's array and apply functions (`map`, `filter`, `fold`, ...) as DuckDB list SQL.

Semantics follow Druid's function reference: offsets are 0-based and ordinals 1-based, an index
out of range gives null; `array_contains` with an array checks every element; `filter` keeps the
matching elements and gives null when none is left; `any` / `all` over no elements are 0 / 1; a
null array gives null (`fold` too). Where the reference is silent they follow Druid's
`Function.java`: `array_offset_of` compares without casting (a LONG 1 is neither the STRING '1'
nor the DOUBLE 1.0); `array_slice` past the end pads with nulls (Java's `copyOfRange`);
`mv_to_array` of an array is that array as strings (empty stays empty, null stays null).

Lambda parameters become DuckDB lambda parameters; `fold`'s `(element, accumulator)` order is
Druid's, DuckDB's `list_reduce` takes them the other way round.

`ARRAY_ARGUMENTS` says which arguments of each function take arrays: a multi-value column read
anywhere else is mapped value by value (`strata.query.expressions.multi_value`).
"""

from __future__ import annotations

from collections.abc import Callable

from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.parser import Lambda, Node
from strata.query.expressions.typed import (
    ARRAY_STRING,
    DOUBLE,
    LONG,
    NULL,
    STRING,
    Scope,
    Typed,
    array_of,
    as_array,
    as_long,
    as_text,
    cast_to,
    common_kind,
    duck_of,
    element_kind,
    is_array_kind,
    truth,
)

FunctionCompiler = Callable[[Scope, tuple[Node, ...]], Typed]
_SCALARS = {LONG, DOUBLE, STRING}

# function -> positions of its array arguments (None: every argument from that position on)
ARRAY_ARGUMENTS: dict[str, tuple[int, ...]] = {
    "array_length": (0,),
    "array_offset": (0,),
    "array_ordinal": (0,),
    "array_contains": (0, 1),
    "array_overlap": (0, 1),
    "mv_overlap": (0, 1),
    "scalar_in_array": (1,),
    "array_offset_of": (0,),
    "array_ordinal_of": (0,),
    "array_prepend": (1,),
    "array_append": (0,),
    "array_concat": (0, 1),
    "array_set_add": (0,),
    "array_set_add_all": (0, 1),
    "array_slice": (0,),
    "array_to_string": (0,),
    "array_to_mv": (0,),
    "mv_to_array": (0,),
    "map": (1,),
    "filter": (1,),
    "fold": (1,),
    "any": (1,),
    "all": (1,),
    "cartesian_map": (1, 2, 3, 4, 5, 6, 7, 8),
}


def _arity(name: str, args: tuple[Node, ...], low: int, high: int | None = None) -> None:
    high = low if high is None else high
    if not low <= len(args) <= high:
        wanted = str(low) if low == high else f"{low} to {high}"
        raise invalid("Function [%s] needs %s arguments, got %d", name, wanted, len(args))


def _array(scope: Scope, node: Node) -> Typed:
    value = scope.compile(node)
    return as_array(value) if value.kind != NULL else Typed("CAST(NULL AS VARCHAR[])", ARRAY_STRING)


def _element_of(array: Typed, value: Typed) -> str:
    """`value` as an element of `array` (same element type)."""
    return cast_to(value, element_kind(array.kind)).sql


def _construct(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if not args:
        raise invalid("Function [array] needs at least 1 argument")
    values = [scope.compile(a) for a in args]
    kind = common_kind(*(v.kind for v in values))
    return Typed(f"[{', '.join(cast_to(v, kind).sql for v in values)}]", array_of(kind))


def _length(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_length", args, 1)
    return Typed(f"CAST(len({_array(scope, args[0]).sql}) AS BIGINT)", LONG)


def _at(base: int) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        _arity("array_offset" if base == 0 else "array_ordinal", args, 2)
        arr, index = _array(scope, args[0]), as_long(scope.compile(args[1]))
        position = f"({index} + {1 - base})"
        found = f"(CASE WHEN {position} >= 1 AND {position} <= len({arr.sql}) THEN {arr.sql}[{position}] END)"
        return Typed(found, element_kind(arr.kind))

    return compile_


def _contains(scope: Scope, args: tuple[Node, ...]) -> Typed:
    """As Druid's `array_contains` answers: a null array contains nothing, not even null (null);
    a scalar is the array of its one value, a null scalar the array of one null (so it contains
    null). A multi-value column keeps its own rule (its null row contains nothing: false)."""
    _arity("array_contains", args, 2)
    first, value = scope.compile(args[0]), scope.compile(args[1])
    multi = first.multi or scope.reads_multi_value(args[0])
    scalar = first.kind in _SCALARS and not multi
    arr = Typed(f"[{first.sql}]", array_of(first.kind)) if scalar else _array(scope, args[0])
    if value.kind.startswith("ARRAY<"):
        wanted = as_array(value, arr.kind).sql
        test = f"list_has_all({arr.sql}, {wanted})"
    else:
        test = f"(list_position({arr.sql}, {_element_of(arr, value)}) IS NOT NULL)"
    if multi or scalar:
        return Typed(f"CAST({test} AS BIGINT)", LONG)
    return Typed(f"(CASE WHEN {arr.sql} IS NULL THEN NULL ELSE CAST({test} AS BIGINT) END)", LONG)


def _overlap(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_overlap", args, 2)
    a, b = _array(scope, args[0]), _array(scope, args[1])
    return Typed(f"CAST(list_has_any({a.sql}, {as_array(b, a.kind).sql}) AS BIGINT)", LONG)


def _mv_overlap(scope: Scope, args: tuple[Node, ...]) -> Typed:
    """Druid's `mv_overlap` (what SQL's MV_OVERLAP plans to), which answers as its `inType` filter
    does: a null or empty left side is the one value null, its values are cast to the right side's
    element type; a match is true, a null right side asks whether a value is null, an empty one is
    false; no match is unknown (null) when a value was null before the cast, else false (a '' that
    is no LONG is false)."""
    _arity("mv_overlap", args, 2)
    left, right = _array(scope, args[0]), _array(scope, args[1])
    element = duck_of(element_kind(left.kind))
    one_null = f"(CASE WHEN len({left.sql}) > 0 THEN {left.sql} ELSE [NULL::{element}] END)"
    values = as_array(Typed(one_null, left.kind), right.kind).sql
    held_null = f"(list_count({one_null}) < len({one_null}))"
    cast_null = f"(list_count({values}) < len({values}))"
    both_null = f"({cast_null} AND list_count({right.sql}) < len({right.sql}))"
    return Typed(
        f"(CASE WHEN {right.sql} IS NULL THEN CAST({cast_null} AS BIGINT) WHEN len({right.sql}) = 0 THEN 0"
        f" WHEN list_has_any({values}, {right.sql}) OR {both_null} THEN 1"
        f" WHEN {held_null} THEN NULL ELSE 0 END)",
        LONG,
    )


def _scalar_in(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("scalar_in_array", args, 2)
    value, arr = scope.compile(args[0]), _array(scope, args[1])
    element = _element_of(arr, value)
    found = f"CAST(list_position({arr.sql}, {element}) IS NOT NULL AS BIGINT)"
    return Typed(f"(CASE WHEN {element} IS NULL THEN NULL ELSE {found} END)", LONG)


def _position(base: int) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        _arity("array_offset_of" if base == 0 else "array_ordinal_of", args, 2)
        arr, value = _array(scope, args[0]), scope.compile(args[1])
        if {value.kind, element_kind(arr.kind)} <= _SCALARS and value.kind != element_kind(arr.kind):
            return Typed("CAST(NULL AS BIGINT)", LONG)  # Java's equals: no value of another type
        found = f"list_position({arr.sql}, {_element_of(arr, value)})"
        return Typed(f"CAST({found} - {1 - base} AS BIGINT)", LONG)

    return compile_


def _prepend(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_prepend", args, 2)
    value, arr = scope.compile(args[0]), _array(scope, args[1])
    prepended = f"list_prepend({_element_of(arr, value)}, {arr.sql})"
    return Typed(f"(CASE WHEN {arr.sql} IS NULL THEN NULL ELSE {prepended} END)", arr.kind)


def _append(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_append", args, 2)
    arr, value = _array(scope, args[0]), scope.compile(args[1])
    return Typed(
        f"(CASE WHEN {arr.sql} IS NULL THEN NULL ELSE list_append({arr.sql}, {_element_of(arr, value)}) END)",
        arr.kind,
    )


def _concat(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_concat", args, 2)
    a, b = _array(scope, args[0]), _array(scope, args[1])
    other = as_array(b, a.kind).sql
    return Typed(
        f"(CASE WHEN {a.sql} IS NULL OR {other} IS NULL THEN NULL ELSE list_concat({a.sql}, {other}) END)",
        a.kind,
    )


def _set_add(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_set_add", args, 2)
    arr, value = _array(scope, args[0]), scope.compile(args[1])
    added = f"list_append(coalesce({arr.sql}, []), {_element_of(arr, value)})"
    return Typed(f"list_sort(list_distinct({added}))", arr.kind)


def _set_add_all(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_set_add_all", args, 2)
    a, b = _array(scope, args[0]), _array(scope, args[1])
    both = f"list_concat(coalesce({a.sql}, []), coalesce({as_array(b, a.kind).sql}, []))"
    return Typed(f"list_sort(list_distinct({both}))", a.kind)


def _slice(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_slice", args, 2, 3)
    arr, start = _array(scope, args[0]), as_long(scope.compile(args[1]))
    end = as_long(scope.compile(args[2])) if len(args) == 3 else f"len({arr.sql})"
    bad = f"{arr.sql} IS NULL OR {start} < 0 OR {start} > len({arr.sql}) OR {start} > {end}"
    padded = f"list_resize({arr.sql}[{start} + 1:{end}], {end} - {start})"  # nulls past the end
    return Typed(f"(CASE WHEN {bad} THEN NULL ELSE {padded} END)", arr.kind)


def _to_string(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_to_string", args, 2)
    arr, sep = _array(scope, args[0]), as_text(scope.compile(args[1]))
    each = as_text(Typed('"__e"', element_kind(arr.kind)))
    text = f"array_to_string(list_transform({arr.sql}, lambda \"__e\": coalesce({each}, 'null')), {sep})"
    # Druid's ArrayToStringFunction: an array of one null element joins to null, not 'null'
    return Typed(f"(CASE WHEN {arr.sql} = [NULL] THEN NULL ELSE {text} END)", STRING)


def _string_to_array(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("string_to_array", args, 2)
    text, pattern = (as_text(scope.compile(a)) for a in args)
    return Typed(f"regexp_split_to_array({text}, {pattern})", ARRAY_STRING)


def _to_mv(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("array_to_mv", args, 1)
    return Typed(as_array(_array(scope, args[0]), ARRAY_STRING).sql, ARRAY_STRING, multi=True)


def _mv_to_array(scope: Scope, args: tuple[Node, ...]) -> Typed:
    """A multi-value string's values as an array; a row with no value is the array of one null
    (Druid's empty multi-value row is null). An array is cast to strings as it is."""
    _arity("mv_to_array", args, 1)
    value = scope.compile(args[0])
    if is_array_kind(value.kind) and not value.multi and not scope.reads_multi_value(args[0]):
        return Typed(as_array(value, ARRAY_STRING).sql, ARRAY_STRING)
    values = as_array(_array(scope, args[0]), ARRAY_STRING).sql
    return Typed(f"(CASE WHEN len({values}) > 0 THEN {values} ELSE [NULL::VARCHAR] END)", ARRAY_STRING)


# -- apply functions -------------------------------------------------------------------------------
def _lambda(name: str, node: Node, arrays: int) -> Lambda:
    if not isinstance(node, Lambda):
        raise invalid("Function [%s] needs a lambda expression as its first argument", name)
    if len(node.params) != arrays:
        raise invalid(
            "Function [%s]: the lambda takes %d arguments, %d given", name, len(node.params), arrays
        )
    return node


def _bound(scope: Scope, fn: Lambda, kinds: list[str]) -> tuple[Scope, list[str]]:
    """A scope where the lambda's parameters are DuckDB lambda parameters of the given kinds."""
    names = [scope.fresh_name() for _ in fn.params]
    bindings = {p: Typed(f'"{n}"', k) for p, n, k in zip(fn.params, names, kinds, strict=True)}
    return scope.bind(bindings), [f'"{n}"' for n in names]


def _map(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("map", args, 2)
    fn, arr = _lambda("map", args[0], 1), _array(scope, args[1])
    inner, (p,) = _bound(scope, fn, [element_kind(arr.kind)])
    body = inner.compile(fn.body)
    kind = array_of(body.kind)
    return Typed(f"list_transform({arr.sql}, lambda {p}: {cast_to(body, element_kind(kind)).sql})", kind)


def _cartesian_map(scope: Scope, args: tuple[Node, ...]) -> Typed:
    if len(args) < 3:
        raise invalid("Function [cartesian_map] needs a lambda and at least 2 arrays")
    fn = _lambda("cartesian_map", args[0], len(args) - 1)
    arrays = [_array(scope, a) for a in args[1:]]
    inner, params = _bound(scope, fn, [element_kind(a.kind) for a in arrays])
    body = inner.compile(fn.body)
    kind = array_of(body.kind)
    text = cast_to(body, element_kind(kind)).sql
    for depth, (arr, p) in enumerate(reversed(list(zip(arrays, params, strict=True)))):
        text = f"list_transform({arr.sql}, lambda {p}: {text})"
        if depth:
            text = f"flatten({text})"
    return Typed(text, kind)


def _filter(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("filter", args, 2)
    fn, arr = _lambda("filter", args[0], 1), _array(scope, args[1])
    inner, (p,) = _bound(scope, fn, [element_kind(arr.kind)])
    # nothing kept is the empty array (Druid's FilterFunction), a null array stays null
    return Typed(
        f"list_filter({arr.sql}, lambda {p}: coalesce({truth(inner.compile(fn.body))}, false))", arr.kind
    )


def _fold(scope: Scope, args: tuple[Node, ...]) -> Typed:
    _arity("fold", args, 3)
    fn, arr, start = _lambda("fold", args[0], 2), _array(scope, args[1]), scope.compile(args[2])
    inner, (element, acc) = _bound(scope, fn, [element_kind(arr.kind), start.kind])
    body = cast_to(inner.compile(fn.body), start.kind).sql
    folded = f"list_reduce({arr.sql}, lambda {acc}, {element}: {body}, {start.sql})"
    return Typed(f"(CASE WHEN {arr.sql} IS NULL THEN NULL ELSE {folded} END)", start.kind)


def _match(name: str, every: bool) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        _arity(name, args, 2)
        fn, arr = _lambda(name, args[0], 1), _array(scope, args[1])
        inner, (p,) = _bound(scope, fn, [element_kind(arr.kind)])
        tests = f"list_transform({arr.sql}, lambda {p}: coalesce({truth(inner.compile(fn.body))}, false))"
        combined = f"list_bool_and({tests})" if every else f"list_bool_or({tests})"
        empty = "1" if every else "0"
        return Typed(
            f"(CASE WHEN {arr.sql} IS NULL THEN NULL WHEN len({arr.sql}) = 0 THEN {empty} "
            f"ELSE CAST({combined} AS BIGINT) END)",
            LONG,
        )

    return compile_


def _unsupported(name: str) -> FunctionCompiler:
    def compile_(scope: Scope, args: tuple[Node, ...]) -> Typed:
        raise QueryUnsupported(f"Function [{name}] is not supported in expressions")

    return compile_


ARRAY_FUNCTIONS: dict[str, FunctionCompiler] = {
    "array": _construct,
    "array_length": _length,
    "array_offset": _at(0),
    "array_ordinal": _at(1),
    "array_contains": _contains,
    "array_overlap": _overlap,
    "mv_overlap": _mv_overlap,
    "scalar_in_array": _scalar_in,
    "array_offset_of": _position(0),
    "array_ordinal_of": _position(1),
    "array_prepend": _prepend,
    "array_append": _append,
    "array_concat": _concat,
    "array_set_add": _set_add,
    "array_set_add_all": _set_add_all,
    "array_slice": _slice,
    "array_to_string": _to_string,
    "string_to_array": _string_to_array,
    "array_to_mv": _to_mv,
    "mv_to_array": _mv_to_array,
    "map": _map,
    "cartesian_map": _cartesian_map,
    "filter": _filter,
    "fold": _fold,
    "any": _match("any", every=False),
    "all": _match("all", every=True),
    "cartesian_fold": _unsupported("cartesian_fold"),
}
