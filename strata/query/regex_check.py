"""Regular expressions checked where the query is parsed, on the broker, as Druid checks them at
planning: a pattern no engine could run is the user's 400 before any data node sees it.

DuckDB runs patterns with RE2; Druid's are Java's. A pattern both refuse is invalid input (400); one
that only RE2 refuses (lookaround, backreferences) is valid Druid but not something Strata can run:
unsupported (501). Checks are remembered, so a dashboard's repeated pattern costs one lookup.
"""

from __future__ import annotations

import functools
import re
import warnings

import duckdb

from strata.query.duck import connection
from strata.query.engine_errors import engine_message
from strata.query.errors import QueryUnsupported, invalid


def check_regex(pattern: str, where: str) -> str:
    """`pattern` if the engine can run it; else Druid's 400 (or a 501 for Java-only syntax)."""
    refusal = _refusal(pattern)
    if refusal is None:
        return pattern
    java_accepts, reason = refusal
    shown = pattern if len(pattern) <= 200 else pattern[:200] + "..."
    if java_accepts:
        raise QueryUnsupported(
            f"Regular expression [{shown}] in {where} uses syntax the engine's regex library (RE2) "
            f"does not run (lookaround and backreferences are not supported): {reason}"
        )
    raise invalid("Invalid regular expression [%s] in %s: %s", shown, where, reason)


@functools.lru_cache(maxsize=4096)
def _refusal(pattern: str) -> tuple[bool, str] | None:
    """None when RE2 compiles `pattern`; else (whether Java-like syntax accepts it, RE2's reason)."""
    try:
        connection().execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except duckdb.Error as e:
        try:
            with warnings.catch_warnings():  # "possible nested set": Java reads those as sets too
                warnings.simplefilter("ignore")
                re.compile(pattern)  # Python's syntax is close to Java's
        except (re.error, RecursionError, OverflowError):
            return False, engine_message(e)
        return True, engine_message(e)
    return None
