"""groupBy `limitSpec` (type `default`): ordering columns, offset and limit.

Rows sort by time first (unless context `sortByDimsFirst`), then by the listed columns, each with
its direction and, for strings, its Druid string ordering; remaining ties break on the dimensions
so the order is deterministic. Sorting is a numpy lexsort over per-column ranks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from strata.query.errors import QueryUnsupported, invalid
from strata.query.fields import JAVA_INT_MAX, as_object, get_int, get_list
from strata.query.orderings import ordinal
from strata.query.string_comparators import LEXICOGRAPHIC, parse_ordering


@dataclass(frozen=True, slots=True)
class OrderByColumn:
    column: str
    descending: bool = False
    ordering: str = LEXICOGRAPHIC

    def to_json(self) -> dict[str, Any]:
        return {
            "dimension": self.column,
            "direction": "descending" if self.descending else "ascending",
            "dimensionOrder": self.ordering,
        }


@dataclass(frozen=True, slots=True)
class LimitSpec:
    columns: tuple[OrderByColumn, ...] = ()
    limit: int | None = None
    offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "default",
            "columns": [c.to_json() for c in self.columns],
            "limit": self.limit,
            "offset": self.offset,
        }

    def order(
        self,
        times: np.ndarray | None,
        columns: Mapping[str, pa.Array],
        tiebreak: Sequence[str],
        dims_first: bool = False,
    ) -> npt.NDArray[np.intp]:
        """Row indices in result order, offset and limit applied.

        With a limit far below the row count, only rows that can make the cut by the most
        significant key (ties included) are ranked on every key: ranking a million groups' strings
        to print a hundred is what a groupBy with a limitSpec would otherwise spend its time on.
        """
        n = len(times) if times is not None else (len(next(iter(columns.values()))) if columns else 0)
        for c in self.columns:
            if c.column not in columns:
                raise invalid(
                    "limitSpec column [%s] is not a dimension, aggregator or post-aggregator", c.column
                )
        end = None if self.limit is None else self.offset + self.limit
        if end is not None and 0 < end < n // 4:
            first = self._keys(times, columns, tiebreak, dims_first, first_only=True)
            if first:
                cut = np.partition(first[0], end - 1)[end - 1]
                rows = np.flatnonzero(first[0] <= cut)
                if len(rows) < n:
                    taken = pa.array(rows, pa.int64())
                    sub = {name: col.take(taken) for name, col in columns.items()}
                    within = self._sorted(None if times is None else times[rows], sub, tiebreak, dims_first)
                    return rows[within][self.offset : end]
        return self._sorted(times, columns, tiebreak, dims_first)[self.offset : end]

    def _sorted(
        self, times: np.ndarray | None, columns: Mapping[str, pa.Array], tiebreak: Sequence[str],
        dims_first: bool,
    ) -> npt.NDArray[np.intp]:  # fmt: skip
        keys = self._keys(times, columns, tiebreak, dims_first)
        n = len(times) if times is not None else (len(next(iter(columns.values()))) if columns else 0)
        if len(keys) == 1:
            return _order_of_one(keys[0])
        return np.lexsort(keys[::-1]) if keys else np.arange(n)

    def _keys(
        self, times: np.ndarray | None, columns: Mapping[str, pa.Array], tiebreak: Sequence[str],
        dims_first: bool, first_only: bool = False,
    ) -> list[np.ndarray]:  # fmt: skip
        """Sort keys, most significant first (only that one with `first_only`)."""
        keys: list[np.ndarray] = []
        if times is not None and not dims_first:
            keys.append(times)
        for c in self.columns:
            if first_only and keys:
                return keys
            rank = ordinal(columns[c.column], c.ordering)
            keys.append(-rank if c.descending else rank)
        if times is not None and dims_first:
            keys.append(times)
        for d in tiebreak:
            if first_only and keys:
                return keys
            keys.append(ordinal(columns[d]))
        return keys[:1] if first_only else keys


def _order_of_one(key: np.ndarray) -> npt.NDArray[np.intp]:
    """Stable ascending order of one key; n distinct consecutive integers (the dense ranks of
    distinct groups, a groupBy's default order) are a permutation, inverted in one pass."""
    n = len(key)
    if n and key.dtype.kind in "iu":
        offsets = key - key.min()
        if int(offsets.max()) == n - 1 and int(np.bincount(offsets).max()) == 1:
            order = np.empty(n, dtype=np.intp)
            order[offsets] = np.arange(n, dtype=np.intp)
            return order
    return np.argsort(key, kind="stable")


def _direction(value: Any) -> bool:
    if value is None:
        return False
    text = str(value).lower()
    if text in ("ascending", "asc"):
        return False
    if text in ("descending", "desc"):
        return True
    raise invalid("Unknown limitSpec direction [%s]; expected ascending or descending", value)


def parse_limit_spec(value: Any) -> LimitSpec:
    if value is None:
        return LimitSpec()
    obj = as_object(value, "limitSpec")
    kind = obj.get("type", "default")
    if kind == "NoopLimitSpec" or kind == "noop":
        return LimitSpec()
    if kind != "default":
        raise QueryUnsupported(f"limitSpec type [{kind}] is not supported")
    columns = []
    for c in get_list(obj, "columns", [], what="limitSpec"):
        if isinstance(c, str):
            columns.append(OrderByColumn(c))
            continue
        c = as_object(c, "limitSpec column")
        name = c.get("dimension")
        if not isinstance(name, str) or not name:
            raise invalid("limitSpec column needs a [dimension]")
        order = c.get("dimensionOrder")
        columns.append(
            OrderByColumn(
                name,
                _direction(c.get("direction")),
                LEXICOGRAPHIC if order is None else parse_ordering(order),
            )
        )
    limit = get_int(obj, "limit", None, what="limitSpec", maximum=JAVA_INT_MAX)
    if limit is not None and limit <= 0:
        raise invalid("Field [limit] of limitSpec must be greater than 0, got %d", limit)
    return LimitSpec(tuple(columns), limit, get_int(obj, "offset", 0, what="limitSpec", minimum=0))
