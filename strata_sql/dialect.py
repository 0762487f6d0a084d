"""The SQL dialect Strata parses: sqlglot's Druid dialect, with Druid's case-sensitive names.

Druid (through Calcite) keeps identifiers as written, quoted or not: `Page` and `page` are two
columns. sqlglot's Druid dialect lowercases unquoted names, which would break qualification
against the catalog, so the strategy is overridden here. Parsing of Druid's own functions is
extended here too, so every module reads statements the same way.
"""

from __future__ import annotations

from sqlglot.dialects.dialect import NormalizationStrategy
from sqlglot.dialects.druid import Druid


class DruidSQL(Druid):
    NORMALIZATION_STRATEGY = NormalizationStrategy.CASE_SENSITIVE


DIALECT = DruidSQL()
