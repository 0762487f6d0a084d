"""The Spark data source's calls to the broker, over the standard library's HTTP client.

Plain `urllib` on purpose: it runs in Spark's Python workers (planning and executors), holds no
state that would have to be pickled, and its response is a file object Arrow's stream reader
reads incrementally, so a scan of any size is never held whole. Every failure becomes a
`StrataError` with a one-line message (what failed and the broker's own Druid error message).
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from strata.wire import (
    ARROW_STREAM,
    ERROR_METADATA_KEY,
    RESPONSE_CONTEXT_HEADER,
    decode_partials,
    parse_missing_segments,
)

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # terminal underlines some parsers put in messages
ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"


def _basic(auth: tuple[str, str]) -> str:
    import base64

    return "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode("ascii")


class StrataError(Exception):
    """A failure talking to the broker, said in one line."""


@dataclass(frozen=True)
class SqlResult:
    names: list[str]
    types: list[str]  # Druid's column types (typesHeader)
    sql_types: list[str]  # SQL types (sqlTypesHeader)
    rows: list[list[Any]]


def druid_error_message(body: Any, fallback: str) -> str:
    """Druid's error body in one line: `category/error: errorMessage`."""
    if not isinstance(body, Mapping):
        return fallback
    kind = body.get("category") or body.get("errorCode") or body.get("error") or "error"
    message = ANSI_ESCAPE.sub("", str(body.get("errorMessage") or body.get("error") or fallback))
    return f"{kind}: {' '.join(message.split())}"


_NUMBERS = ("LONG", "FLOAT", "DOUBLE")


def least_restrictive(a: str, b: str) -> str:
    """The type both segments' values fit (Druid's rules): numbers widen to DOUBLE, a scalar and
    an array make an array, nested data wins, anything else is STRING."""
    if a == b:
        return a
    if "COMPLEX<json>" in (a, b):
        return "COMPLEX<json>"
    if a.startswith("ARRAY<") or b.startswith("ARRAY<"):
        inner = [t[len("ARRAY<") : -1] if t.startswith("ARRAY<") else t for t in (a, b)]
        return f"ARRAY<{least_restrictive(*inner)}>"
    if a in _NUMBERS and b in _NUMBERS:
        return "DOUBLE"
    return "STRING"


