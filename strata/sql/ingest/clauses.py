"""Druid's INSERT and REPLACE statements taken apart before sqlglot reads their SELECT.

Druid's grammar adds clauses no SQL parser knows: `INSERT INTO t <query> PARTITIONED BY g
[CLUSTERED BY ...]`, `REPLACE INTO t OVERWRITE ALL | OVERWRITE WHERE <cond> <query> ...`, and
table functions in FROM (`TABLE(EXTERN(...))`, `TABLE(http(...)) EXTEND (col TYPE, ...)`). The
statement is split on sqlglot's tokens (so strings, quoted names and comments are never mistaken
for keywords); each table function becomes a name of its own in the query (`__extern0`, ...) and
its arguments an `ExternalTable` (`strata.sql.ingest.table_functions`). Errors use Druid's wording.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token

from strata.query.errors import invalid
from strata.sql.dialect import DIALECT
from strata.sql.engine_errors import engine_error
from strata.sql.ingest.table_functions import FUNCTIONS, ExternalTable, Literal, external_table
from strata.sql.planner import settings_of

# EXPLAIN PLAN FOR, after any comments
EXPLAIN = re.compile(r"^(?:\s|--[^\n]*(?:\n|$)|/\*.*?\*/)*EXPLAIN\s+PLAN\s+FOR\s+", re.IGNORECASE | re.DOTALL)
INGEST_WORDS = ("INSERT", "REPLACE", "UPSERT")
_OPEN = {"L_PAREN", "L_BRACKET"}
_CLOSE = {"R_PAREN", "R_BRACKET"}


@dataclass
class IngestStatement:
    operation: str  # INSERT | REPLACE
    target: str
    target_schema: str | None  # `druid` in `druid.t`, or another schema (refused by the planner)
    overwrite: str | None  # REPLACE: "ALL" or the text of the OVERWRITE WHERE condition
    query: str  # the SELECT, each table function replaced by the name of its `externals` entry
    externals: dict[str, ExternalTable]
    partitioned_by: list[Token]
    clustered_by: list[str]  # item texts
    settings: dict[str, Any] = field(default_factory=dict)  # SET statements before it
    explain: bool = False
    text: str = ""  # the statement's text, which the tokens' offsets index


def ingest_operation(sql: str) -> str | None:
    """INSERT, REPLACE or UPSERT when a statement (after any SET statements and EXPLAIN) is one."""
    for segment in _statements(_tokens(EXPLAIN.sub("", sql))):
        if segment and segment[0].text.upper() != "SET":
            word = segment[0].text.upper()
            return word if word in INGEST_WORDS else None
    return None


def is_ingest(sql: str) -> bool:
    return ingest_operation(sql) is not None


def _tokens(sql: str) -> list[Token]:
    try:
        return list(DIALECT.tokenize(sql))
    except SqlglotError as e:
        raise engine_error(e) from None


def _statements(tokens: Sequence[Token]) -> list[list[Token]]:
    out: list[list[Token]] = [[]]
    for t in tokens:
        if t.token_type.name == "SEMICOLON":
            out.append([])
        else:
            out[-1].append(t)
    return [s for s in out if s]


def split_statement(sql: str) -> IngestStatement:
    explain = bool(EXPLAIN.match(sql))
    text = EXPLAIN.sub("", sql)
    segments = _statements(_tokens(text))
    settings: dict[str, Any] = {}
    while len(segments) > 1 and segments[0][0].text.upper() == "SET":
        settings.update(_settings(text, segments.pop(0)))
    if len(segments) != 1:
        raise invalid("SQL must be exactly one statement, optionally after SET statements")
    return _Splitter(text, segments[0], settings, explain).statement()


def _settings(text: str, tokens: list[Token]) -> dict[str, Any]:
    statement = sqlglot.parse_one(_span(text, tokens[0], tokens[-1]), read=DIALECT)
    if not isinstance(statement, exp.Set):
        raise invalid("Expected a SET statement, got [%s]", _span(text, tokens[0], tokens[-1])[:100])
    return settings_of(statement)


def _span(text: str, first: Token, last: Token) -> str:
    return text[first.start : last.end + 1]


class _Splitter:
    def __init__(self, text: str, tokens: list[Token], settings: dict[str, Any], explain: bool) -> None:
        self.text, self.tokens, self.settings, self.explain = text, tokens, settings, explain
        self.i = 0

    # -- cursor --------------------------------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def word(self, ahead: int = 0) -> str:
        t = self.peek(ahead)
        return "" if t is None or t.token_type.name in ("STRING", "IDENTIFIER") else t.text.upper()

    def take(self) -> Token:
        t = self.tokens[self.i]
        self.i += 1
        return t

    # -- the statement -------------------------------------------------------------------------------
    def statement(self) -> IngestStatement:
        operation = self.word()
        if operation == "UPSERT":
            raise invalid("UPSERT is not supported.")
        if operation not in ("INSERT", "REPLACE"):
            raise invalid("Expected an INSERT or REPLACE statement")
        self.take()
        if self.word() != "INTO":
            raise invalid("Operation [%s] requires INTO and a target table", operation)
        self.take()
        schema, target, target_text = self.target()
        if self.word() == "(":
            columns = self.balanced()
            raise invalid(
                "Operation [%s] cannot be run with a target column list, given [%s %s]",
                operation,
                target_text,
                _span(self.text, columns[0], columns[-1]),
            )
        overwrite = self.overwrite(operation)
        query, partitioned, clustered = self.tail(operation)
        externals: dict[str, ExternalTable] = {}
        body = self.query_text(query, externals)
        return IngestStatement(
            operation,
            target,
            schema,
            overwrite,
            body,
            externals,
            partitioned,
            clustered,
            self.settings,
            self.explain,
            self.text,
        )

    def target(self) -> tuple[str | None, str, str]:
        names: list[Token] = [self.take()]
        while self.word() == ".":
            self.take()
            names.append(self.take())
        if len(names) > 2:
            raise invalid("Druid does not support 3+ part names: [%s]", ".".join(t.text for t in names))
        text = ".".join(t.text for t in names)
        return (names[0].text if len(names) == 2 else None), names[-1].text, text

    def overwrite(self, operation: str) -> str | None:
        missing = (
            "Missing time chunk information in OVERWRITE clause for REPLACE. Use OVERWRITE WHERE <__time "
            "based condition> or OVERWRITE ALL to overwrite the entire table."
        )
        if self.word() != "OVERWRITE":
            if operation == "REPLACE":
                raise invalid("%s", missing)
            return None
        if operation == "INSERT":
            raise invalid(
                "An OVERWRITE clause is not allowed with INSERT statements. Use REPLACE statements if "
                "overwriting existing segments is required or remove the OVERWRITE clause."
            )
        self.take()
        if self.word() == "ALL":
            self.take()
            return "ALL"
        if self.word() != "WHERE":
            raise invalid("%s", missing)
        self.take()
        start, depth = self.i, 0
        while (t := self.peek()) is not None:
            depth += _depth(t)
            if depth == 0 and self.word() in ("SELECT", "WITH"):
                break
            self.take()
        if self.i == start:
            raise invalid("%s", missing)
        return _span(self.text, self.tokens[start], self.tokens[self.i - 1])

    def tail(self, operation: str) -> tuple[list[Token], list[Token], list[str]]:
        """The query's tokens, PARTITIONED BY's and CLUSTERED BY's items (Druid's order enforced)."""
        query: list[Token] = []
        depth = 0
        while (t := self.peek()) is not None:
            depth += _depth(t)
            if depth == 0 and (t.token_type.name == "PARTITION_BY" or self._clustered()):
                break
            query.append(self.take())
        if self._clustered():
            raise invalid(
                "CLUSTERED BY found before PARTITIONED BY, CLUSTERED BY must come after the PARTITIONED BY "
                "clause"
            )
        if self.peek() is None:
            raise invalid(
                "Operation [%s] requires a PARTITIONED BY to be explicitly defined, but none was found.",
                operation,
            )
        self.take()
        partitioned: list[Token] = []
        while self.peek() is not None and not self._clustered():
            partitioned.append(self.take())
        clustered: list[str] = []
        if self._clustered():
            self.take(), self.take()
            item: list[Token] = []
            depth = 0
            while (t := self.peek()) is not None:
                depth += _depth(t)
                if depth == 0 and t.token_type.name == "COMMA":
                    clustered.append(_span(self.text, item[0], item[-1]))
                    item = []
                    self.take()
                    continue
                item.append(self.take())
            if not item:
                raise invalid("CLUSTERED BY needs a list of columns or expressions")
            clustered.append(_span(self.text, item[0], item[-1]))
        if not query:
            raise invalid("Operation [%s] needs a query (SELECT ...)", operation)
        return query, partitioned, clustered

    def _clustered(self) -> bool:
        return self.word() == "CLUSTERED" and self.word(1) == "BY"

    def balanced(self) -> list[Token]:
        """The tokens from an opening parenthesis to its match (inclusive)."""
        out, depth = [], 0
        while (t := self.peek()) is not None:
            depth += _depth(t)
            out.append(self.take())
            if depth == 0:
                return out
        raise invalid("Unbalanced parentheses in the statement")

    # -- table functions -----------------------------------------------------------------------------
    def query_text(self, query: list[Token], externals: dict[str, ExternalTable]) -> str:
        """The query's text with every `TABLE(fn(...)) [EXTEND] [(cols)]` replaced by a name."""
        pieces: list[str] = []
        cursor = query[0].start
        j = 0
        while j < len(query):
            t = query[j]
            if _is_table_function(query, j):
                end, table = _table_function(self.text, query, j)
                name = f"__extern{len(externals)}"
                externals[name] = table
                pieces += [self.text[cursor : t.start], f'"{name}"']
                cursor = query[end].end + 1
                j = end + 1
                continue
            j += 1
        pieces.append(self.text[cursor : query[-1].end + 1])
        return "".join(pieces)


