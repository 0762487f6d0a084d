"""The rows of `unnest` and `join` datasources over a segment's rows, as SQL over its scan.

A query over `unnest(join(table, inline), ...)` reads the table's segment, then applies each
wrapper, innermost first:

- unnest: one row per element of its virtual column's array (a multi-value string's values, a row
  with none giving one null row; an ARRAY's elements, a null or empty one giving no row; a scalar
  as the array of its one value), the element under the column's name (replacing a column of that
  name), then its `unnestFilter`; each row also gets its element's position (`ELEMENT_POSITION`),
  the order Druid's cursor reads one row's elements in, which `*Last` aggregators break ties by;
- join: the segment's rows joined (INNER or LEFT) with the right side's rows, an inline table the
  query carries, on the equalities of its condition; the right side's columns are named with the
  join's prefix, and a left column starting with the prefix is shadowed, as in Druid.

The query's virtual columns and filter then apply to the wrapped rows; a filter's terms reading
only columns of the segment are pushed into the scan, below the wrappers.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence

import duckdb
import orjson
import pyarrow as pa

from strata.lookups.rows import lookup_inline
from strata.query.columns import ELEMENT_POSITION
from strata.query.data_source import (
    DataSource,
    InlineSource,
    JoinSource,
    LookupSource,
    UnnestSource,
    wrappers,
)
from strata.query.duck import duck_type, is_multi_value, quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.parser import Identifier, identifiers
from strata.query.expressions.typed import (
    DOUBLE,
    LONG,
    STRING,
    Typed,
    cast_to,
    element_kind,
    is_array_kind,
)
from strata.query.filters import AndFilter, Filter
from strata.query.filters.sql import values_or_null

_NUMBERS = (LONG, DOUBLE)


def produced_columns(source: DataSource | None) -> set[str]:
    """Columns the wrappers make (unnest outputs, a join's prefixed right columns)."""
    out: set[str] = set()
    for w in wrappers(source) if source is not None else ():
        if isinstance(w, UnnestSource):
            out.add(w.name)
        else:
            out.update(w.prefix + c for c in _inline(w).columns)
    return out


def read_columns(source: DataSource | None) -> set[str]:
    """Columns of the rows below each wrapper that the wrappers read."""
    out: set[str] = set()
    for w in wrappers(source) if source is not None else ():
        if isinstance(w, UnnestSource):
            out.update(identifiers(w.column.tree))
        else:
            for expr, _ in w.keys:
                out.update(identifiers(expr))
    return out


def split_filter(flt: Filter | None, below: set[str]) -> tuple[Filter | None, Filter | None]:
    """(the terms of an AND reading only `below` columns, the rest)."""
    if flt is None:
        return None, None
    terms = list(flt.fields) if isinstance(flt, AndFilter) else [flt]
    pushed = [t for t in terms if t.columns() <= below]
    rest = [t for t in terms if not t.columns() <= below]

    def joined(parts: list[Filter]) -> Filter | None:
        return None if not parts else parts[0] if len(parts) == 1 else AndFilter(tuple(parts))

    return joined(pushed), joined(rest)


def wrap(
    relation: str, types: Mapping[str, str], source: DataSource, positions: bool = False
) -> tuple[str, dict[str, str]]:
    """`relation` (a segment's rows) with the source's wrappers applied; its column types.
    `positions`: each unnest also gives its element's position (for `*Last` aggregators' ties)."""
    scope = dict(types)
    for w in wrappers(source):
        if isinstance(w, UnnestSource):
            relation, scope = _unnest(relation, scope, w, positions)
        else:
            relation, scope = _join(relation, scope, w)
    return relation, scope


def _unnest(
    relation: str, types: dict[str, str], source: UnnestSource, positions: bool
) -> tuple[str, dict[str, str]]:
    typed = source.column.compile(types)
    if typed.multi or is_multi_value(typed.duck_type):
        values, element = values_or_null(typed.sql), STRING
    elif is_array_kind(typed.kind):
        values, element = typed.sql, element_kind(typed.kind)
    else:
        values, element = f"[{typed.sql}]", typed.kind
    name = source.name
    element_duck = Typed("NULL", element).duck_type if element != "NULL" else "VARCHAR"
    replaced = [c for c in (name, *([ELEMENT_POSITION] if positions else [])) if c in types]
    star = f"* EXCLUDE ({', '.join(map(quote_ident, replaced))})" if replaced else "*"
    columns = f"unnest({values}) AS {quote_ident(name)}"
    out = {**types, name: element_duck}
    if positions:
        position = f"generate_subscripts({values}, 1)"
        if ELEMENT_POSITION in types:  # an unnest of unnested rows: the outer positions come first
            position = f"list_append({quote_ident(ELEMENT_POSITION)}, {position})"
        else:
            position = f"[{position}]"
        columns += f", {position} AS {quote_ident(ELEMENT_POSITION)}"
        out[ELEMENT_POSITION] = "BIGINT[]"
    relation = f"SELECT {star}, {columns} FROM ({relation})"
    if source.filter is not None:
        relation = f"SELECT * FROM ({relation}) WHERE {source.filter.to_sql(out)}"
    return relation, out


def _inline(source: JoinSource) -> InlineSource:
    if isinstance(source.right, LookupSource):  # a query sent to a data node itself: its own lookup
        return lookup_inline(source.right.name)
    if not isinstance(source.right, InlineSource):
        raise QueryUnsupported("The right side of a join reaches a data node as inline rows only")
    return source.right


def _join(relation: str, types: dict[str, str], source: JoinSource) -> tuple[str, dict[str, str]]:
    inline = _inline(source)
    right_types = {source.prefix + c: t for c, t in inline_types(inline).items()}
    left_types = {c: t for c, t in types.items() if not c.startswith(source.prefix)}
    conditions = []
    for expr, column in source.keys:
        left = compile_expression(expr, left_types)
        if left.multi or any(is_multi_value(left_types.get(i)) for i in identifiers(expr)):
            raise invalid("Join conditions on a column can't contain a multi-value dimension")
        right = compile_expression(Identifier(source.prefix + column), right_types)
        a, b = _comparable(left, right)
        conditions.append(f"({a} = {b})")
    shadowed = [c for c in types if c.startswith(source.prefix)]
    star = f"* EXCLUDE ({', '.join(map(quote_ident, shadowed))})" if shadowed else "*"
    right_sql = ", ".join(
        f"{_as_stored(c, right_types[source.prefix + c])} AS {quote_ident(source.prefix + c)}"
        for c in inline.columns
    )
    joined = (
        f"SELECT * FROM (SELECT {star} FROM ({relation})) {source.join_type} JOIN "
        f"(SELECT {right_sql} FROM {inline_name(inline)}) ON {' AND '.join(conditions)}"
    )
    return joined, {**left_types, **right_types}


def _as_stored(column: str, duck: str) -> str:
    """An inline column as its type (COMPLEX<json> values travel as JSON text)."""
    return f"json({quote_ident(column)})" if duck == "JSON" else quote_ident(column)


def _comparable(left: Typed, right: Typed) -> tuple[str, str]:
    """Both key sides in one comparable type: numbers as numbers, anything else as text."""
    if left.kind == right.kind:
        return left.sql, right.sql
    if left.kind in _NUMBERS and right.kind in _NUMBERS:
        return cast_to(left, DOUBLE).sql, cast_to(right, DOUBLE).sql
    return cast_to(left, STRING).sql, cast_to(right, STRING).sql


# -- inline rows as Arrow tables registered on the engine's connection ---------------------------------
_ARROW = {
    "STRING": pa.string(),
    "LONG": pa.int64(),
    "DOUBLE": pa.float64(),
    "FLOAT": pa.float32(),
    "ARRAY<STRING>": pa.list_(pa.string()),
    "ARRAY<LONG>": pa.list_(pa.int64()),
    "ARRAY<DOUBLE>": pa.list_(pa.float64()),
}


def inline_table(inline: InlineSource) -> pa.Table:
    """An inline datasource's rows as Arrow, typed by its columnTypes (else by its values)."""
    arrays = {}
    for i, (name, kind) in enumerate(zip(inline.columns, inline.types, strict=True)):
        values = [row[i] for row in inline.rows]
        if kind == "COMPLEX<json>":
            arrays[name] = pa.array(
                [None if v is None else orjson.dumps(v).decode() for v in values], pa.string()
            )
            continue
        try:
            arr = pa.array(values, _ARROW.get(kind or ""))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arr = pa.array([None if v is None else str(v) for v in values], pa.string())
        arrays[name] = arr.cast(pa.string()) if pa.types.is_null(arr.type) else arr
    return pa.table(arrays)


def inline_types(inline: InlineSource) -> dict[str, str]:
    table = inline_table(inline)
    types = {f.name: duck_type(f.type) for f in table.schema}
    for name, kind in zip(inline.columns, inline.types, strict=True):
        if kind == "COMPLEX<json>":
            types[name] = "JSON"
    return types


def inline_name(inline: InlineSource) -> str:
    """The name an inline table is registered under (by its content, so equal ones share it)."""
    digest = hashlib.sha256(orjson.dumps(inline.to_json(), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    return f"__inline_{digest}"


def inline_sources(source: DataSource | None) -> Iterable[InlineSource]:
    for w in wrappers(source) if source is not None else ():
        if isinstance(w, JoinSource):
            yield _inline(w)


@contextlib.contextmanager
def registered_inline(conn: duckdb.DuckDBPyConnection, source: DataSource | None) -> Iterator[None]:
    """The join right sides of `source` visible to `conn` while the query runs."""
    names: list[str] = []
    try:
        for inline in inline_sources(source):
            name = inline_name(inline)
            conn.register(name, inline_table(inline))
            names.append(name)
        yield
    finally:
        for name in names:
            conn.unregister(name)


def physical_columns(wanted: Sequence[str], source: DataSource | None) -> list[str]:
    """The columns to read from segments for `wanted` over the wrapped rows."""
    produced = produced_columns(source)
    out = [c for c in wanted if c not in produced]
    out += sorted(read_columns(source))
    return list(dict.fromkeys(out))
