"""Dimension specs: which column a topN/groupBy groups on, its output name and type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.extraction_fns import ExtractionFn, parse_extraction_fn
from strata.query.fields import get_str

OUTPUT_TYPES = ("STRING", "LONG", "FLOAT", "DOUBLE")
_SQL = {"STRING": "VARCHAR", "LONG": "BIGINT", "FLOAT": "FLOAT", "DOUBLE": "DOUBLE"}


@dataclass(frozen=True, slots=True)
class DimensionSpec:
    dimension: str
    output_name: str
    output_type: str = "STRING"
    extraction_fn: ExtractionFn | None = None  # an `extraction` spec: values mapped, as strings

    def sql(self, types: Mapping[str, str]) -> str:
        """The grouping value of a row: the column cast to the output type."""
        if self.extraction_fn is not None:
            return self.extraction_fn.sql(self.dimension, types)
        ident = quote_ident(self.dimension)
        source = types.get(self.dimension, "VARCHAR")
        target = _SQL[self.output_type]
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
    if output_type not in OUTPUT_TYPES:
        raise invalid("Field [outputType] of %s must be one of %s", what, ", ".join(OUTPUT_TYPES))
    if extraction is not None and output_type != "STRING":
        raise QueryUnsupported("An extraction dimension spec with a non-STRING outputType is not supported")
    return DimensionSpec(dimension, output_name, output_type, extraction)
