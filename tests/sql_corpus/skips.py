"""Why a corpus statement is not run: only reasons that are not "Strata answers it wrong".

- ingestion SQL (INSERT / REPLACE, MSQ task engine): Strata ingests through specs, not SQL;
- a test table that cannot be rebuilt: Druid's test harness holds more tables than `foo`,
  `numfoo` and `wikipedia`; and one of `foo`'s columns cannot be rebuilt
  (`unique_dim1`, a hyperUnique metric, which Strata's ingestion does not build), so statements
  reading it, or `SELECT *` over those tables, are skipped (`dim3`, a multi-value string, is
  rebuilt);
- an extension out of this project's scope, named;
- a limit of Druid's planner: the case expects Druid's "SQL requires ..." planning error for SQL
  that is valid (a UNION ALL of filtered or renamed arms, say), and Strata answers it instead.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from tests.sql_corpus.compare import _strip_quoted
from tests.sql_corpus.quidem import Case

REBUILT_TABLES = frozenset({"foo", "foo2", "numfoo", "wikipedia"})
SYSTEM_SCHEMAS = frozenset({"information_schema", "sys"})
HYPER_UNIQUE_TABLES = frozenset({"foo", "numfoo"})  # whose unique_dim1 is a hyperUnique metric
UNBUILT_COLUMNS = {
    "unique_dim1": (
        frozenset({"foo", "foo2", "numfoo"}),
        "unique_dim1 (hyperUnique metric; Strata builds HLLSketch, not hyperUnique)",
    ),
}
OUT_OF_SCOPE_FUNCTIONS = {
    "BLOOM_FILTER": "druid-bloom-filter",
    "TDIGEST_": "druid-tdigestsketch",
    "APPROX_QUANTILE_FIXED_BUCKETS": "druid-histogram",
    "SPECTATOR_": "druid-spectator-histogram",
}
_FROM = re.compile(
    r"\b(?:from|join)\s+((?:\"[^\"]+\"|[\w$]+)(?:\s*\.\s*(?:\"[^\"]+\"|[\w$]+))?)", re.IGNORECASE
)
_NOT_TABLES = {"__time"}  # EXTRACT(... FROM __time) seen by the fallback scan
_CTE = re.compile(r"(?:\bwith|,)\s*(\"[^\"]+\"|[\w$]+)\s*(?:\([^)]*\))?\s+as\s*\(", re.IGNORECASE)


def _names(sql: str) -> tuple[set[str], set[str]]:
    """(tables read as `schema.name` or `name`, CTE names); sqlglot's parse, else a FROM/JOIN scan."""
    try:
        tree = sqlglot.parse_one(sql)
        tables = {f"{t.db}.{t.name}" if t.db else t.name for t in tree.find_all(exp.Table) if t.name}
        return tables, {c.alias for c in tree.find_all(exp.CTE)}
    except sqlglot.errors.SqlglotError:
        pass
    blank_literals = re.sub(r"'(?:[^']|'')*'", "''", sql)
    tables = {re.sub(r"\s+", "", m.group(1)).replace('"', "") for m in _FROM.finditer(blank_literals)}
    ctes = {m.group(1).strip('"') for m in _CTE.finditer(blank_literals)}
    return tables - _NOT_TABLES, ctes


def _outer_select_star(blank: str) -> bool:
    """The outermost select list (of a statement blanked by `_strip_quoted`) holds `*` or `t.*`."""
    depth, start = 0, None
    for m in re.finditer(r"[()]|\bselect\b|\bfrom\b", blank, re.IGNORECASE):
        tok = m.group(0).lower()
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0 and tok == "select" and start is None:
            start = m.end()
        elif depth == 0 and tok == "from" and start is not None:
            return re.search(r"(^|,)\s*([\w\"]+\.)?\*\s*(,|$)", blank[start : m.start()]) is not None
    return False


def _star_needs_unbuilt_columns(sql: str, tables: set[str]) -> bool:
    """A `*` over foo/numfoo shows their unbuilt column when it is the answer's select list, or when
    it meets another table's columns (a UNION of `*`s); over one table inside a subquery it does not."""
    blank = _strip_quoted(sql)
    star = re.search(r"(\bselect\s+(?:all\s+|distinct\s+)?|,\s*)([\w\"]+\.)?\*", blank, re.IGNORECASE)
    if star is None:
        return False
    names = {t.rpartition(".")[2] for t in tables}
    return _outer_select_star(blank) or len(names) > 1


def skip_reason(case: Case) -> str | None:
    sql = case.sql
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    if (
        head in ("INSERT", "REPLACE")
        or "msq" in case.use.lower()
        or case.settings.get("engine", "") == "msq-task"
    ):
        return "ingestion SQL (INSERT/REPLACE, MSQ)"
    tables, ctes = _names(sql)
    for table in sorted(tables):
        schema, _, name = table.rpartition(".")
        if name in ctes or schema.lower() in SYSTEM_SCHEMAS:
            continue
        if name.upper() in ("TABLE", "UNNEST", "VALUES") or schema.lower() not in ("", "druid"):
            continue  # lookup.<name> too: Strata loads lookups, so those statements run
            continue
        if name not in REBUILT_TABLES:
            return f"test table cannot be rebuilt: {name}"
    read = {t.rpartition(".")[2] for t in tables}
    for column, (owners, why) in UNBUILT_COLUMNS.items():
        if read & owners and re.search(rf"\b{column}\b", sql):
            return f"test table cannot be rebuilt: {why}"
    if read & HYPER_UNIQUE_TABLES and _star_needs_unbuilt_columns(sql, tables):
        return "test table cannot be rebuilt: * over foo/numfoo includes unique_dim1"
    if case.kind == "error" and case.error_text.strip().startswith("SQL requires"):
        return "a limit of Druid's planner (valid SQL Druid cannot plan; Strata answers it)"
    upper = sql.upper()
    for prefix, extension in OUT_OF_SCOPE_FUNCTIONS.items():
        if re.search(rf"\b{prefix}\w*\s*\(", upper) or re.search(rf"\b{prefix}\(", upper):
            return f"extension out of scope: {extension}"
    return None
