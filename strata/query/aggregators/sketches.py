"""Distinct counts with HLL sketches: `HLLSketchBuild`, `HLLSketchMerge` and `cardinality`.

The intermediate is a serialized compact DataSketches HLL sketch (a binary column), merged by
sketch union and finalized to the estimate. `HLLSketchMerge` reads sketches ingested into a metric
column; `HLLSketchBuild` and `cardinality` sketch raw values at query time. Druid's cardinality
aggregator uses its own HyperLogLog collector; this one uses a DataSketches sketch of the same
size (2^11 buckets), so estimates agree within HLL error but are not bit-identical.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from strata.query.aggregators.base import (
    Aggregator,
    agg_name,
    aggregator_type,
    aliased,
    as_array,
    field_name,
    filtered,
    json_values,
)
from strata.query.duck import quote_ident, quote_str
from strata.query.errors import invalid
from strata.query.fields import get_bool, get_int, get_list, get_str
from strata.query.sketch_functions import HLL_BUILD, HLL_TYPES, HLL_UNION, estimates

DEFAULT_LG_K = 12
CARDINALITY_LG_K = 11


@dataclass(frozen=True)
class SketchAggregator(Aggregator):
    """Shared by every HLL-sketch aggregator: union merge, estimate finalize."""

    type_name = "sketch"
    name: str
    lg_k: int
    tgt_type: str
    round: bool

    def intermediate_fields(self, col: str) -> list[pa.Field]:
        return [pa.field(col, pa.binary())]

    def split_invariant(self) -> bool:
        return False

    def _union(self, list_sql: str) -> str:
        return f"{HLL_UNION}({list_sql}, {self.lg_k}, {quote_str(self.tgt_type)})"

    def merge_sql(self, col: str) -> list[str]:
        return [aliased(self._union(f"list({quote_ident(col)})"), col)]

    def finalize(self, table: pa.Table, col: str) -> pa.Array:
        values = estimates(as_array(table.column(col)))
        if self.round:
            return pc.cast(pc.floor(pc.add(values, 0.5)), pa.int64())
        return values

    def raw(self, table: pa.Table, col: str) -> pa.Array:
        return as_array(table.column(col))

    def unfinalized_json(self, table: pa.Table, col: str) -> list[Any]:
        return json_values(self.raw(table, col))  # base64 of the compact sketch, as Druid's serializer


def _build_sql(
    columns: Sequence[str], types: Mapping[str, str], cond: str | None, lg_k: int, tgt: str
) -> str:
    """A sketch over the distinct values of `columns` (one list per column, concatenated)."""
    elem_types = {types.get(c, "VARCHAR") for c in columns}
    if len(elem_types) == 1 and (elem := elem_types.pop()) in ("BIGINT", "DOUBLE"):
        lists = [filtered(f"list(DISTINCT {quote_ident(c)})", cond) for c in columns]
    else:
        elem = "VARCHAR"
        lists = [filtered(f"list(DISTINCT CAST({quote_ident(c)} AS VARCHAR))", cond) for c in columns]
    combined = lists[0]
    for more in lists[1:]:
        combined = f"list_concat({combined}, {more})"
    return f"{HLL_BUILD[elem]}({combined}, {lg_k}, {quote_str(tgt)})"


@dataclass(frozen=True)
class _HllFieldAggregator(SketchAggregator):
    """HLLSketchBuild and HLLSketchMerge: one input column, Druid's HLL sketch JSON."""

    field: str = ""

    def columns(self) -> set[str]:
        return {self.field}

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type_name,
            "name": self.name,
            "fieldName": self.field,
            "lgK": self.lg_k,
            "tgtHllType": self.tgt_type,
            "round": self.round,
        }


@dataclass(frozen=True)
class HllBuildAggregator(_HllFieldAggregator):
    type_name = "HLLSketchBuild"

    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        if types.get(self.field) == "BLOB":
            raise invalid(
                "Aggregator [%s]: column [%s] holds sketches; use HLLSketchMerge", self.name, self.field
            )
        return [aliased(_build_sql([self.field], types, cond, self.lg_k, self.tgt_type), col)]


