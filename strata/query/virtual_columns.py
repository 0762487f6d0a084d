"""A query's `virtualColumns`: named expressions every other part of the query reads as columns.

Druid's `expression` virtual column (name, expression, outputType) is computed per row before
filters, dimensions and aggregators see it, and shadows a physical column of the same name. Here
the engine adds them as one projection over the segment relation; a virtual column may read
another (cycles are an error, as in Druid).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strata.query.columns import TIME_COLUMN
from strata.query.duck import quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.expressions.duck import compile_expression
from strata.query.expressions.parser import Node, identifiers, parse_expression
from strata.query.expressions.typed import DOUBLE, LONG, STRING, Typed, cast_to
from strata.query.fields import as_object, get_list, get_str

_OUTPUT_TYPES = {"LONG": LONG, "DOUBLE": DOUBLE, "FLOAT": DOUBLE, "STRING": STRING}


@dataclass(frozen=True, slots=True)
class VirtualColumn:
    name: str
    expression: str
    output_type: str | None  # as given (LONG, FLOAT, DOUBLE, STRING), None to infer
    tree: Node

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "expression",
            "name": self.name,
            "expression": self.expression,
            "outputType": self.output_type,
        }


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
            compiled: dict[str, Typed] = {}
            for column in layer:
                typed = compile_expression(column.tree, scope)
                if column.output_type is not None:
                    typed = cast_to(typed, _OUTPUT_TYPES[column.output_type])
                compiled[column.name] = typed
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
        if kind != "expression":
            raise QueryUnsupported(f"Virtual column type [{kind}] is not supported")
        name = get_str(spec, "name", what=where)
        if not name:
            raise invalid("Field [name] of %s must not be empty", where)
        if name == TIME_COLUMN:
            raise invalid("Virtual column name [%s] is reserved", name)
        if name in seen:
            raise invalid("Duplicate virtual column name [%s]", name)
        seen.add(name)
        expression = get_str(spec, "expression", what=where)
        if expression is None:
            raise invalid("Missing field [expression] of %s", where)
        output = spec.get("outputType")
        if output is not None:
            if not isinstance(output, str) or output.upper() not in _OUTPUT_TYPES:
                raise invalid("Field [outputType] of %s must be one of LONG, FLOAT, DOUBLE, STRING", where)
            output = output.upper()
        tree = parse_expression(expression)
        compile_expression(tree, {})  # functions and their literal arguments checked up front
        out.append(VirtualColumn(name, expression, output, tree))
    columns = VirtualColumns(tuple(out))
    columns.needed(seen)  # a cycle is an error even when nothing reads it
    return columns
