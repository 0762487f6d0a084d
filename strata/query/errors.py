"""Query errors with Druid's error bodies and HTTP status codes.

Druid answers failures with a JSON body that legacy clients read as
`{"error","errorMessage","errorClass","host"}` and newer ones as DruidException's
`{"error","errorCode","persona","category","errorMessage","context"}`. Druid itself emits a superset
for legacy errors (see ErrorResponse), so every error here serialises to that superset: pydruid's
sync client, async client and DB-API all find the keys they need.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar


class QueryError(Exception):
    """Base of every error a query can end with; carries what the HTTP layer needs."""

    error: ClassVar[str] = "Unknown exception"
    error_class: ClassVar[str] = "org.apache.druid.query.QueryException"
    status: ClassVar[int] = 500
    category: ClassVar[str] = "UNCATEGORIZED"
    persona: ClassVar[str] = "OPERATOR"
    error_code: ClassVar[str] = "legacyQueryException"

    def __init__(self, message: str, *, host: str | None = None, context: dict[str, Any] | None = None):
        super().__init__(message)
        self.error_message = message
        self.host = host
        self.context = dict(context or {})

    def to_body(self, host: str | None = None) -> dict[str, Any]:
        host = self.host or host
        return {
            "error": self.error,
            "errorMessage": self.error_message,
            "errorClass": self.error_class,
            "host": host,
            "errorCode": self.error_code,
            "persona": self.persona,
            "category": self.category,
            "context": {
                "errorClass": self.error_class,
                "legacyErrorCode": self.error,
                "host": host,
                **self.context,
            },
        }


class InvalidInput(QueryError):
    """The query is well-formed JSON but not a valid query (Druid's DruidException INVALID_INPUT)."""

    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    status = 400
    category = "INVALID_INPUT"
    persona = "USER"
    error_code = "invalidInput"

    def to_body(self, host: str | None = None) -> dict[str, Any]:
        body = super().to_body(host)
        body["context"] = dict(self.context)
        return body


class DruidFailure(QueryError):
    """Druid's newer DruidException shape for a failure that is not the user's input: errorCode
    `general`, a category that says whose problem it is, and no legacy keys in the context."""

    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    error_code = "general"

    def to_body(self, host: str | None = None) -> dict[str, Any]:
        body = super().to_body(host)
        body["context"] = dict(self.context)
        return body


class RuntimeFailure(DruidFailure):
    """A server-side failure at run time (a segment file unreadable, a disk error): the operator's
    to look at; the broker reads the segments elsewhere when a data node answers with it."""

    status = 500
    category = "RUNTIME_FAILURE"
    persona = "OPERATOR"


class Defensive(DruidFailure):
    """A check that should never fail failed inside an engine (its internal error, a type it did not
    expect): a bug, named as Druid's DEFENSIVE category names one, for a developer to read."""

    status = 500
    category = "DEFENSIVE"
    persona = "DEVELOPER"


class PlanningFailed(DruidFailure):
    """Druid's SQL planner found no native query for the statement but left a reason: the user's
    statement, worded for an expert (Druid files it under the ADMIN persona), status 400."""

    status = 400
    category = "INVALID_INPUT"
    persona = "ADMIN"

    @classmethod
    def because(cls, reason: str) -> PlanningFailed:
        return cls(f"Query could not be planned. A possible reason is [{reason}]")


class UnhandledPlanningFailure(DruidFailure):
    """Druid's SQL planner found no native query for the statement and no reason to give."""

    status = 501
    category = "UNSUPPORTED"
    persona = "OPERATOR"

    def __init__(self) -> None:
        super().__init__("Unhandled Query Planning Failure, see broker logs for details")


class BadJson(QueryError):
    """The request body is not parseable JSON."""

    error = "Json parse failed"
    error_class = "com.fasterxml.jackson.core.JsonParseException"
    status = 400
    category = "INVALID_INPUT"
    persona = "USER"


class ResourceLimitExceeded(QueryError):
    error = "Resource limit exceeded"
    error_class = "org.apache.druid.query.ResourceLimitExceededException"
    status = 400
    category = "CAPACITY_EXCEEDED"
    persona = "USER"


class QueryCapacityExceeded(QueryError):
    error = "Query capacity exceeded"
    error_class = "org.apache.druid.query.QueryCapacityExceededException"
    status = 429
    category = "CAPACITY_EXCEEDED"


class ServiceUnavailable(QueryError):
    """Druid's 503 DruidException: something this request needs is not there now; try again."""

    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    status = 503
    category = "SERVICE_UNAVAILABLE"
    persona = "OPERATOR"
    error_code = "serviceUnavailable"


class QueryUnsupported(QueryError):
    error = "Unsupported operation"
    error_class = "org.apache.druid.query.QueryUnsupportedException"
    status = 501
    category = "UNSUPPORTED"
    persona = "USER"


class QueryTimeout(QueryError):
    error = "Query timeout"
    error_class = "org.apache.druid.query.QueryTimeoutException"
    status = 504
    category = "TIMEOUT"


class QueryInterrupted(QueryError):
    error = "Query interrupted"
    error_class = "org.apache.druid.query.QueryInterruptedException"
    status = 500
    category = "RUNTIME_FAILURE"


class QueryCancelled(QueryInterrupted):
    error = "Query cancelled"
    category = "CANCELED"


class SegmentsMissing(QueryError):
    """Segments no server could read, after the retries, and partial results not allowed.

    Druid's retry runner throws SegmentMissingException there, an IllegalStateException rather
    than a QueryException: its query resource wraps it in the catch-all "Unknown exception" with
    that class, which the DruidException layer files as RUNTIME_FAILURE, status 500. So is this;
    the message keeps Druid's prefix and says how to get an answer without the segments.
    """

    error = "Unknown exception"
    error_class = "org.apache.druid.segment.SegmentMissingException"
    status = 500
    category = "RUNTIME_FAILURE"

    @classmethod
    def after_retries(
        cls, segment_ids: Sequence[str], descriptors: Sequence[dict[str, Any]], retries: int
    ) -> SegmentsMissing:
        """Naming the segments (the first 20 in the message, 100 in the context)."""
        listed = ", ".join(segment_ids[:20])
        more = f" and {len(segment_ids) - 20} more" if len(segment_ids) > 20 else ""
        return cls(
            f"No results found for segments[{listed}{more}]: no server could read them "
            f"(retried {retries} {'time' if retries == 1 else 'times'}). Set the query context's "
            "returnPartialResults to true for an answer without them, listed in the response "
            "context's missingSegments",
            context={"missingSegments": list(descriptors[:100])},
        )


class QueryNotFound(QueryError):
    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    status = 404
    category = "NOT_FOUND"
    persona = "USER"
    error_code = "notFound"


class TypeMismatch(InvalidInput):
    """A statement whose operand types Druid's validator refuses (`Cannot apply 'F' to arguments
    of type ...`): final, whichever way the statement would be planned."""


def invalid(message: str, *args: object) -> InvalidInput:
    """Shorthand used by parsers: `raise invalid("Unknown queryType [%s]", t)`."""
    return InvalidInput(message % args if args else message)


class UnknownException(QueryError):
    """Druid's catch-all for what no category names: a bug of Strata's own (logged with its
    traceback where it is caught), never an engine's error nor the user's input."""


def unknown_exception(exc: BaseException, host: str | None = None) -> QueryError:
    """Wrap an unexpected exception so the HTTP layer never leaks a stack trace."""
    return UnknownException(f"{type(exc).__name__}: {exc}", host=host)


class HttpRouteError(QueryError):
    """A request no endpoint takes (unknown path, wrong method), in Druid's error shape."""

    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    persona = "USER"

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status  # type: ignore[misc]
        self.category = "NOT_FOUND" if status == 404 else "INVALID_INPUT"  # type: ignore[misc]
        self.error_code = {404: "notFound", 405: "methodNotAllowed"}.get(status, "invalidInput")  # type: ignore[misc]

    def to_body(self, host: str | None = None) -> dict[str, Any]:
        body = super().to_body(host)
        body["context"] = dict(self.context)
        return body
