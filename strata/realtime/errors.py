"""Push errors in Druid's error body (the same superset every Strata error uses), with status codes
a pushing client can act on: 400 fix the request, 413 split it, 429/503 retry after `Retry-After`."""

from __future__ import annotations

from strata.query.errors import InvalidInput, QueryError


class BadPush(InvalidInput):
    """The request cannot be ingested as sent (malformed body, bad producer headers)."""


class PushTooLarge(InvalidInput):
    status = 413
    category = "CAPACITY_EXCEEDED"
    error_code = "payloadTooLarge"


class PushUnknownDataSource(InvalidInput):
    status = 404
    category = "NOT_FOUND"
    error_code = "notFound"


class PushOverloaded(QueryError):
    """Memory is full until a persist finishes: retry shortly (nothing of this batch was taken)."""

    error = "Push capacity exceeded"
    error_class = "org.apache.druid.query.QueryCapacityExceededException"
    status = 429
    category = "CAPACITY_EXCEEDED"
    retry_after = 1


class PushUnavailable(QueryError):
    """The write-ahead log cannot take the batch (e.g. the disk is full); nothing was acknowledged."""

    error = "Service unavailable"
    error_class = "org.apache.druid.java.util.common.IOE"
    status = 503
    category = "RUNTIME_FAILURE"
    retry_after = 5
