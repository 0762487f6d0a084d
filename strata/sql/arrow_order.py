"""A statement's ORDER BY / OFFSET / LIMIT, applied by the broker after its native groupBy, over the
answer's Arrow columns as `SqlPlan.rows` applies them to Python rows.

`SqlPlan.rows` sorts the rows once a key, last key first, each sort stable (`reverse=True` keeps
ties in place too), on Python's order of the SQL values (`strata.sql.plan.order_key`: null first).
That is one stable sort on the keys' ranks, first key first, a descending key's ranks negated.
Arrow ranks integers, booleans, strings (UTF-8 bytes: code point order) and doubles as Python
compares them; an instant is compared as the text it prints as, as the old way compared it. Arrays
and doubles with NaN (which Python does not order) are left to the old way.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NULLS_FIRST = [("", "ascending", "at_start")]


def picked_rows(
    keys: Sequence[tuple[pa.Array | None, bool]], rows: int, offset: int, limit: int | None
) -> np.ndarray:
    """The positions of the answer's rows in their order, offset and limited; `keys`: each the values
    compared (`comparable`; None: all null) and whether descending."""
    ranks = []
    for values, descending in keys:
        if values is None:  # one value: no order among the rows
            continue
        rank = np.asarray(pc.rank(values, sort_keys=NULLS_FIRST, tiebreaker="dense"), np.int64)
        ranks.append(-rank if descending else rank)
    order = np.lexsort(ranks[::-1]) if ranks else np.arange(rows)  # lexsort: its last key first
    return order[offset : None if limit is None else offset + limit]


def comparable(values: pa.Array) -> pa.Array | None:
    """`values` as Arrow ranks them in Python's order, or None where the orders may differ."""
    kind = values.type
    if pa.types.is_dictionary(kind):
        return comparable(pc.cast(values, kind.value_type))
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return values
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return values
    if pa.types.is_floating(kind) and not pc.any(pc.is_nan(values)).as_py():
        return values
    return None