class BrokerClient:
    """Druid's HTTP API of one server: the broker, or (`role="data node"`) a historical."""

    def __init__(
        self,
        url: str,
        timeout_s: float = 300.0,
        role: str = "broker",
        auth: tuple[str, str] | None = None,
        tls_ca: str | None = None,  # the CA an https:// broker's certificate must chain to
    ) -> None:
        if not url.startswith(("http://", "https://")):
            url = "http://" + url
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.role = role
        self._authorization = _basic(auth) if auth is not None else None
        self.tls_ca = tls_ca

    def __repr__(self) -> str:  # never the credentials, whatever prints this
        return f"BrokerClient({self.url!r}, role={self.role!r})"

    # -- requests ---------------------------------------------------------------------------------
    def _open(self, path: str, body: Any = None, accept: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": accept}
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            context = ssl.create_default_context(cafile=self.tls_ca) if self.tls_ca else None
            return urllib.request.urlopen(request, timeout=self.timeout_s, context=context)
        except urllib.error.HTTPError as e:
            raw = e.read()
            e.close()
            try:
                parsed = json.loads(raw)
            except ValueError:
                parsed = None
            text = raw.decode("utf-8", "replace")[:300] or e.reason
            message = druid_error_message(parsed, f"HTTP {e.code} {text}")
            raise StrataError(
                f"Strata {self.role} {self.url} refused {path} (HTTP {e.code}): {message}"
            ) from None
        except (TimeoutError, urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", e)
            raise StrataError(f"cannot reach the Strata {self.role} at {self.url}: {reason}") from None

    def _json(self, path: str, body: Any = None) -> Any:
        with self._open(path, body) as response:
            raw = response.read()
        try:
            return json.loads(raw)
        except ValueError:
            raise StrataError(f"Strata {self.role} {self.url} answered {path} with invalid JSON") from None

    # -- what the data source asks ----------------------------------------------------------------
    def datasources(self) -> list[str]:
        return [str(d) for d in self._json("/druid/v2/datasources")]

    def require_datasource(self, name: str) -> None:
        known = self.datasources()
        if name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise StrataError(
                f"unknown datasource '{name}' on the Strata broker {self.url} (it has: {listed})"
            )

    def column_types(self, data_source: str, intervals: Sequence[str]) -> dict[str, str]:
        """Druid type per column over the intervals, `__time` first: each segment's type (from
        segmentMetadata), the least restrictive where segments differ, and a multi-value STRING
        as ARRAY<STRING>."""
        rows = self.native(
            {
                "queryType": "segmentMetadata",
                "dataSource": data_source,
                "intervals": list(intervals) or [ETERNITY],
                "merge": False,
                "analysisTypes": [],
            }
        )
        out: dict[str, str] = {"__time": "LONG"}
        for row in rows:
            for name, info in (row.get("columns") or {}).items():
                if name == "__time":
                    continue
                kind = str((info or {}).get("typeSignature") or (info or {}).get("type") or "STRING")
                if kind == "STRING" and (info or {}).get("hasMultipleValues"):
                    kind = "ARRAY<STRING>"
                out[name] = least_restrictive(out[name], kind) if name in out else kind
        return out

    def candidates(self, data_source: str, intervals: Sequence[str]) -> list[dict[str, Any]]:
        """The segments (Druid's located descriptors) to read over `intervals`, in time order."""
        ds = urllib.parse.quote(data_source, safe="")
        query = urllib.parse.urlencode({"intervals": ",".join(intervals)})
        return list(self._json(f"/druid/v2/datasources/{ds}/candidates?{query}"))

    def native(self, query: Mapping[str, Any]) -> list[Any]:
        result = self._json("/druid/v2/", dict(query))
        if not isinstance(result, list):
            raise StrataError(f"Strata {self.role} {self.url} answered a native query with a non-array")
        return result

    def sql(self, sql: str, context: Mapping[str, Any] | None = None) -> SqlResult:
        body = {
            "query": sql,
            "resultFormat": "array",
            "header": True,
            "typesHeader": True,
            "sqlTypesHeader": True,
            "context": dict(context or {}),
        }
        rows = self._json("/druid/v2/sql", body)
        if not isinstance(rows, list) or len(rows) < 3:
            raise StrataError(f"Strata {self.role} {self.url} answered SQL without its header rows")
        return SqlResult(list(rows[0]), list(rows[1]), list(rows[2]), rows[3:])

    def scan_batches(self, query: Mapping[str, Any]) -> Iterator[pa.RecordBatch]:
        """A scan answered as a streamed Arrow IPC stream; an error inside the stream raises."""
        with self._open("/druid/v2/", dict(query), accept=ARROW_STREAM) as response:
            kind = response.headers.get("Content-Type", "")
            if ARROW_STREAM not in kind:
                raise StrataError(f"Strata {self.role} {self.url} answered a scan with {kind}, not Arrow")
            try:
                reader = pa.ipc.open_stream(response)
                while True:
                    try:
                        batch, metadata = reader.read_next_batch_with_custom_metadata()
                    except StopIteration:
                        return
                    if metadata is not None and ERROR_METADATA_KEY in metadata:
                        body = json.loads(metadata[ERROR_METADATA_KEY])
                        message = druid_error_message(body, "error")
                        raise StrataError(f"Strata {self.role} {self.url} failed a scan: {message}")
                    yield batch
            except (pa.ArrowInvalid, OSError) as e:
                raise StrataError(
                    f"Arrow stream from the Strata {self.role} {self.url} broke off: {e}"
                ) from None

    def node_scan(self, query: Mapping[str, Any]) -> tuple[pa.Table | None, list[dict[str, Any]]]:
        """A data node's answer to a scan of named segments: its rows (Arrow partials, read whole so
        a failure surfaces before any row is used) and the segments it does not serve."""
        with self._open("/druid/v2/", dict(query), accept=ARROW_STREAM) as response:
            kind = response.headers.get("Content-Type", "")
            context = response.headers.get(RESPONSE_CONTEXT_HEADER)
            try:
                payload = response.read()
            except (OSError, http.client.HTTPException) as e:
                raise StrataError(f"Strata {self.role} {self.url} broke off a scan: {e}") from None
        if ARROW_STREAM not in kind:
            raise StrataError(f"Strata {self.role} {self.url} answered a scan with {kind}, not Arrow")
        try:
            missing = [d.to_json() for d in parse_missing_segments(context)]
            return decode_partials(payload), missing
        except (pa.ArrowInvalid, OSError, ValueError, KeyError, TypeError) as e:
            raise StrataError(f"Strata {self.role} {self.url} answered a scan unreadably: {e}") from None
