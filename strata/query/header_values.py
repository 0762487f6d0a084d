"""Values a query's answer echoes in a response header (its id): printable Latin-1 of bounded length.

An HTTP server cannot write a control character (a NUL, a line break) in a header and drops the
connection instead; a character past Latin-1 (a header's bytes) fails to encode. So such a value is
the client's error, answered with a 400 before the query runs.
"""

from __future__ import annotations

from strata.query.errors import invalid

MAX_HEADER_VALUE_CHARS = 1000
"""Characters of a value echoed in a response header (`queryId`, SQL's `sqlQueryId`)."""


def header_value(name: str, value: str) -> str:
    """`value` if it can travel in an HTTP response header, else Druid's 400 naming `name`."""
    if len(value) > MAX_HEADER_VALUE_CHARS:
        raise invalid("[%s] is longer than the limit of %d characters", name, MAX_HEADER_VALUE_CHARS)
    bad = next((ch for ch in value if not (" " <= ch <= "~" or "\xa0" <= ch <= "\xff")), None)
    if bad is not None:
        raise invalid("[%s] may hold printable Latin-1 characters only, not %r", name, bad)
    return value
