"""Per-segment cache keys: a short digest of the canonical JSON of what shapes a partial.

Each query type lists the parts that change one segment's partial result (filter, aggregators,
dimensions, granularity, ...) and leaves out what only the broker applies after merging
(post-aggregators, ordering, limits) or what does not touch results (query id, timeout, priority),
so equal work shares one cache entry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import orjson


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys and no whitespace: equal values give equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def digest_key(query_type: str, parts: Mapping[str, Any]) -> bytes:
    """`<queryType>:` followed by the SHA-256 of the canonical JSON of `parts`."""
    return query_type.encode() + b":" + hashlib.sha256(canonical_json(parts)).digest()


def to_json_bytes(value: Any) -> bytes:
    """Sorted-key JSON of a query's spec (the key of types keyed by their whole spec)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
