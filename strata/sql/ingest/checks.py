"""What Druid refuses in an INSERT or REPLACE before planning it, in Druid's words (all 400s)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp

from strata.query.errors import invalid
from strata.sql.ingest.clauses import IngestStatement
from strata.sql.ingest.columns import TIME, Column
from strata.sql.ingest.targets import ALL, druid_granularity_text

# set by the planner itself (Druid's NativeSqlEngine.SYSTEM_CONTEXT_PARAMETERS): a user may not
REFUSED_CONTEXT = (
    "sqlInsertSegmentGranularity", "sqlReplaceTimeChunks", "timestampResultField",
    "timestampResultFieldGranularity", "timestampResultFieldInOriginalDimensions", "scanSignature",
)  # fmt: skip
UNNAMED = re.compile(r"^EXPR\$\d+$", re.IGNORECASE)
UNNAMED_MESSAGE = (
    "Insertion requires columns to be named, but at least one of the columns was unnamed.  This is usually "
    "the result of applying a function without having an AS clause, please ensure that all function calls"
    'are named with an AS clause as in "func(X) as myColumn".'
)


def flag(ctx: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean context parameter, given as a boolean or a string."""
    value = ctx.get(key, default)
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def check_context(ctx: Mapping[str, Any], operation: str) -> None:
    for key in REFUSED_CONTEXT:
        if key in ctx:
            raise invalid("Query context parameter [%s] is not allowed", key)
    if "sqlOuterLimit" in ctx:
        raise invalid("Context parameter [sqlOuterLimit] cannot be provided on operator [%s]", operation)
    for key in ("rowsPerSegment", "maxParseExceptions", "maxNumTasks"):
        value = ctx.get(key)
        if value is not None and not _integer(value):
            raise invalid("Context parameter [%s] must be an integer, got [%s]", key, value)


def _integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.strip().lstrip("-").isdigit()


def check_target(st: IngestStatement) -> None:
    """Druid's rules for the target: a data source of the `druid` schema, named as ids are named."""
    if st.target_schema is not None and st.target_schema.lower() != "druid":
        raise invalid(
            "Table [%s.%s] does not support operation [%s] because it is not a Druid datasource",
            st.target_schema,
            st.target,
            st.operation,
        )
    name = st.target
    if not name:
        raise invalid("Invalid value for field [table]: must not be null")
    if "/" in name:
        raise invalid("Invalid value for field [table]: Value [%s] cannot contain '/'.", name)
    if name.startswith("."):
        raise invalid("Invalid value for field [table]: Value [%s] cannot start with '.'.", name)
    if any(c.isspace() and c != " " for c in name):
        raise invalid(
            "Invalid value for field [table]: Value [%s] contains illegal whitespace characters.", name
        )


def check_query(tree: exp.Expr, operation: str, granularity: str) -> None:
    if not isinstance(tree, exp.Query):
        raise invalid("Operation [%s] needs a query (SELECT ...), got [%s]", operation, tree.sql()[:100])
    if tree.args.get("order") is not None:
        raise invalid(
            "Cannot use an ORDER BY clause on a Query of type [%s], use CLUSTERED BY instead", operation
        )
    if tree.args.get("offset") is not None:
        raise invalid("INSERT and REPLACE queries cannot have an OFFSET.")
    if tree.args.get("limit") is not None and granularity != ALL:
        raise invalid('INSERT and REPLACE queries cannot have a LIMIT unless PARTITIONED BY is "ALL".')


def check_outputs(names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if UNNAMED.match(name):
            raise invalid("%s", UNNAMED_MESSAGE)
        if name in seen:
            raise invalid("Duplicate field in SELECT: [%s]", name)
        seen.add(name)


def check_time(columns: Sequence[Column], granularity: str) -> None:
    """`__time` is a TIMESTAMP, and there is one unless PARTITIONED BY ALL (MSQ's rules)."""
    time = next((c for c in columns if c.name == TIME), None)
    if time is not None and time.sql_type != "TIMESTAMP":
        raise invalid("Field [%s] was the wrong type [%s], expected TIMESTAMP", TIME, time.sql_type)
    if time is None and granularity != ALL:
        raise invalid(
            "The granularity [%s] specified in the PARTITIONED BY clause of the INSERT query is different "
            "from ALL. Therefore, the query must specify a time column (named __time).",
            druid_granularity_text(granularity),
        )
