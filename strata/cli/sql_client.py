"""A small client for Druid's SQL HTTP API, shared by `strata sql` and the tests.

It asks for `arrayLines` with every header so rows stream one line at a time (a `SELECT *` over
millions of rows never sits whole in memory) and the column names and types come first. Druid ends
a complete `arrayLines` answer with an empty line; a stream that stops before it was cut off.
"""

from __future__ import annotations

import contextlib
import ssl
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

SQL_PATH = "/druid/v2/sql/"
SQL_TASK_PATH = "/druid/v2/sql/task"
TASK_PATH = "/druid/indexer/v1/task"


class SqlError(Exception):
    """The server refused or failed a statement; `str()` is one readable line."""


@dataclass
class SqlResult:
    """Column names and types, and the rows as they arrive (iterate `rows` once)."""

    query_id: str
    columns: list[str]
    types: list[str]
    sql_types: list[str]
    rows: Iterator[list[Any]] = field(repr=False)


def error_line(status: int, body: bytes) -> str:
    """Druid's error body (new or legacy shape) as one line; anything else as its text."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body.decode("utf-8", "replace").strip() or "no message"
        return f"HTTP {status}: {' '.join(text.split())}"
    if not isinstance(doc, dict):
        return f"HTTP {status}: {doc!r}"
    message = doc.get("errorMessage") or doc.get("message") or ""
    kind = doc.get("category") or doc.get("error") or f"HTTP {status}"
    return " ".join(f"{kind}: {message}".split()) if message else str(kind)


def http_client(*, timeout: float | None, auth: tuple[str, str] | None, verify: str | bool,
                transport: httpx.BaseTransport | None = None) -> httpx.Client:  # fmt: skip
    """How the command-line clients call a server: Basic credentials, a CA bundle for https://
    (--tls-ca), connecting within 10 s however long the answer may take."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout, connect=min(timeout or 10.0, 10.0)),
        transport=transport,
        auth=auth,
        verify=ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify,
    )


class SqlClient:
    """Druid SQL over HTTP; `transport` is the seam for tests (httpx.MockTransport)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float | None = None,
        transport: httpx.BaseTransport | None = None,
        auth: tuple[str, str] | None = None,  # Basic credentials, for a secured broker
        verify: str | bool = True,  # a CA bundle for https:// (--tls-ca)
    ) -> None:
        self.url = url.rstrip("/")
        self._http = http_client(timeout=timeout, transport=transport, auth=auth, verify=verify)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SqlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def execute(self, sql: str, context: dict[str, Any] | None = None) -> Iterator[SqlResult]:
        """Run one statement; the rows stream while the `with` block reads them."""
        query_id = str(uuid.uuid4())
        body = {
            "query": sql,
            "resultFormat": "arrayLines",
            "header": True,
            "typesHeader": True,
            "sqlTypesHeader": True,
            "context": {**(context or {}), "sqlQueryId": query_id},
        }
        try:
            with self._http.stream("POST", self.url + SQL_PATH, content=orjson.dumps(body),
                                   headers={"Content-Type": "application/json"}) as response:  # fmt: skip
                if response.status_code != 200:
                    raise SqlError(error_line(response.status_code, response.read()))
                lines = response.iter_lines()
                columns = _next_row(lines)
                types = _next_row(lines)
                sql_types = _next_row(lines)
                yield SqlResult(query_id, columns, types, sql_types, _rows(lines))
        except httpx.TimeoutException as exc:
            raise SqlError(f"timed out waiting for {self.url} ({exc.__class__.__name__})") from exc
        except httpx.TransportError as exc:
            raise SqlError(f"cannot reach {self.url}: {exc}") from exc

    def submit_task(self, sql: str, context: dict[str, Any] | None = None) -> str:
        """Post an INSERT or REPLACE to Druid's SQL task API (`/druid/v2/sql/task`); its task id."""
        request = {"query": sql, "context": dict(context or {})}
        response = self._call("POST", SQL_TASK_PATH, content=orjson.dumps(request))
        if response.status_code != 202:
            doc = _json(response)  # Druid's SqlTaskStatus: the error inside
            error = doc.get("error") if isinstance(doc, dict) else None
            raw = orjson.dumps(error) if isinstance(error, dict) else response.content
            raise SqlError(error_line(response.status_code, raw))
        return str(response.json()["taskId"])

    def task_status(self, task_id: str) -> dict[str, Any]:
        """The task's TaskStatusPlus (`/druid/indexer/v1/task/{id}/status`, relayed by the broker)."""
        response = self._call("GET", f"{TASK_PATH}/{task_id}/status")
        if response.status_code != 200:
            raise SqlError(error_line(response.status_code, response.content))
        status: dict[str, Any] = response.json()["status"]
        return status

    def task_report(self, task_id: str) -> dict[str, Any] | None:
        response = self._call("GET", f"{TASK_PATH}/{task_id}/reports")
        doc = _json(response) if response.status_code == 200 else None
        return doc if isinstance(doc, dict) else None

    def shutdown_task(self, task_id: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            self._http.post(f"{self.url}{TASK_PATH}/{task_id}/shutdown", timeout=10)

    def _call(self, method: str, path: str, content: bytes | None = None) -> httpx.Response:
        try:
            return self._http.request(method, self.url + path, content=content,
                                      headers={"Content-Type": "application/json"})  # fmt: skip
        except httpx.TimeoutException as exc:
            raise SqlError(f"timed out waiting for {self.url} ({exc.__class__.__name__})") from exc
        except httpx.TransportError as exc:
            raise SqlError(f"cannot reach {self.url}: {exc}") from exc

    def cancel(self, query_id: str) -> bool:
        """Ask the broker to stop a running statement; False when it was no longer running."""
        try:
            response = self._http.delete(f"{self.url}{SQL_PATH}{query_id}", timeout=5)
        except httpx.HTTPError:
            return False
        return response.status_code in (200, 202, 204)


def _json(response: httpx.Response) -> Any:
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None


def _next_row(lines: Iterator[str]) -> list[Any]:
    for line in lines:
        if line:
            row = orjson.loads(line)
            if isinstance(row, list):
                return row
            raise SqlError(f"unexpected line from the server: {line[:200]}")
    raise SqlError("the server closed the answer before its header")


def _rows(lines: Iterator[str]) -> Iterator[list[Any]]:
    for line in lines:
        if not line:
            return  # Druid's end-of-results marker
        yield orjson.loads(line)
    raise SqlError("the answer was cut off (no end-of-results marker); rows shown may be incomplete")
