"""A query's `virtualColumns`: named expressions every other part of the query reads as columns.

Druid's virtual columns are computed per row before filters, dimensions and aggregators see them,
and shadow a physical column of the same name. Here the engine adds them as one projection over
the segment relation; a virtual column may read another (cycles are an error, as in Druid).

- `expression` (name, expression, outputType): an expression; an array result declared STRING is
  a multi-value STRING, as Druid coerces it;
- `nested-field` (columnName, outputName, path or pathParts, expectedType, processFromRaw): a
  path of a COMPLEX<json> column, `json_value` of it (`json_query` with processFromRaw or an
  expected COMPLEX<json>);
- `mv-filtered` (name, delegate, values, isAllowList): the values of a multi-value column that
  are (or are not) listed; a row left with none is null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strata.query.columns import TIME_COLUMN
from strata.query.duck import quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.json_functions import canonical_path, path_parts
from strata.query.expressions.parser import (
    ArrayLiteral,
    Call,
    Identifier,
    Lambda,
    Literal,
    Node,
    identifiers,
    parse_expression,
)
from strata.query.expressions.typed import (
    ARRAY_STRING,
    NAMED_KINDS,
    STRING,
    Typed,
    as_array,
    cast_to,
    is_array_kind,
)
from strata.query.fields import as_object, get_bool, get_list, get_str


@dataclass(frozen=True, slots=True)
class VirtualColumn:
    name: str
    expression: str
    output_type: str | None  # as given (LONG, FLOAT, DOUBLE, STRING, ARRAY<...>), None to infer
    tree: Node
    spec: Any = None  # a nested-field or mv-filtered column's own JSON (None: an expression)

    def to_json(self) -> dict[str, Any]:
        if self.spec is not None:
            return dict(self.spec)
        return {
            "type": "expression",
            "name": self.name,
            "expression": self.expression,
            "outputType": self.output_type,
        }

    def compile(self, scope: Mapping[str, str]) -> Typed:
        typed = compile_expression(self.tree, scope)
        kind = None if self.output_type is None else NAMED_KINDS[self.output_type]
        if (typed.multi and (kind is None or not is_array_kind(kind))) or (
            kind == STRING and is_array_kind(typed.kind)
        ):
            # mapped values, or an array declared STRING: a multi-value STRING, as Druid reads them
            values = as_array(typed, ARRAY_STRING).sql
            if self.spec is not None and self.spec.get("type") == "mv-filtered":
                values = f"nullif({values}, CAST([] AS VARCHAR[]))"  # no value left: null, a row's
            return Typed(values, ARRAY_STRING, multi=True)
        return typed if kind is None else cast_to(typed, kind)


@dataclass(frozen=True, slots=True)
class VirtualColumns:
    columns: tuple[VirtualColumn, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.columns)

    @property
    def names(self) -> set[str]:
        return {c.name for c in self.columns}

    def to_json(self) -> list[dict[str, Any]]:
        return [c.to_json() for c in self.columns]

    def needed(self, wanted: Iterable[str]) -> list[VirtualColumn]:
        """The virtual columns `wanted` reads, directly or through each other, dependencies first.

        A name made by `expression_column` (an aggregator's `expression` input) is an implicit
        virtual column of that expression.
        """
        wanted = list(wanted)
        by_name = {c.name: c for c in self.columns}
        for name in wanted:
            if name.startswith(EXPRESSION_PREFIX) and name not in by_name:
                text = name.removeprefix(EXPRESSION_PREFIX)
                by_name[name] = VirtualColumn(name, text, None, parse_expression(text))
        out: list[VirtualColumn] = []
        state: dict[str, int] = {}  # 1 visiting, 2 done

        def visit(name: str) -> None:
            if name not in by_name or state.get(name) == 2:
                return
            if state.get(name) == 1:
                raise invalid("Virtual column [%s] refers to itself through other virtual columns", name)
            state[name] = 1
            for dep in sorted(identifiers(by_name[name].tree)):
                visit(dep)
            state[name] = 2
            out.append(by_name[name])

        for name in wanted:
            visit(name)
        return out

    def physical(self, wanted: Iterable[str]) -> list[str]:
        """The stored columns `wanted` needs: itself minus virtual names, plus what they read."""
        wanted = list(wanted)
        needed = self.needed(wanted)
        virtual = {c.name for c in needed}
        cols = [c for c in wanted if c not in virtual]
        for c in needed:
            cols += sorted(i for i in identifiers(c.tree) if i not in virtual)
        return list(dict.fromkeys(c for c in cols if c != TIME_COLUMN))

    def project(
        self, relation: str, types: Mapping[str, str], wanted: Sequence[str]
    ) -> tuple[str, dict[str, str]]:
        """`relation` with the virtual columns `wanted` reads added (or replacing same-named ones)."""
        needed = self.needed(wanted)
        scope: dict[str, str] = dict(types)
        depth: dict[str, int] = {}
        layers: list[list[VirtualColumn]] = []
        for column in needed:  # dependencies come first, so their depth is known
            deps = [depth[i] for i in identifiers(column.tree) if i in depth]
            depth[column.name] = 1 + max(deps, default=-1)
            if depth[column.name] == len(layers):
                layers.append([])
            layers[depth[column.name]].append(column)
        for layer in layers:  # one projection per layer: a column reads the layers below it
            compiled = {column.name: column.compile(scope) for column in layer}
            shadowed = [n for n in compiled if n in scope]
            star = "*" if not shadowed else f"* EXCLUDE ({', '.join(map(quote_ident, shadowed))})"
            extra = ", ".join(f"{t.sql} AS {quote_ident(n)}" for n, t in compiled.items())
            relation = f"SELECT {star}, {extra} FROM ({relation})"
            scope.update({n: t.duck_type for n, t in compiled.items()})
        return relation, scope


NO_VIRTUAL_COLUMNS = VirtualColumns()
EXPRESSION_PREFIX = "__expression:"


def expression_column(expression: str) -> str:
    """The name under which an aggregator reads an expression (checked here, computed per row)."""
    compile_expression(parse_expression(expression), {})
    return EXPRESSION_PREFIX + expression


def parse_virtual_columns(obj: Mapping[str, Any], what: str) -> VirtualColumns:
    specs = get_list(obj, "virtualColumns", [], what=what)
    out: list[VirtualColumn] = []
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        where = f"virtualColumns[{i}]"
        spec = as_object(spec, where)
        kind = spec.get("type", "expression")
        if not isinstance(kind, str):
            raise invalid("Field [type] of %s must be a string", where)
        parser = _PARSERS.get(kind)
        if parser is None:
            raise QueryUnsupported(f"Virtual column type [{kind}] is not supported")
        column = parser(spec, where)
        if not column.name:
            raise invalid("Field [name] of %s must not be empty", where)
        if column.name == TIME_COLUMN:
            raise invalid("Virtual column name [%s] is reserved", column.name)
        if column.name in seen:
            raise invalid("Duplicate virtual column name [%s]", column.name)
        seen.add(column.name)
        compile_expression(column.tree, {})  # functions and their literal arguments checked up front
        out.append(column)
    columns = VirtualColumns(tuple(out))
    columns.needed(seen)  # a cycle is an error even when nothing reads it
    return columns


def _output_type(spec: Mapping[str, Any], key: str, where: str, default: str | None) -> str | None:
    output = spec.get(key, default)
    if output is None:
        return None
    if not isinstance(output, str) or output.upper() not in NAMED_KINDS:
        raise invalid("Field [%s] of %s must be one of %s", key, where, ", ".join(NAMED_KINDS))
    return output.upper()


def _expression_column(spec: Mapping[str, Any], where: str) -> VirtualColumn:
    name = get_str(spec, "name", what=where) or ""
    expression = get_str(spec, "expression", what=where)
    if expression is None:
        raise invalid("Missing field [expression] of %s", where)
    output = _output_type(spec, "outputType", where, None)
    return VirtualColumn(name, expression, output, parse_expression(expression))


def _nested_column(spec: Mapping[str, Any], where: str) -> VirtualColumn:
    """`nested-field`: json_value of a path (json_query when processing raw JSON or asked for
    COMPLEX<json>)."""
    name = get_str(spec, "outputName", what=where) or get_str(spec, "name", what=where) or ""
    column = get_str(spec, "columnName", what=where)
    if not column:
        raise invalid("Missing field [columnName] of %s", where)
    if get_bool(spec, "useJqSyntax", False, what=where):
        raise QueryUnsupported("Nested field virtual columns with [useJqSyntax] are not supported")
    parts = _nested_parts(spec, where)
    path = canonical_path(parts)
    expected = _output_type(spec, "expectedType", where, "STRING") or "STRING"
    raw = get_bool(spec, "processFromRaw", False, what=where)
    if raw or expected == "COMPLEX<JSON>":
        tree: Node = Call("json_query", (Identifier(column), Literal(path)))
        output = "COMPLEX<JSON>"
    else:
        tree = Call("json_value", (Identifier(column), Literal(path), Literal(expected)))
        output = expected
    canonical = {"type": "nested-field", "columnName": column, "outputName": name, "expectedType": output,
                 "path": path, "processFromRaw": raw}  # fmt: skip
    return VirtualColumn(name, "", output, tree, canonical)


def _nested_parts(spec: Mapping[str, Any], where: str) -> list[str | int]:
    path = spec.get("path")
    if isinstance(path, str):
        return path_parts(path)
    parts: list[str | int] = []
    for part in get_list(spec, "pathParts", what=where):
        part = as_object(part, f"pathParts of {where}")
        if part.get("type") == "field" and isinstance(part.get("field"), str):
            parts.append(part["field"])
        elif part.get("type") == "arrayElement" and isinstance(part.get("index"), int):
            parts.append(part["index"])
        else:
            raise invalid("Path parts of %s are {type: field, field} or {type: arrayElement, index}", where)
    return parts


def _mv_filtered_column(spec: Mapping[str, Any], where: str) -> VirtualColumn:
    """`mv-filtered`: the listed values (or the others) of a multi-value column."""
    name = get_str(spec, "name", what=where) or ""
    delegate = get_str(spec, "delegate", what=where)
    if not delegate:
        raise invalid("Missing field [delegate] of %s", where)
    values = get_list(spec, "values", what=where)
    if not all(isinstance(v, str) or v is None for v in values):
        raise invalid("Field [values] of %s must hold strings", where)
    allow = get_bool(spec, "isAllowList", True, what=where)
    listed = ArrayLiteral(tuple(Literal(v) for v in values), "STRING")
    x = Identifier("__v")
    has_null = Literal(1 if None in values else 0)
    test: Node = Call("case_searched", (Call("isnull", (x,)), has_null, Call("scalar_in_array", (x, listed))))
    keep = test if allow else Call("case_searched", (test, Literal(0), Literal(1)))
    tree = Call("array_to_mv", (Call("filter", (Lambda(("__v",), keep), Identifier(delegate))),))
    canonical = {"type": "mv-filtered", "name": name, "delegate": delegate, "values": list(values),
                 "isAllowList": allow}  # fmt: skip
    return VirtualColumn(name, "", "STRING", tree, canonical)


_PARSERS = {
    "expression": _expression_column,
    "nested-field": _nested_column,
    "nested": _nested_column,
    "mv-filtered": _mv_filtered_column,
}
