"""segmentMetadata: per-segment column analysis (types, nulls, cardinality, min/max, sizes).

Partials hold one row per segment: `__segment` and the analysis as JSON text. With `merge:true`
the broker folds every analysis into one entry with id "merged" the way Druid's ColumnAnalysis
folds (types must agree, sizes add, cardinality takes the max, min/max widen). String cardinality
counts NULL as a value when a column has nulls, and minValue is then null, as Druid's dictionary
(which holds null first) reports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import orjson
import pyarrow as pa

from strata.query.base import SEGMENT_COLUMN, CommonFields, Query, register
from strata.query.cache_key import to_json_bytes
from strata.query.columns import TIME_COLUMN
from strata.query.druid_types import druid_type
from strata.query.errors import invalid
from strata.query.fields import as_object, get_bool, get_list
from timeline import Interval, condense_intervals

if TYPE_CHECKING:
    pass

ANALYSIS_TYPES = (
    "cardinality",
    "size",
    "interval",
    "aggregators",
    "minmax",
    "timestampSpec",
    "queryGranularity",
    "rollup",
)
DEFAULT_ANALYSIS = ("cardinality", "interval", "minmax")
ANALYSIS_COLUMN = "analysis"
MERGED_ID = "merged"
_COMBINING = {"count": "longSum", "HLLSketchBuild": "HLLSketchMerge"}


def combining_aggregator(agg: Mapping[str, Any]) -> dict[str, Any]:
    """The aggregator that re-aggregates a stored metric, as Druid reports in `aggregators`."""
    out = {k: v for k, v in agg.items() if k not in ("fieldName", "fieldNames", "expression")}
    out["type"] = _COMBINING.get(str(agg.get("type")), agg.get("type"))
    out["fieldName"] = agg.get("name")
    return out


@register
@dataclass(frozen=True, kw_only=True)
class SegmentMetadataQuery(Query):
    query_type = "segmentMetadata"
    intervals_required = False

    to_include: tuple[str, ...] | None = None  # None = all columns
    merge_all: bool = False
    analysis_types: tuple[str, ...] = DEFAULT_ANALYSIS
    aggregator_merge_strategy: str = "strict"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        to_include: tuple[str, ...] | None = None
        if obj.get("toInclude") is not None:
            spec = as_object(obj["toInclude"], "toInclude")
            kind = spec.get("type")
            if kind == "none":
                to_include = ()
            elif kind == "list":
                cols = get_list(spec, "columns", what="toInclude")
                if not all(isinstance(c, str) for c in cols):
                    raise invalid("Field [columns] of toInclude must hold strings")
                to_include = tuple(cols)
            elif kind != "all":
                raise invalid("Unknown toInclude type [%s]; expected all, none or list", kind)
        types = get_list(obj, "analysisTypes", list(DEFAULT_ANALYSIS), what="segmentMetadata query")
        for t in types:
            if t not in ANALYSIS_TYPES:
                raise invalid("Unknown analysisType [%s]; known: %s", t, ", ".join(ANALYSIS_TYPES))
        strategy = obj.get("aggregatorMergeStrategy")
        if strategy is None:
            lenient = get_bool(obj, "lenientAggregatorMerge", False, what="segmentMetadata query")
            strategy = "lenient" if lenient else "strict"
        if strategy not in ("strict", "lenient", "earliest", "latest"):
            raise invalid("Unknown aggregatorMergeStrategy [%s]", strategy)
        return cls(
            **common.as_kwargs(),
            to_include=to_include,
            merge_all=get_bool(obj, "merge", False, what="segmentMetadata query"),
            analysis_types=tuple(dict.fromkeys(types)),
            aggregator_merge_strategy=strategy,
        )

    def to_json(self) -> dict[str, Any]:
        out = self.common_json()
        if self.to_include is None:
            out["toInclude"] = {"type": "all"}
        elif not self.to_include:
            out["toInclude"] = {"type": "none"}
        else:
            out["toInclude"] = {"type": "list", "columns": list(self.to_include)}
        out["merge"] = self.merge_all
        out["analysisTypes"] = list(self.analysis_types)
        out["aggregatorMergeStrategy"] = self.aggregator_merge_strategy
        return out

    def cache_key(self) -> bytes:
        spec = {"toInclude": self.to_json()["toInclude"], "analysisTypes": sorted(self.analysis_types)}
        return self.query_type.encode() + b":" + to_json_bytes(spec)

    def wants(self, analysis: str) -> bool:
        return analysis in self.analysis_types

    # -- one column's analysis, from the stats the engine (strata.engine.segment_metadata) reads
    def column_analysis(
        self, name: str, arrow_type: pa.DataType, stat: Mapping[str, Any], size: int,
        signature: str | None = None, multi_value: bool = False,
    ) -> dict[str, Any]:  # fmt: skip
        """`signature`: the column's Druid type when the segment says it (else from `arrow_type`);
        `multi_value`: a STRING column stored as lists in this segment."""
        signature = signature or druid_type(arrow_type)
        is_string = signature == "STRING"
        has_nulls = bool(stat.get("hasNulls", False)) and name != TIME_COLUMN
        cardinality = None
        if is_string and self.wants("cardinality"):
            cardinality = int(stat.get("distinct", 0)) + (1 if has_nulls else 0)
        low = high = None
        if is_string and self.wants("minmax"):
            low = None if has_nulls else stat.get("min")
            high = stat.get("max")
        type_name = signature[len("COMPLEX<") : -1] if signature.startswith("COMPLEX<") else signature
        return {
            "typeSignature": signature,
            "type": type_name,
            "hasMultipleValues": multi_value,
            "hasNulls": has_nulls,
            "size": size,
            "cardinality": cardinality,
            "minValue": low,
            "maxValue": high,
            "errorMessage": None,
        }

    # -- merge and finalize -----------------------------------------------------------------------
    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        tables = [p for p in partials if p.num_rows]
        if not tables:
            return pa.table(
                {SEGMENT_COLUMN: pa.array([], pa.string()), ANALYSIS_COLUMN: pa.array([], pa.string())}
            )
        merged = pa.concat_tables(tables)
        if not self.merge_all:
            return merged
        analyses = [orjson.loads(a) for a in merged.column(ANALYSIS_COLUMN).to_pylist()]
        folded = analyses[0]
        for other in analyses[1:]:
            folded = self._fold(folded, other)
        folded["id"] = MERGED_ID
        return pa.table(
            {
                SEGMENT_COLUMN: pa.array([MERGED_ID], pa.string()),
                ANALYSIS_COLUMN: pa.array([orjson.dumps(folded).decode()], pa.string()),
            }
        )

    def finalize(self, merged: pa.Table) -> list[Any]:
        return [orjson.loads(a) for a in merged.column(ANALYSIS_COLUMN).to_pylist()]

    def _fold(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        intervals = None
        if a["intervals"] is not None or b["intervals"] is not None:
            texts = [*(a["intervals"] or []), *(b["intervals"] or [])]
            intervals = [str(i) for i in condense_intervals(Interval.parse(t) for t in texts)]
        columns = dict(a["columns"])
        for name, col in b["columns"].items():
            columns[name] = _fold_column(columns[name], col) if name in columns else col
        return {
            "id": MERGED_ID,
            "intervals": intervals,
            "columns": dict(sorted(columns.items())),
            "size": a["size"] + b["size"],
            "numRows": a["numRows"] + b["numRows"],
            "aggregators": self._fold_aggregators(a["aggregators"], b["aggregators"]),
            "timestampSpec": None,
            "queryGranularity": a["queryGranularity"]
            if a["queryGranularity"] == b["queryGranularity"]
            else None,
            "rollup": a["rollup"] if a["rollup"] == b["rollup"] else None,
        }

    def _fold_aggregators(self, a: dict[str, Any] | None, b: dict[str, Any] | None) -> dict[str, Any] | None:
        if a is None or b is None:
            return None if self.aggregator_merge_strategy == "strict" else (a or b)
        out = dict(a)
        for name, agg in b.items():
            if name not in out or self.aggregator_merge_strategy == "latest":
                out[name] = agg
            elif out[name] != agg:
                if self.aggregator_merge_strategy == "strict":
                    return None
                if self.aggregator_merge_strategy == "lenient":
                    out[name] = None
        return out


def _fold_column(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    if a.get("errorMessage"):
        return a
    if b.get("errorMessage"):
        return b
    if a["typeSignature"] != b["typeSignature"]:
        error = f"error:cannot_merge_diff_types: [{a['typeSignature']}] and [{b['typeSignature']}]"
        return {**a, "errorMessage": error}

    def pick(x: Any, y: Any, f: Any) -> Any:
        return y if x is None else x if y is None else f(x, y)

    return {
        **a,
        "hasMultipleValues": a["hasMultipleValues"] or b["hasMultipleValues"],
        "hasNulls": a["hasNulls"] or b["hasNulls"],
        "size": a["size"] + b["size"],
        "cardinality": pick(a["cardinality"], b["cardinality"], max),
        "minValue": None if a["hasNulls"] or b["hasNulls"] else pick(a["minValue"], b["minValue"], min),
        "maxValue": pick(a["maxValue"], b["maxValue"], max),
    }
