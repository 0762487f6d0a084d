"""dataSourceMetadata: the latest event time of a datasource (`maxIngestedEventTime`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import pyarrow as pa

from strata.query.base import CommonFields, Query, register
from strata.query.time_boundary import MAX_TIME, merge_extremes
from timeline import format_instant

if TYPE_CHECKING:
    pass


@register
@dataclass(frozen=True, kw_only=True)
class DataSourceMetadataQuery(Query):
    query_type = "dataSourceMetadata"
    intervals_required = False

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], common: CommonFields) -> Self:
        return cls(**common.as_kwargs())

    def to_json(self) -> dict[str, Any]:
        return self.common_json()

    def cache_key(self) -> bytes:
        return self.query_type.encode() + b":"

    def merge(self, partials: Sequence[pa.Table]) -> pa.Table:
        return merge_extremes(partials)

    def finalize(self, merged: pa.Table) -> list[Any]:
        if merged.num_rows == 0:
            return []
        # Druid stamps the merged result with the max event time itself.
        latest = format_instant(merged.column(MAX_TIME)[0].as_py())
        return [{"timestamp": latest, "result": {"maxIngestedEventTime": latest}}]