def _depth(t: Token) -> int:
    name = t.token_type.name
    return 1 if name in _OPEN else -1 if name in _CLOSE else 0


def _is_table_function(tokens: list[Token], j: int) -> bool:
    return (
        j + 3 < len(tokens)
        and tokens[j].text.upper() == "TABLE"
        and tokens[j + 1].token_type.name == "L_PAREN"
        and tokens[j + 3].token_type.name == "L_PAREN"
    )


def _table_function(text: str, tokens: list[Token], j: int) -> tuple[int, ExternalTable]:
    """(index of the last token, the table) of the table function starting at `tokens[j]`."""
    function = tokens[j + 2].text.lower()
    if function not in FUNCTIONS:
        raise invalid("Table function [%s] is not supported (%s)", tokens[j + 2].text, ", ".join(FUNCTIONS))
    k = j + 4
    args: list[tuple[str | None, Literal]] = []
    while tokens[k].token_type.name != "R_PAREN":
        name = None
        if k + 1 < len(tokens) and tokens[k + 1].token_type.name == "FARROW":
            name, k = tokens[k].text, k + 2
        value, k = _literal(tokens, k)
        args.append((name, value))
        if tokens[k].token_type.name == "COMMA":
            k += 1
    if k + 1 >= len(tokens) or tokens[k + 1].token_type.name != "R_PAREN":
        raise invalid("TABLE(%s(...)) must close with ))", function)
    end = k + 1
    columns: list[tuple[str, str]] | None = None
    after = end + 1
    if after < len(tokens) and tokens[after].text.upper() == "EXTEND":
        after += 1
        if after >= len(tokens) or tokens[after].token_type.name != "L_PAREN":
            raise invalid("EXTEND needs a list of columns: EXTEND (name TYPE, ...)")
    if after < len(tokens) and tokens[after].token_type.name == "L_PAREN":
        end, columns = _columns(text, tokens, after)
    return end, external_table(function, args, columns)


