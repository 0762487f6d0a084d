"""Druid SQL for the broker: planning to native queries, system tables, result formats.

Pure planning over a catalog of columns; the broker runs the native queries through its own path
(routing, caching, limits) and encodes the rows with `strata.sql.formats`.
"""

from strata.sql.formats import RESULT_FORMATS, encode_rows
from strata.sql.statement import PlannedStatement, plan_parsed, plan_statement, referenced_tables
from strata.sql.system_tables import Catalog

__all__ = [
    "RESULT_FORMATS",
    "Catalog",
    "PlannedStatement",
    "encode_rows",
    "plan_parsed",
    "plan_statement",
    "referenced_tables",
]
