"""Failures of a data node as the broker classifies them: retry elsewhere, or pass on."""

from __future__ import annotations

from typing import Any

from strata.query.errors import QueryError


class BrokerConfigError(ValueError):
    """Settings that cannot make a working broker; reported without a stack trace."""


class NodeFailure(Exception):
    """The server could not answer (refused, died mid-response, 5xx): its segments go to a replica."""

    def __init__(self, server: str, reason: str, remote: QueryError | None = None):
        super().__init__(f"{server}: {reason}")
        self.server = server
        self.reason = reason
        self.remote = remote  # the node's own error, if it sent one, to report if retries run out


class RemoteQueryError(QueryError):
    """A data node's Druid error, passed to the client with the node's body and status."""

    def __init__(self, body: dict[str, Any], status: int, server: str):
        message = str(body.get("errorMessage") or body.get("error") or f"HTTP {status} from {server}")
        super().__init__(message, host=body.get("host") or server)
        self.body = body
        # `status` is a class-level constant for local errors; a remote one carries the node's status.
        setattr(self, "status", status)  # noqa: B010

    def to_body(self, host: str | None = None) -> dict[str, Any]:
        body = dict(self.body)
        body.setdefault("error", "Unknown exception")
        body.setdefault("errorMessage", self.error_message)
        body.setdefault("host", self.host)
        return body
