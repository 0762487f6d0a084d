"""Dimension specs: which column a topN/groupBy groups on, its output name and type.

A multi-value STRING dimension groups each value on its own (the engine explodes the rows first,
`strata.engine.multi_value`); an ARRAY dimension groups whole arrays; a COMPLEX<json> dimension
groups nested values by their JSON text, as Druid groups them. The filtered specs
(`listFiltered`, `regexFiltered`, `prefixFiltered`) keep only the values they match, so a row
whose values are all dropped groups under null, as in Druid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import is_list, quote_ident, quote_str
from strata.query.errors import QueryUnsupported, invalid
from strata.query.extraction_fns import ExtractionFn, parse_extraction_fn
from strata.query.fields import get_bool, get_list, get_str
from strata.query.regex_check import check_regex

COMPLEX_JSON = "COMPLEX<json>"
OUTPUT_TYPES = (
    "STRING", "LONG", "FLOAT", "DOUBLE", "ARRAY<STRING>", "ARRAY<LONG>", "ARRAY<DOUBLE>", COMPLEX_JSON,
)  # fmt: skip
_SQL = {
    "STRING": "VARCHAR",
    "LONG": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    "ARRAY<STRING>": "VARCHAR[]",
    "ARRAY<LONG>": "BIGINT[]",
    "ARRAY<DOUBLE>": "DOUBLE[]",
    COMPLEX_JSON: "JSON",
}
FILTERED_SPECS = ("listFiltered", "regexFiltered", "prefixFiltered")


def output_sql_type(output_type: str) -> str:
    """The DuckDB type of a dimension's output type."""
    return _SQL[output_type]


@dataclass(frozen=True, slots=True)
class ValueFilter:
    """The values a filtered dimension spec keeps (`json`: the spec minus its delegate)."""

    kind: str  # listFiltered, regexFiltered or prefixFiltered
    values: tuple[str | None, ...] = ()
    keep: bool = True  # listFiltered's isWhitelist
    pattern: str = ""  # the regex or the prefix

    def sql(self, value: str) -> str:
        """Whether the value (a VARCHAR expression, maybe null) is kept."""
        if self.kind == "listFiltered":
            present = [quote_str(v) for v in self.values if v is not None]
            listed = f"coalesce({value} IN ({', '.join(present)}), false)" if present else "false"
            if None in self.values:
                listed = f"({listed} OR {value} IS NULL)"
            return listed if self.keep else f"(NOT {listed})"
        if self.kind == "regexFiltered":
            return f"coalesce(regexp_matches({value}, {quote_str(self.pattern)}), false)"
        return f"coalesce(starts_with({value}, {quote_str(self.pattern)}), false)"

    def to_json(self) -> dict[str, Any]:
        if self.kind == "listFiltered":
            return {"type": self.kind, "values": list(self.values), "isWhitelist": self.keep}
        return {"type": self.kind, ("pattern" if self.kind == "regexFiltered" else "prefix"): self.pattern}


@dataclass(frozen=True, slots=True)
class DimensionSpec:
    dimension: str
    output_name: str
    output_type: str = "STRING"
    extraction_fn: ExtractionFn | None = None  # an `extraction` spec: values mapped, as strings
    value_filter: ValueFilter | None = None  # a filtered spec around this one

    def sql(self, types: Mapping[str, str]) -> str:
        """The grouping value of a row: the column cast to the output type (a multi-value column
        was exploded to one value a row before, and its values filtered there)."""
        value = self._value_sql(types)
        if self.value_filter is None or is_list(types.get(self.dimension)):
            return value
        return f"(CASE WHEN {self.value_filter.sql(quote_ident(self.dimension))} THEN {value} END)"

    def _value_sql(self, types: Mapping[str, str]) -> str:
        if self.extraction_fn is not None:
            return self.extraction_fn.sql(self.dimension, types)
        ident = quote_ident(self.dimension)
        source = types.get(self.dimension, "VARCHAR")
        target = _SQL[self.output_type]
        if is_list(source):
            return ident if not is_list(target) or source == target else f"TRY_CAST({ident} AS {target})"
        if is_list(target):
            return f"(CASE WHEN {ident} IS NULL THEN NULL ELSE [TRY_CAST({ident} AS {target[:-2]})] END)"
        if source == target:
            return ident
        if source == "BLOB":
            raise invalid("Cannot group on [%s]: it holds sketches", self.dimension)
        if target == "BIGINT" and source in ("DOUBLE", "FLOAT"):
            return f"CAST(trunc({ident}) AS BIGINT)"
        if target == "BIGINT" and source == "VARCHAR":
            return f"CAST(trunc(TRY_CAST({ident} AS DOUBLE)) AS BIGINT)"
        return f"TRY_CAST({ident} AS {target})"

    def to_json(self) -> dict[str, Any]:
        if self.value_filter is not None:
            inner = DimensionSpec(self.dimension, self.output_name, self.output_type, self.extraction_fn)
            return {**self.value_filter.to_json(), "delegate": inner.to_json()}
        if self.extraction_fn is not None:
            return {
                "type": "extraction",
                "dimension": self.dimension,
                "outputName": self.output_name,
                "outputType": self.output_type,
                "extractionFn": dict(self.extraction_fn.json),
            }
        return {
            "type": "default",
            "dimension": self.dimension,
            "outputName": self.output_name,
            "outputType": self.output_type,
        }


