"""topN metric specs: rank by a numeric metric, by the dimension value, or inverted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from strata.query.errors import invalid
from strata.query.filters.sql import java_string
from strata.query.orderings import numeric_key, ordinal
from strata.query.string_comparators import COMPARATORS, LEXICOGRAPHIC, parse_ordering


@dataclass(frozen=True, slots=True)
class NumericMetric:
    metric: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "numeric", "metric": self.metric}


@dataclass(frozen=True, slots=True)
class DimensionMetric:
    ordering: str = LEXICOGRAPHIC
    previous_stop: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"type": "dimension", "ordering": self.ordering, "previousStop": self.previous_stop}


@dataclass(frozen=True, slots=True)
class InvertedMetric:
    delegate: NumericMetric | DimensionMetric

    def to_json(self) -> dict[str, Any]:
        return {"type": "inverted", "metric": self.delegate.to_json()}


TopNMetric = NumericMetric | DimensionMetric | InvertedMetric


def parse_topn_metric(value: Any, names: Sequence[str]) -> TopNMetric:
    if isinstance(value, str):
        value = {"type": "numeric", "metric": value}
    if not isinstance(value, dict):
        raise invalid("Field [metric] of topN query must be a name or a metric spec object")
    kind = value.get("type")
    if kind == "numeric":
        metric = value.get("metric")
        if not isinstance(metric, str) or metric not in names:
            raise invalid("topN metric [%s] is not an aggregator or post-aggregator of the query", metric)
        return NumericMetric(metric)
    if kind in ("dimension", "lexicographic", "alphaNumeric"):
        ordering = {"lexicographic": "lexicographic", "alphaNumeric": "alphanumeric"}.get(kind)
        ordering = ordering or parse_ordering(value.get("ordering", LEXICOGRAPHIC))
        stop = value.get("previousStop")
        if stop is not None and not isinstance(stop, str):
            raise invalid("Field [previousStop] of topN metric must be a string")
        return DimensionMetric(ordering, stop)
    if kind == "inverted":
        inner = parse_topn_metric(value.get("metric"), names)
        if isinstance(inner, InvertedMetric):
            return inner.delegate
        return InvertedMetric(inner)
    raise invalid("Unknown topN metric type [%s]", kind)


def metric_name(spec: TopNMetric) -> str | None:
    base = spec.delegate if isinstance(spec, InvertedMetric) else spec
    return base.metric if isinstance(base, NumericMetric) else None


def rank_key(spec: TopNMetric, metric_values: pa.Array | None, dims: pa.Array) -> np.ndarray:
    """Ascending key: best first. Numeric metrics rank high values first, nulls last."""
    inverted = isinstance(spec, InvertedMetric)
    base = spec.delegate if isinstance(spec, InvertedMetric) else spec
    if isinstance(base, NumericMetric):
        assert metric_values is not None
        return numeric_key(metric_values, descending=not inverted)
    key = ordinal(as_text(dims), base.ordering).astype(np.float64)
    return -key if inverted else key


def as_text(dims: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Dimension values as the strings Druid's string orderings compare: a LONG or DOUBLE output
    compares as Java prints it ("15063" before "1555" lexicographically), nulls stay null."""
    if pa.types.is_string(dims.type) or pa.types.is_large_string(dims.type):
        return dims
    return pa.array([None if v is None else java_string(v) for v in dims.to_pylist()], pa.string())


def after_previous_stop(spec: TopNMetric, dims: pa.Array) -> pa.Array | None:
    """Mask of rows past `previousStop` (None when there is no stop)."""
    base = spec.delegate if isinstance(spec, InvertedMetric) else spec
    if not isinstance(base, DimensionMetric) or base.previous_stop is None:
        return None
    cmp = COMPARATORS[base.ordering]
    stop = base.previous_stop
    text = as_text(dims).to_pylist()
    sign = -1 if isinstance(spec, InvertedMetric) else 1
    return pa.array([sign * cmp(v, stop) > 0 for v in text], pa.bool_())
