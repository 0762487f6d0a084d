"""The filter model: an immutable tree parsed from Druid's filter JSON, rendered as DuckDB SQL.

Null handling is Druid's SQL-compatible mode (the default since Druid 28): a comparison with NULL
is unknown, so `not(selector x='a')` does not match rows where x is NULL, while
`selector x=null` and `null` filters match them. Rendering to three-valued SQL gives exactly that.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import as_object


class Filter(ABC):
    filter_type: ClassVar[str]

    @abstractmethod
    def to_sql(self, types: Mapping[str, str]) -> str:
        """A DuckDB boolean expression; `types` maps each column to its DuckDB type."""

    @abstractmethod
    def columns(self) -> set[str]:
        """Every column the filter reads (what the engine must project)."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """Canonical JSON: defaults spelled out, so equal filters give equal cache keys."""


FilterParser = Callable[[Mapping[str, Any]], Filter]
# Filled by each filter module as it is imported; the package's __init__ imports them all, and
# Python runs that __init__ before any submodule, so the registry is complete before first use.
_PARSERS: dict[str, FilterParser] = {}
# The parser of filters carrying an extractionFn (query.filters.extracted registers it).
_EXTRACTED: list[Callable[[Mapping[str, Any], str], Filter]] = []

# Druid filter types this engine does not evaluate: a clear 501 rather than a wrong answer.
UNSUPPORTED_TYPES = frozenset({"javascript", "spatial"})


def filter_type(name: str) -> Callable[[FilterParser], FilterParser]:
    def register(parser: FilterParser) -> FilterParser:
        _PARSERS[name] = parser
        return parser

    return register


def extraction_parser(
    parser: Callable[[Mapping[str, Any], str], Filter],
) -> Callable[[Mapping[str, Any], str], Filter]:
    """Registers the parser of a filter with an `extractionFn` (or of the `extraction` filter)."""
    _EXTRACTED[:] = [parser]
    return parser


def parse_filter(obj: Any) -> Filter | None:
    """Parse a query's `filter` (None when absent); every problem is an InvalidInput or 501."""
    if obj is None:
        return None
    return parse_required(obj)


def parse_required(obj: Any, what: str = "filter") -> Filter:
    obj = as_object(obj, what)
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise invalid("Missing required field [type] of %s", what)
    if obj.get("extractionFn") is not None or kind == "extraction":
        return _EXTRACTED[0](obj, kind)
    parser = _PARSERS.get(kind)
    if parser is None:
        if kind in UNSUPPORTED_TYPES:
            raise QueryUnsupported(f"Filter type [{kind}] is not supported")
        raise invalid("Unknown filter type [%s]; known types: %s", kind, ", ".join(sorted(_PARSERS)))
    return parser(obj)


def column_of(obj: Mapping[str, Any], kind: str, key: str = "dimension") -> str:
    """The column a filter applies to; Druid's newer filters call it `column`, older `dimension`."""
    value = obj.get(key, obj.get("column" if key == "dimension" else "dimension"))
    if not isinstance(value, str) or not value:
        raise invalid("Filter [%s] needs a non-empty [%s]", kind, key)
    return value
