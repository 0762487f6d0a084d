"""The `dataSource` of a query, as Druid's native datasources nest.

Leaves: `table`, `union` (of tables), `inline` (rows in the query), `lookup` (a key/value table),
`query` (another query's rows). Wrappers over a `base`: `unnest` (one row per element of an array
or value of a multi-value string, optionally filtered) and `join` (left and a right side that is
inline, a lookup or a query, on an equality condition, INNER or LEFT).

Where each part runs, as in Druid: data nodes read the table of `table`, `unnest` and `join`
datasources (the right side of a join travels in the query as inline rows); the broker runs a
`query` leaf or right side first, splits a `union` into one query per table, and answers an
`inline` leaf itself. A `lookup` leaf or right side is the loaded lookup's rows (`k`, `v`): the
broker answers a lookup leaf itself and sends a lookup join's right side as inline rows, as it
does a query's (`strata.lookups.rows`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.parser import Binary, Identifier, Node, identifiers, parse_expression
from strata.query.fields import as_object, get_list, get_str
from strata.query.filters import Filter, parse_filter
from strata.query.virtual_columns import VirtualColumn, parse_virtual_columns

JOIN_TYPES = ("INNER", "LEFT")
INLINE_TYPES = ("STRING", "LONG", "DOUBLE", "FLOAT", "ARRAY<STRING>", "ARRAY<LONG>", "ARRAY<DOUBLE>",
                "COMPLEX<json>")  # fmt: skip


@dataclass(frozen=True)
class TableSource:
    name: str

    def to_json(self) -> Any:
        return {"type": "table", "name": self.name}


@dataclass(frozen=True)
class UnionSource:
    names: tuple[str, ...]

    def to_json(self) -> Any:
        return {"type": "union", "dataSources": [{"type": "table", "name": n} for n in self.names]}


@dataclass(frozen=True)
class InlineSource:
    columns: tuple[str, ...]
    types: tuple[str | None, ...]
    rows: tuple[tuple[Any, ...], ...]

    def to_json(self) -> Any:
        out: dict[str, Any] = {"type": "inline", "columnNames": list(self.columns)}
        if any(t is not None for t in self.types):
            out["columnTypes"] = list(self.types)
        out["rows"] = [list(r) for r in self.rows]
        return out


@dataclass(frozen=True)
class LookupSource:
    name: str

    def to_json(self) -> Any:
        return {"type": "lookup", "lookup": self.name}


@dataclass(frozen=True)
class QuerySource:
    query: Any  # a strata.query.base.Query (imported there, which imports this module)

    def to_json(self) -> Any:
        return {"type": "query", "query": self.query.to_json()}


@dataclass(frozen=True)
class UnnestSource:
    base: DataSource
    column: VirtualColumn
    filter: Filter | None = None

    @property
    def name(self) -> str:
        return self.column.name

    def to_json(self) -> Any:
        return {
            "type": "unnest",
            "base": self.base.to_json(),
            "virtualColumn": self.column.to_json(),
            "unnestFilter": None if self.filter is None else self.filter.to_json(),
        }


@dataclass(frozen=True)
class JoinSource:
    left: DataSource
    right: DataSource
    prefix: str
    condition: str
    keys: tuple[tuple[Node, str], ...]  # (expression over the left, right column without prefix)
    join_type: str = "INNER"

    def to_json(self) -> Any:
        return {
            "type": "join",
            "left": self.left.to_json(),
            "right": self.right.to_json(),
            "rightPrefix": self.prefix,
            "condition": self.condition,
            "joinType": self.join_type,
        }


DataSource = TableSource | UnionSource | InlineSource | LookupSource | QuerySource | UnnestSource | JoinSource
ParseQuery = Callable[[Any], Any]


def leaf(source: DataSource) -> DataSource:
    """The datasource at the bottom of the wrappers (a join's left side, an unnest's base)."""
    while isinstance(source, (UnnestSource, JoinSource)):
        source = source.base if isinstance(source, UnnestSource) else source.left
    return source


def wrappers(source: DataSource) -> list[UnnestSource | JoinSource]:
    """The wrappers over the leaf, innermost first."""
    out: list[UnnestSource | JoinSource] = []
    while isinstance(source, (UnnestSource, JoinSource)):
        out.append(source)
        source = source.base if isinstance(source, UnnestSource) else source.left
    return out[::-1]


def routing_table(source: DataSource) -> str:
    """The table whose segments the query reads ("" when none or several: inline, union)."""
    base = leaf(source)
    if isinstance(base, TableSource):
        return base.name
    if isinstance(base, QuerySource):
        return str(base.query.data_source)
    return ""


def tables_read(source: DataSource) -> list[str]:
    """Every table the datasource reads, a join's right side and subqueries included."""
    if isinstance(source, TableSource):
        return [source.name]
    if isinstance(source, UnionSource):
        return list(source.names)
    if isinstance(source, QuerySource):
        return tables_read(source.query.data_source_spec)
    if isinstance(source, UnnestSource):
        return tables_read(source.base)
    if isinstance(source, JoinSource):
        return tables_read(source.left) + tables_read(source.right)
    return []


