"""Failures of the engines a native query runs on (DuckDB, Arrow, Python's own limits) as Druid's
error categories, said once for the data nodes' engine, the broker's merge and its streamed scans.

What the input caused (a value that does not convert, a pattern DuckDB refuses, a number out of
range) is a 400 `invalidInput`; what the engine cannot do a 501; memory a `Resource limit exceeded`;
a disk or file failure a 500 RUNTIME_FAILURE (a broker then reads the segments elsewhere); an
engine's internal error a 500 DEFENSIVE. Only what none of them names - a bug of Strata's own,
which the caller logs with its traceback - stays Druid's catch-all "Unknown exception". A client
never reads another engine's exception class, banner or caret.
"""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa

from strata.query.errors import (
    Defensive,
    QueryError,
    QueryInterrupted,
    QueryUnsupported,
    ResourceLimitExceeded,
    RuntimeFailure,
    UnknownException,
    invalid,
    unknown_exception,
)

MAX_MESSAGE_CHARS = 1000
_BANNER = re.compile(r"^\s*[A-Z][A-Za-z ]*Error:\s*")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_DUCK_INVALID = (
    duckdb.DataError,  # conversion, out of range, type mismatch: a value the query gave or read
    duckdb.ProgrammingError,  # binder, catalog, parser, invalid input: what the query asked for
    duckdb.IntegrityError,
)
_DUCK_UNSUPPORTED = (duckdb.NotSupportedError, duckdb.PermissionException)


def query_engine_error(exc: BaseException, host: str | None = None) -> QueryError:
    """The Druid error a failure while running (or merging) a native query is answered with."""
    if isinstance(exc, QueryError):
        return exc
    if isinstance(exc, duckdb.Error):
        return duckdb_error(exc)
    if isinstance(exc, pa.ArrowException):
        return _arrow_error(exc)
    if isinstance(exc, RecursionError):
        return invalid("The query nests too deeply to run")
    if isinstance(exc, MemoryError):
        return ResourceLimitExceeded("Not enough memory to run the query")
    if isinstance(exc, OverflowError):
        return invalid("A number in the query is out of range: %s", engine_message(exc))
    if isinstance(exc, UnicodeError):
        return invalid("The query holds text that is not valid Unicode: %s", engine_message(exc))
    if isinstance(exc, re.error):
        return invalid("Invalid regular expression: %s", engine_message(exc))
    if isinstance(exc, OSError):
        streamed = _STREAMED.get(str(exc).split(":")[0])
        if streamed is not None:  # DuckDB's error, met while its answer streamed through Arrow
            return duckdb_error(streamed(str(exc)))
        return RuntimeFailure(f"Reading segment data failed: {engine_message(exc)}", host=host)
    return unknown_exception(exc, host)


# DuckDB's errors as an Arrow reader of its answer raises them (OSError): only their banner says
# what they were
_STREAMED: dict[str, type[duckdb.Error]] = {
    "Conversion Error": duckdb.ConversionException,
    "Invalid Input Error": duckdb.InvalidInputException,
    "Out of Range Error": duckdb.OutOfRangeException,
    "Binder Error": duckdb.BinderException,
    "Not implemented Error": duckdb.NotImplementedException,
    "Out of Memory Error": duckdb.OutOfMemoryException,
    "INTERRUPT Error": duckdb.InterruptException,
}


def unforeseen(err: QueryError) -> bool:
    """An error that is a bug (Strata's or an engine's): worth its traceback in the log."""
    return isinstance(err, (UnknownException, Defensive))


def duckdb_error(exc: duckdb.Error) -> QueryError:
    message = engine_message(exc)
    if isinstance(exc, duckdb.InterruptException):
        return QueryInterrupted("The query was interrupted")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return ResourceLimitExceeded(f"Not enough memory to run the query: {message}")
    if isinstance(exc, _DUCK_UNSUPPORTED):
        return QueryUnsupported(f"Not supported: {message}")
    if isinstance(exc, _DUCK_INVALID):
        return invalid("%s", message)
    if isinstance(exc, duckdb.IOException):
        return RuntimeFailure(f"Reading segment data failed: {message}")
    return Defensive(f"The query engine failed ({type(exc).__name__}): {message}")


def _arrow_error(exc: pa.ArrowException) -> QueryError:
    message = engine_message(exc)
    if isinstance(exc, (pa.ArrowMemoryError, pa.ArrowCapacityError)):
        return ResourceLimitExceeded(f"Not enough memory to run the query: {message}")
    if isinstance(exc, pa.ArrowNotImplementedError):
        return QueryUnsupported(f"Not supported: {message}")
    if isinstance(exc, pa.ArrowInvalid):  # a value that does not fit the type it is cast to
        return invalid("%s", message)
    if isinstance(exc, pa.ArrowIOError):
        return RuntimeFailure(f"Reading segment data failed: {message}")
    return Defensive(f"The query engine failed ({type(exc).__name__}): {message}")


def engine_message(exc: BaseException) -> str:
    """The first line of an engine's message without its banner ("Invalid Input Error: "), caret
    or terminal escapes, bounded in length."""
    lines = str(exc).strip().splitlines()
    first = _BANNER.sub("", lines[0] if lines else "") or type(exc).__name__
    first = printable(first)
    return first if len(first) <= MAX_MESSAGE_CHARS else first[:MAX_MESSAGE_CHARS] + "..."


def printable(text: str) -> str:
    """One line without control characters (a query's own, echoed back, or a terminal's escapes)."""
    return " ".join(_CONTROL.sub("?", text).split())
