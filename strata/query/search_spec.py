"""Druid's search query specs (contains, insensitive_contains, fragment, regex).

Shared by the `search` filter and the `search` query type. Each renders a DuckDB predicate over a
VARCHAR expression; NULL values never match (they give NULL, i.e. unknown).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strata.query.duck import quote_str
from strata.query.errors import invalid
from strata.query.fields import as_object, get_bool, get_list, get_str
from strata.query.regex_check import check_regex


class SearchSpec(ABC):
    @abstractmethod
    def to_sql(self, text: str) -> str:
        """A predicate over the VARCHAR expression `text`."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...


def _contains(text: str, value: str, case_sensitive: bool) -> str:
    if case_sensitive:
        return f"contains({text}, {quote_str(value)})"
    return f"contains(lower({text}), lower({quote_str(value)}))"


@dataclass(frozen=True, slots=True)
class ContainsSpec(SearchSpec):
    value: str | None
    case_sensitive: bool = False
    spec_type: str = "contains"  # or "insensitive_contains", kept for the canonical JSON

    def to_sql(self, text: str) -> str:
        if self.value is None:  # Druid: a null search value matches nothing
            return f"(CASE WHEN {text} IS NULL THEN NULL ELSE FALSE END)"
        return _contains(text, self.value, self.case_sensitive)

    def to_json(self) -> dict[str, Any]:
        if self.spec_type == "insensitive_contains":
            return {"type": self.spec_type, "value": self.value}
        return {"type": self.spec_type, "value": self.value, "caseSensitive": self.case_sensitive}


@dataclass(frozen=True, slots=True)
class FragmentSpec(SearchSpec):
    """Matches values containing every fragment."""

    values: tuple[str, ...]
    case_sensitive: bool = False

    def to_sql(self, text: str) -> str:
        if not self.values:
            return f"({text} IS NOT NULL OR NULL)"
        return "(" + " AND ".join(_contains(text, v, self.case_sensitive) for v in self.values) + ")"

    def to_json(self) -> dict[str, Any]:
        return {"type": "fragment", "values": list(self.values), "caseSensitive": self.case_sensitive}


@dataclass(frozen=True, slots=True)
class RegexSpec(SearchSpec):
    pattern: str

    def to_sql(self, text: str) -> str:
        return f"regexp_matches({text}, {quote_str(self.pattern)})"

    def to_json(self) -> dict[str, Any]:
        return {"type": "regex", "pattern": self.pattern}


def parse_search_spec(value: Any, what: str = "search query spec") -> SearchSpec:
    obj: Mapping[str, Any] = as_object(value, what)
    kind = obj.get("type")
    if kind in ("contains", "insensitive_contains"):
        text = obj.get("value")
        if text is not None and not isinstance(text, str):
            text = str(text)
        sensitive = kind == "contains" and get_bool(obj, "caseSensitive", False, what=what)
        return ContainsSpec(text, sensitive, kind)
    if kind == "fragment":
        values = get_list(obj, "values", what=what)
        if not all(isinstance(v, str) for v in values):
            raise invalid("Field [values] of %s must hold strings", what)
        return FragmentSpec(tuple(values), get_bool(obj, "caseSensitive", False, what=what))
    if kind == "regex":
        return RegexSpec(check_regex(get_str(obj, "pattern", what=what), what))
    raise invalid(
        "Unknown %s type [%s]; expected contains, insensitive_contains, fragment or regex", what, kind
    )