@dataclass(frozen=True)
class HllMergeAggregator(_HllFieldAggregator):
    type_name = "HLLSketchMerge"

    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        source = types.get(self.field, "VARCHAR")
        if source != "BLOB":
            # no segment has this sketch column: every group's sketch is empty
            return [aliased(self._union(filtered("list(CAST(NULL AS BLOB))", cond)), col)]
        return [aliased(self._union(filtered(f"list({quote_ident(self.field)})", cond)), col)]


@dataclass(frozen=True)
class CardinalityAggregator(SketchAggregator):
    type_name = "cardinality"
    fields: tuple[str, ...] = ()
    by_row: bool = False

    def columns(self) -> set[str]:
        return set(self.fields)

    def partial_sql(self, col: str, types: Mapping[str, str], cond: str | None) -> list[str]:
        if not self.by_row or len(self.fields) == 1:
            return [aliased(_build_sql(self.fields, types, cond, self.lg_k, self.tgt_type), col)]
        # one value per row: the row's values joined by a separator Druid's values never hold
        parts = ", ".join(f"coalesce(CAST({quote_ident(f)} AS VARCHAR), '')" for f in self.fields)
        any_set = " OR ".join(f"{quote_ident(f)} IS NOT NULL" for f in self.fields)
        row_cond = f"({any_set})" if cond is None else f"({cond}) AND ({any_set})"
        values = filtered(f"list(DISTINCT concat_ws(chr(1), {parts}))", row_cond)
        build = f"{HLL_BUILD['VARCHAR']}({values}, {self.lg_k}, {quote_str(self.tgt_type)})"
        return [aliased(build, col)]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "cardinality",
            "name": self.name,
            "fields": list(self.fields),
            "byRow": self.by_row,
            "round": self.round,
        }


def _sketch_params(obj: Mapping[str, Any], name: str) -> dict[str, Any]:
    what = f"aggregator [{name}]"
    lg_k = get_int(obj, "lgK", DEFAULT_LG_K, what=what)
    if not 4 <= lg_k <= 21:
        raise invalid("Field [lgK] of %s must be between 4 and 21, got %d", what, lg_k)
    tgt = get_str(obj, "tgtHllType", "HLL_4", what=what)
    if tgt not in HLL_TYPES:
        raise invalid("Field [tgtHllType] of %s must be HLL_4, HLL_6 or HLL_8, got %s", what, tgt)
    return {"lg_k": lg_k, "tgt_type": tgt, "round": get_bool(obj, "round", False, what=what)}


@aggregator_type("HLLSketchBuild")
def _hll_build(obj: Mapping[str, Any]) -> Aggregator:
    name = agg_name(obj, "HLLSketchBuild")
    return HllBuildAggregator(
        name=name, field=field_name(obj, "HLLSketchBuild", name), **_sketch_params(obj, name)
    )


@aggregator_type("HLLSketchMerge")
def _hll_merge(obj: Mapping[str, Any]) -> Aggregator:
    name = agg_name(obj, "HLLSketchMerge")
    return HllMergeAggregator(
        name=name, field=field_name(obj, "HLLSketchMerge", name), **_sketch_params(obj, name)
    )


@aggregator_type("cardinality")
def _cardinality(obj: Mapping[str, Any]) -> Aggregator:
    name = agg_name(obj, "cardinality")
    what = f"aggregator [{name}]"
    raw_fields = get_list(obj, "fields", what=what)
    if not raw_fields:
        raise invalid("Field [fields] of %s must not be empty", what)
    fields: list[str] = []
    for f in raw_fields:
        if isinstance(f, dict):
            if f.get("type", "default") != "default" or f.get("extractionFn") is not None:
                from strata.query.errors import QueryUnsupported

                raise QueryUnsupported(f"{what}: only default dimension specs are supported in [fields]")
            f = f.get("dimension")
        if not isinstance(f, str) or not f:
            raise invalid("Field [fields] of %s must hold dimension names", what)
        fields.append(f)
    return CardinalityAggregator(
        name=name,
        lg_k=CARDINALITY_LG_K,
        tgt_type="HLL_4",
        round=get_bool(obj, "round", False, what=what),
        fields=tuple(fields),
        by_row=get_bool(obj, "byRow", False, what=what),
    )
