"""The limit on time buckets one query may produce, zero-filled ones included.

Druid zero-fills every bucket a segment's cursor walks, and with granularity `none` a bucket is
one millisecond: a day of data is 86.4 million rows. Druid documents this and leaves it to the
user; Strata answers with Druid's ResourceLimitExceeded (400) past `MAX_BUCKETS`, on each data
node before it builds the fill and on the broker over the merged answer, so memory stays bounded.
"""

from __future__ import annotations

import json
from typing import Any

from strata.query.errors import ResourceLimitExceeded

MAX_BUCKETS = 1_000_000


def too_many_buckets(granularity: Any) -> ResourceLimitExceeded:
    """The error for a query whose (zero-filled) time buckets would pass `MAX_BUCKETS`;
    `granularity` is its JSON form."""
    if isinstance(granularity, dict) and set(granularity) == {"type"}:
        granularity = granularity["type"]
    label = granularity if isinstance(granularity, str) else json.dumps(granularity, separators=(",", ":"))
    return ResourceLimitExceeded(
        f"The query would produce more than {MAX_BUCKETS:,} time buckets at granularity [{label}] "
        "(every bucket of the read interval is answered, empty ones zero-filled); set context "
        "skipEmptyBuckets to true, use a coarser granularity, or narrow the intervals"
    )


def check_buckets(count: int, granularity: Any) -> None:
    if count > MAX_BUCKETS:
        raise too_many_buckets(granularity)