def parse_dimension_spec(value: Any, what: str = "dimension") -> DimensionSpec:
    if isinstance(value, str):
        if not value:
            raise invalid("%s must not be empty", what)
        return DimensionSpec(value, value)
    if not isinstance(value, Mapping):
        raise invalid("%s must be a dimension name or a dimension spec object", what)
    kind = value.get("type", "default")
    if kind in FILTERED_SPECS:
        return _parse_filtered(value, kind, what)
    if kind == "lookup":
        value = _lookup_as_extraction(value, what)
        kind = "extraction"
    if kind not in ("default", "extraction"):
        raise QueryUnsupported(f"Dimension spec type [{kind}] is not supported")
    extraction = None
    if kind == "extraction" or value.get("extractionFn") is not None:
        if value.get("extractionFn") is None:
            raise invalid("Missing field [extractionFn] of %s", what)
        extraction = parse_extraction_fn(value["extractionFn"])
    dimension = get_str(value, "dimension", what=what)
    if not dimension:
        raise invalid("Field [dimension] of %s must not be empty", what)
    output_name = get_str(value, "outputName", dimension, what=what) or dimension
    output_type = str(get_str(value, "outputType", "STRING", what=what)).upper()
    output_type = COMPLEX_JSON if output_type == COMPLEX_JSON.upper() else output_type
    if output_type not in OUTPUT_TYPES:
        raise invalid("Field [outputType] of %s must be one of %s", what, ", ".join(OUTPUT_TYPES))
    if extraction is not None and output_type != "STRING":
        raise QueryUnsupported("An extraction dimension spec with a non-STRING outputType is not supported")
    return DimensionSpec(dimension, output_name, output_type, extraction)


def _lookup_as_extraction(value: Mapping[str, Any], what: str) -> dict[str, Any]:
    """Druid's `lookup` dimension spec (an inline `lookup` map or a registered lookup's `name`) as
    the extraction spec it means."""
    keys = ("retainMissingValue", "replaceMissingValueWith", "optimize")
    fn: dict[str, Any] = {k: value[k] for k in keys if k in value}
    if value.get("lookup") is not None and value.get("name") is not None:
        raise invalid("A lookup dimension spec takes [lookup] or [name], not both")
    if value.get("lookup") is not None:
        fn.update(type="lookup", lookup=value["lookup"])
    elif isinstance(value.get("name"), str):
        fn.update(type="registeredLookup", lookup=value["name"])
    else:
        raise invalid("%s: a lookup dimension spec needs a [lookup] map or a lookup [name]", what)
    rest = {k: v for k, v in value.items() if k in ("dimension", "outputName")}
    return {"type": "extraction", **rest, "extractionFn": fn}


def _parse_filtered(value: Mapping[str, Any], kind: str, what: str) -> DimensionSpec:
    inner = parse_dimension_spec(value.get("delegate"), f"delegate of {what}")
    if inner.value_filter is not None:
        raise QueryUnsupported("A filtered dimension spec around another filtered spec is not supported")
    if kind == "listFiltered":
        values = get_list(value, "values", what=f"{kind} dimension spec")
        if not all(v is None or isinstance(v, str) for v in values):
            raise invalid("Field [values] of %s dimension spec must hold strings", kind)
        keep = get_bool(value, "isWhitelist", True, what=f"{kind} dimension spec")
        filt = ValueFilter(kind, tuple(values), keep)
    elif kind == "regexFiltered":
        pattern = check_regex(get_str(value, "pattern", what=f"{kind} dimension spec") or "", kind)
        filt = ValueFilter(kind, pattern=pattern)
    else:
        prefix = get_str(value, "prefix", what=f"{kind} dimension spec")
        if prefix is None:
            raise invalid("Missing field [prefix] of %s dimension spec", kind)
        filt = ValueFilter(kind, pattern=prefix)
    return DimensionSpec(inner.dimension, inner.output_name, inner.output_type, inner.extraction_fn, filt)