def _literal(tokens: list[Token], k: int) -> tuple[Literal, int]:
    t = tokens[k]
    kind = t.token_type.name
    if kind == "STRING":
        return t.text, k + 1
    if kind == "NUMBER":
        return (float(t.text) if "." in t.text else int(t.text)), k + 1
    if kind == "DASH" and tokens[k + 1].token_type.name == "NUMBER":
        value, nxt = _literal(tokens, k + 1)
        assert isinstance(value, (int, float))
        return -value, nxt
    if kind == "NULL":
        return None, k + 1
    if kind in ("TRUE", "FALSE"):
        return kind == "TRUE", k + 1
    if kind == "ARRAY" and tokens[k + 1].token_type.name == "L_BRACKET":
        items: list[str] = []
        k += 2
        while tokens[k].token_type.name != "R_BRACKET":
            value, k = _literal(tokens, k)
            if not isinstance(value, str):
                raise invalid("ARRAY arguments of table functions take strings, got [%s]", value)
            items.append(value)
            if tokens[k].token_type.name == "COMMA":
                k += 1
        return items, k + 1
    raise invalid("Table function arguments take literals (strings, numbers, ARRAY[...]), got [%s]", t.text)


def _columns(text: str, tokens: list[Token], k: int) -> tuple[int, list[tuple[str, str]]]:
    """The `(name TYPE, ...)` list at `tokens[k]`: (index of its closing parenthesis, columns)."""
    columns: list[tuple[str, str]] = []
    item: list[Token] = []
    depth = 0
    for m in range(k, len(tokens)):
        t = tokens[m]
        depth += _depth(t)
        if depth == 1 and t.token_type.name in ("L_PAREN", "COMMA"):
            if item:
                columns.append(_column(text, item))
            item = []
            continue
        if depth == 0:
            if item:
                columns.append(_column(text, item))
            return m, columns
        item.append(t)
    raise invalid("Unbalanced parentheses in an EXTEND column list")


def _column(text: str, item: list[Token]) -> tuple[str, str]:
    if len(item) < 2:
        raise invalid("EXTEND columns take a name and a type, got [%s]", _span(text, item[0], item[-1]))
    return item[0].text, _span(text, item[1], item[-1])