def with_leaf(source: DataSource, new: DataSource) -> DataSource:
    """`source` with its leaf replaced (the same wrappers)."""
    if isinstance(source, UnnestSource):
        return UnnestSource(with_leaf(source.base, new), source.column, source.filter)
    if isinstance(source, JoinSource):
        return JoinSource(with_leaf(source.left, new), source.right, source.prefix, source.condition,
                          source.keys, source.join_type)  # fmt: skip
    return new


def replace_right(source: DataSource, join: JoinSource, right: DataSource) -> DataSource:
    """`source` with `join`'s right side replaced (a query's rows, once the broker ran it)."""
    if source is join:
        return JoinSource(join.left, right, join.prefix, join.condition, join.keys, join.join_type)
    if isinstance(source, UnnestSource):
        return UnnestSource(replace_right(source.base, join, right), source.column, source.filter)
    if isinstance(source, JoinSource):
        return JoinSource(replace_right(source.left, join, right), source.right, source.prefix,
                          source.condition, source.keys, source.join_type)  # fmt: skip
    return source


def parse_data_source(value: Any, parse_query: ParseQuery, what: str = "dataSource") -> DataSource:
    if isinstance(value, str):
        if not value:
            raise invalid("Field [%s] must not be empty", what)
        return TableSource(value)
    if value is None:
        raise invalid("Missing required field [%s]", what)
    if not isinstance(value, Mapping):
        raise invalid("Field [%s] must be a string or an object", what)
    kind = value.get("type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        if kind == "filtered":
            raise QueryUnsupported(f"dataSource type [{kind}] is not supported")
        raise invalid("Unknown dataSource type [%s]", kind)
    return parser(value, parse_query, what)


def _table(value: Mapping[str, Any], parse_query: ParseQuery, what: str) -> DataSource:
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise invalid("Table dataSource needs a non-empty [name]")
    return TableSource(name)


def _union(value: Mapping[str, Any], parse_query: ParseQuery, what: str) -> DataSource:
    names = []
    for item in get_list(value, "dataSources", what="union dataSource"):
        inner = parse_data_source(item, parse_query, "dataSources of union")
        if not isinstance(inner, TableSource):
            raise invalid("A union dataSource holds tables only")
        names.append(inner.name)
    if not names:
        raise invalid("A union dataSource needs at least one table")
    return UnionSource(tuple(names))


def _inline(value: Mapping[str, Any], parse_query: ParseQuery, what: str) -> DataSource:
    columns = get_list(value, "columnNames", what="inline dataSource")
    if not columns or not all(isinstance(c, str) and c for c in columns) or len(set(columns)) != len(columns):
        raise invalid("An inline dataSource needs distinct, non-empty [columnNames]")
    types = value.get("columnTypes") or [None] * len(columns)
    if not isinstance(types, list) or len(types) != len(columns):
        raise invalid("Field [columnTypes] of inline dataSource must list one type per column")
    for t in types:
        if t is not None and t not in INLINE_TYPES:
            raise invalid(
                "Column type [%s] of inline dataSource is not one of %s", t, ", ".join(INLINE_TYPES)
            )
    rows = []
    for row in get_list(value, "rows", [], what="inline dataSource"):
        if not isinstance(row, list) or len(row) != len(columns):
            raise invalid("Each row of an inline dataSource holds one value per column")
        rows.append(tuple(row))
    return InlineSource(tuple(columns), tuple(types), tuple(rows))


def _lookup(value: Mapping[str, Any], parse_query: ParseQuery, what: str) -> DataSource:
    name = get_str(value, "lookup", what="lookup dataSource")
    if not name:
        raise invalid("A lookup dataSource needs a [lookup] name")
    return LookupSource(name)


def _query(value: Mapping[str, Any], parse_query: ParseQuery, what: str) -> DataSource:
    return QuerySource(parse_query(as_object(value.get("query"), "query of the query dataSource")))


def _unnest(value: Mapping[str, Any], parse_query: ParseQuery, what: str) -> DataSource:
    base = parse_data_source(value.get("base"), parse_query, "base of unnest dataSource")
    if isinstance(base, (InlineSource, LookupSource, UnionSource)):
        raise QueryUnsupported(f"An unnest dataSource over a [{type(base).__name__}] is not supported")
    spec = value.get("virtualColumn")
    columns = parse_virtual_columns({"virtualColumns": [spec]}, "unnest dataSource").columns
    flt = parse_filter(value.get("unnestFilter"))
    if flt is not None and not flt.columns() <= {columns[0].name}:
        raise invalid(
            "The unnestFilter of an unnest dataSource may read only its output column [%s]", columns[0].name
        )
    return UnnestSource(base, columns[0], flt)


def _join(value: Mapping[str, Any], parse_query: ParseQuery, what: str) -> DataSource:
    left = parse_data_source(value.get("left"), parse_query, "left of join dataSource")
    right = parse_data_source(value.get("right"), parse_query, "right of join dataSource")
    if not isinstance(right, (InlineSource, LookupSource, QuerySource)):
        raise invalid("The right of a join dataSource must be an inline, lookup or query dataSource")
    prefix = get_str(value, "rightPrefix", what="join dataSource") or ""
    if not prefix or "__time".startswith(prefix):
        raise invalid("Field [rightPrefix] of join dataSource must be non-empty and no prefix of [__time]")
    join_type = (get_str(value, "joinType", "INNER", what="join dataSource") or "INNER").upper()
    if join_type not in JOIN_TYPES:
        raise QueryUnsupported(f"Join type [{join_type}] is not supported; use INNER or LEFT")
    condition = get_str(value, "condition", what="join dataSource")
    if not condition:
        raise invalid("A join dataSource needs a [condition]")
    try:
        keys = _equi_keys(parse_expression(condition), prefix)
    except ValueError:
        raise invalid(
            "A join condition must be an equality (or an AND of equalities) between an expression of "
            "the left side and a column of the right side, got [%s]",
            condition,
        ) from None
    return JoinSource(left, right, prefix, condition, tuple(keys), join_type)


def _equi_keys(tree: Node, prefix: str) -> list[tuple[Node, str]]:
    """The condition's `left expression == "prefix.column"` terms (an AND of them), as Druid
    requires of a native join."""
    if isinstance(tree, Binary) and tree.op == "&&":
        return _equi_keys(tree.left, prefix) + _equi_keys(tree.right, prefix)
    if isinstance(tree, Binary) and tree.op == "==":
        for expr, ref in ((tree.left, tree.right), (tree.right, tree.left)):
            if isinstance(ref, Identifier) and ref.name.startswith(prefix):
                if any(name.startswith(prefix) for name in identifiers(expr)):
                    break
                return [(expr, ref.name[len(prefix) :])]
    raise ValueError("not an equi-join condition")


_PARSERS: dict[str, Callable[[Mapping[str, Any], ParseQuery, str], DataSource]] = {
    "table": _table,
    "union": _union,
    "inline": _inline,
    "lookup": _lookup,
    "query": _query,
    "unnest": _unnest,
    "join": _join,
}


def right_columns(source: JoinSource, inline: InlineSource) -> Sequence[str]:
    """The right side's columns as the joined row names them (prefixed)."""
    return [source.prefix + c for c in inline.columns]
