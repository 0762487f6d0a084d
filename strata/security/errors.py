"""Refusals with Druid's error bodies: 401 (who are you?), 403 (not yours), 429 (too many tries).

None names the resource refused nor says whether it exists: the message is Druid's "Unauthorized".
"""

from __future__ import annotations

from typing import Any

from strata.query.errors import QueryError


class NotAuthenticated(QueryError):
    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    status = 401
    category = "UNAUTHORIZED"
    persona = "USER"
    error_code = "unauthorized"

    def __init__(self) -> None:
        super().__init__("Unauthorized")


class Forbidden(QueryError):
    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    status = 403
    category = "FORBIDDEN"
    persona = "USER"
    error_code = "forbidden"

    def __init__(self) -> None:
        super().__init__("Unauthorized")

    def to_body(self, host: str | None = None) -> dict[str, Any]:
        # Druid before DruidException answered {"Access-Check-Result": ...}; old clients read that key
        return {**super().to_body(host), "Access-Check-Result": "Unauthorized"}


class TooManyFailedLogins(QueryError):
    error = "druidException"
    error_class = "org.apache.druid.error.DruidException"
    status = 429
    category = "CAPACITY_EXCEEDED"
    persona = "USER"
    error_code = "tooManyFailedLogins"

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"Too many failed logins from this address; retry after {retry_after} s")
        self.retry_after = retry_after
