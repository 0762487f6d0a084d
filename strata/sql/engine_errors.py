"""Errors of the engines inside the SQL layer (sqlglot, the broker's DuckDB, Python's own limits) as
Druid's error categories: the client sees a 400 `invalidInput` or a 501 `unsupported` in Druid's
words, and a 500 only for what nobody foresaw - never another engine's exception class or banner as
the answer. What the SQL layer says differently from a native query's engine (a statement DuckDB
cannot parse is one Strata does not support; an unknown function or table is named) is here; the
rest is `strata.query.engine_errors`'s."""

from __future__ import annotations

import re

import duckdb
from sqlglot import errors as sqlglot_errors

from strata.query.engine_errors import duckdb_error, engine_message, printable, query_engine_error
from strata.query.errors import QueryError, QueryUnsupported, invalid
from strata.sql.guard import MAX_NESTING

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SQLGLOT_CLASS = re.compile(r"<class 'sqlglot\.[\w.]*?(\w+)'>")
_SQLGLOT_TOKEN = re.compile(r"<Token token_type: TokenType\.(\w+), text: (.*?), line: \d+, col: .*?>")
_DUCK_FUNCTION = re.compile(r"Function with name (\"?)([\w$]+)\1 does not exist", re.IGNORECASE)
_DUCK_TABLE = re.compile(r"Table with name (\"?)([\w$.]+)\1 does not exist", re.IGNORECASE)


def engine_error(exc: BaseException, host: str | None = None) -> QueryError:
    """The Druid error a failure while planning or running a SQL statement is answered with."""
    if isinstance(exc, QueryError):
        return exc
    if isinstance(exc, RecursionError):
        return invalid("SQL nests too deeply to plan; keep it within %d levels", MAX_NESTING)
    if isinstance(exc, sqlglot_errors.SqlglotError):
        return _sqlglot_error(exc)
    if isinstance(exc, duckdb.Error):
        return _duckdb_error(exc)
    if _raised_in_sqlglot(exc):  # its generator or optimizer met a tree it cannot take: the statement's
        return invalid("Cannot plan the SQL statement: %s", _plain(f"{type(exc).__name__}: {exc}"))
    return query_engine_error(exc, host)


def _raised_in_sqlglot(exc: BaseException) -> bool:
    """Whether a Python error (AttributeError, say) was raised inside sqlglot's own code."""
    tb = exc.__traceback__
    if tb is None or not isinstance(exc, (AttributeError, TypeError, ValueError, IndexError, KeyError)):
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return str(tb.tb_frame.f_globals.get("__name__", "")).startswith("sqlglot.")


def _sqlglot_error(exc: sqlglot_errors.SqlglotError) -> QueryError:
    if isinstance(exc, sqlglot_errors.UnsupportedError):
        return QueryUnsupported(f"SQL is not supported: {_plain(str(exc))}")
    if isinstance(exc, sqlglot_errors.ParseError) and exc.errors:
        first = exc.errors[0]
        where = f" at line [{first.get('line')}], column [{first.get('col')}]" if first.get("line") else ""
        near = _plain(str(first.get("highlight") or ""))
        return invalid(
            "SQL parse failed%s: %s%s",
            where,
            _plain(str(first.get("description"))),
            f" near [{near}]" if near else "",
        )
    return invalid("SQL parse failed: %s", _plain(str(exc)))


def _duckdb_error(exc: duckdb.Error) -> QueryError:
    message = _plain(engine_message(exc))
    if isinstance(exc, duckdb.CatalogException):
        if (fn := _DUCK_FUNCTION.search(message)) is not None:
            return QueryUnsupported(f"Function [{fn.group(2).upper()}] is not supported")
        if (table := _DUCK_TABLE.search(message)) is not None:
            return invalid("Object '%s' not found", table.group(2))
    if isinstance(exc, duckdb.ParserException):  # sqlglot wrote what DuckDB does not read
        return QueryUnsupported(f"SQL is not supported: {message}")
    return duckdb_error(exc)


def _plain(text: str) -> str:
    """One line, without terminal escapes, control characters (a statement's own, echoed) or the
    names of sqlglot's classes."""
    text = _SQLGLOT_TOKEN.sub(_token, _SQLGLOT_CLASS.sub(r"\1", _ANSI.sub("", text)))
    return printable(text)


def _token(m: re.Match[str]) -> str:
    return "the end of the statement" if m.group(1) == "SENTINEL" else f"[{m.group(2)}]"
