"""Legacy filters with an `extractionFn`, and Druid's `extraction` filter: the filter matches the
extracted string instead of the column's value."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import quote_ident
from strata.query.errors import QueryUnsupported, invalid
from strata.query.extraction_fns import ExtractionFn, parse_extraction_fn
from strata.query.filters.base import Filter, column_of, extraction_parser, parse_required

EXTRACTED = "__strata_extracted__"  # the name the inner filter matches; replaced by the extraction
TAKES_EXTRACTION = frozenset({"selector", "in", "bound", "like", "regex", "search", "extraction"})


@dataclass(frozen=True, slots=True)
class ExtractedFilter(Filter):
    filter_type = "extracted"
    inner: Filter
    column: str
    fn: ExtractionFn
    original: Mapping[str, Any]

    def to_sql(self, types: Mapping[str, str]) -> str:
        inner = self.inner.to_sql({**types, EXTRACTED: "VARCHAR"})
        return inner.replace(quote_ident(EXTRACTED), f"({self.fn.sql(self.column, types)})")

    def columns(self) -> set[str]:
        return {self.column}

    def to_json(self) -> dict[str, Any]:
        return dict(self.original)


@extraction_parser
def parse_extracted(obj: Mapping[str, Any], kind: str) -> Filter:
    if kind not in TAKES_EXTRACTION:
        raise QueryUnsupported(f"extractionFn on filter type [{kind}] is not supported")
    if obj.get("extractionFn") is None:
        raise invalid("Filter [extraction] needs an [extractionFn]")
    column = column_of(obj, kind)
    fn = parse_extraction_fn(obj["extractionFn"])
    inner_json = {k: v for k, v in obj.items() if k not in ("extractionFn", "column")}
    inner_json["dimension"] = EXTRACTED
    if kind == "extraction":
        inner_json["type"] = "selector"
    return ExtractedFilter(parse_required(inner_json), column, fn, obj)
