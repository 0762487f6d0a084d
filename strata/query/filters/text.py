"""Pattern filters on the string form of a column: like, regex, search."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import quote_str
from strata.query.errors import invalid
from strata.query.fields import get_str
from strata.query.filters.base import Filter, column_of, filter_type
from strata.query.filters.sql import as_text, per_value
from strata.query.regex_check import check_regex
from strata.query.search_spec import SearchSpec, parse_search_spec


def like_to_duckdb(pattern: str, escape: str | None) -> str:
    """Druid's LIKE pattern as a DuckDB pattern whose escape character is always a backslash."""
    out: list[str] = []
    escaping = False
    for ch in pattern:
        if escaping:
            out.append("\\" + ch if ch in "%_\\" else ch)
            escaping = False
        elif escape is not None and ch == escape:
            escaping = True
        elif ch in "%_":
            out.append(ch)
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    if escaping:  # a trailing escape character stands for itself
        out.append("\\\\" if escape == "\\" else escape or "")
    return "".join(out)


@dataclass(frozen=True, slots=True)
class LikeFilter(Filter):
    filter_type = "like"
    dimension: str
    pattern: str
    escape: str | None = None

    def to_sql(self, types: Mapping[str, str]) -> str:
        pattern = quote_str(like_to_duckdb(self.pattern, self.escape))
        return per_value(
            types, self.dimension, lambda t, c: f"({as_text(t, c)} LIKE {pattern} ESCAPE '\\')", "like"
        )

    def columns(self) -> set[str]:
        return {self.dimension}

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.filter_type,
            "dimension": self.dimension,
            "pattern": self.pattern,
            "escape": self.escape,
        }


@dataclass(frozen=True, slots=True)
class RegexFilter(Filter):
    """Java-regex `find` semantics: the pattern may match anywhere in the value."""

    filter_type = "regex"
    dimension: str
    pattern: str

    def to_sql(self, types: Mapping[str, str]) -> str:
        pattern = quote_str(self.pattern)
        return per_value(
            types, self.dimension, lambda t, c: f"regexp_matches({as_text(t, c)}, {pattern})", "regex"
        )

    def columns(self) -> set[str]:
        return {self.dimension}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "dimension": self.dimension, "pattern": self.pattern}


@dataclass(frozen=True, slots=True)
class SearchFilter(Filter):
    filter_type = "search"
    dimension: str
    query: SearchSpec

    def to_sql(self, types: Mapping[str, str]) -> str:
        return per_value(types, self.dimension, lambda t, c: self.query.to_sql(as_text(t, c)), "search")

    def columns(self) -> set[str]:
        return {self.dimension}

    def to_json(self) -> dict[str, Any]:
        return {"type": self.filter_type, "dimension": self.dimension, "query": self.query.to_json()}


@filter_type("like")
def _parse_like(obj: Mapping[str, Any]) -> Filter:
    escape = obj.get("escape")
    if escape is not None and (not isinstance(escape, str) or len(escape) != 1):
        raise invalid("Field [escape] of like filter must be a single character")
    return LikeFilter(column_of(obj, "like"), get_str(obj, "pattern", what="like filter"), escape)


@filter_type("regex")
def _parse_regex(obj: Mapping[str, Any]) -> Filter:
    pattern = check_regex(get_str(obj, "pattern", what="regex filter"), "regex filter")
    return RegexFilter(column_of(obj, "regex"), pattern)


@filter_type("search")
def _parse_search(obj: Mapping[str, Any]) -> Filter:
    if obj.get("query") is None:
        raise invalid("Filter [search] needs a [query]")
    return SearchFilter(column_of(obj, "search"), parse_search_spec(obj["query"], "search filter query"))
