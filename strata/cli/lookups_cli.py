"""`strata lookups`: Druid's lookup configuration API (`/druid/coordinator/v1/lookups`) from a
terminal. It talks to the coordinator (or a broker, which relays the API to it) over HTTP with the
same credentials as `strata sql`; a refusal is one line on stderr and exit status 1, an unreachable
server or missing password status 2.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

HELP = "List, show, set and delete lookups, and see which nodes loaded them (the coordinator's lookup API)"
API = "/druid/coordinator/v1/lookups"
NOT_CONFIGURED = "no lookups are configured yet (strata lookups set FILE creates the configuration)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--coordinator", default="http://127.0.0.1:8081", metavar="URL",
        help="the coordinator's address (HOST:PORT or URL; a broker relays the API too)",
    )  # fmt: skip
    parser.add_argument(
        "--user", help="user for a secured cluster (password: $STRATA_PASSWORD, ~/.netrc or a prompt)"
    )
    parser.add_argument("--tls-ca", help="CA certificate file that an https:// certificate must chain to")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for an answer")
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    sub.add_parser("list", help="every tier's lookups with their version and type")
    for verb, what in (("get", "one lookup's spec, as JSON"), ("delete", "remove one lookup")):
        p = sub.add_parser(verb, help=what)
        p.add_argument("tier")
        p.add_argument("id")
    put = sub.add_parser(
        "set",
        help="add or replace lookups from a JSON file: {tier: {id: spec}}, or with TIER ID one spec "
        "{version, lookupExtractorFactory}; - reads stdin",
    )
    put.add_argument("where", nargs="*", metavar="TIER ID")
    put.add_argument("file")
    put.add_argument("--author", help="who made the change (X-Druid-Author, kept in the audit log)")
    put.add_argument("--comment", help="why (X-Druid-Comment, kept in the audit log)")
    status = sub.add_parser("status", help="whether each lookup is loaded, and on which nodes it is pending")
    status.add_argument("tier", nargs="?")


class LookupsError(Exception):
    """What went wrong, as one line; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def base_url(address: str) -> str:
    """A URL from `HOST:PORT` (the form the nodes' `--coordinator` takes) or a URL."""
    address = address.strip().rstrip("/")
    return address if "://" in address else f"http://{address}"


class LookupsClient:
    """The calls `strata lookups` makes; `transport` is the seam for unit tests."""

    def __init__(
        self, url: str, *, auth: tuple[str, str] | None = None, timeout: float = 30.0,
        verify: str | bool = True, transport: httpx.BaseTransport | None = None,
    ) -> None:  # fmt: skip
        from strata.cli.sql_client import http_client

        self.url = base_url(url)
        self._http = http_client(timeout=timeout, auth=auth, verify=verify, transport=transport)

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, body: Any, headers: dict[str, str] | None,
              params: dict[str, str] | None) -> httpx.Response:  # fmt: skip
        import httpx

        content = None if body is None else json.dumps(body).encode()
        try:
            return self._http.request(
                method, self.url + API + path, content=content, params=params,
                headers={"Content-Type": "application/json", **(headers or {})},
            )  # fmt: skip
        except httpx.TimeoutException as e:
            raise LookupsError(f"timed out waiting for {self.url} ({e.__class__.__name__})", 2) from e
        except httpx.TransportError as e:
            raise LookupsError(f"cannot reach {self.url}: {e}", 2) from e

    def call(self, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None,
             missing: str | None = None, params: dict[str, str] | None = None) -> Any:  # fmt: skip
        """The parsed answer; a 404 raises `missing` (when given), another error Druid's message.
        With `missing` None a 404 answers None."""
        from strata.cli.sql_client import error_line

        response = self._send(method, path, body, headers, params)
        if response.status_code == 404:
            if missing is None:
                return None
            raise LookupsError(missing)
        if response.status_code >= 400:
            raise LookupsError(error_line(response.status_code, response.content))
        return response.json() if response.content else None

    def config(self) -> dict[str, Any]:
        """The whole configuration ({} before it exists)."""
        found = self.call("GET", "/config/all")
        return found if isinstance(found, dict) else {}


def _factory_type(spec: dict[str, Any]) -> str:
    factory = spec.get("lookupExtractorFactory") or {}
    kind = str(factory.get("type", "?"))
    namespace = factory.get("extractionNamespace")
    return f"{kind}/{namespace.get('type', '?')}" if isinstance(namespace, dict) else kind


def list_lookups(client: LookupsClient) -> list[str]:
    """One line per lookup: tier, id, version, type; columns aligned."""
    rows = [("TIER", "LOOKUP", "VERSION", "TYPE")]
    for tier, lookups in sorted(client.config().items()):
        for name, spec in sorted(lookups.items()):
            rows.append((tier, name, str(spec.get("version")), _factory_type(spec)))
    if len(rows) == 1:
        return ["no lookups"]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[3]]) for r in rows]


def status_lines(client: LookupsClient, tier: str | None) -> list[str]:
    """`tier/id: loaded`, or `pending on node, node`, per lookup."""
    if tier is None:
        doc = client.call("GET", "/status", params={"detailed": "true"}, missing=NOT_CONFIGURED)
    else:
        one = client.call("GET", f"/status/{tier}", params={"detailed": "true"}, missing=f"no tier [{tier}]")
        doc = {tier: one}
    lines = []
    for name_tier, lookups in sorted(doc.items()):
        for name, state in sorted(lookups.items()):
            pending = state.get("pendingNodes") or []
            where = "loaded" if state.get("loaded") else f"pending on {', '.join(pending) or 'no node'}"
            lines.append(f"{name_tier}/{name}: {where}")
    return lines or ["no lookups"]


def _read_json(file: str) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        return json.loads(text)
    except OSError as e:
        raise LookupsError(f"cannot read {file}: {e.strerror or e}", 2) from e
    except json.JSONDecodeError as e:
        raise LookupsError(f"{file} is not JSON: {e}", 2) from e


def set_lookups(client: LookupsClient, args: argparse.Namespace) -> list[str]:
    if len(args.where) not in (0, 2):
        raise LookupsError("set takes FILE, or TIER ID FILE", 2)
    doc = _read_json(args.file)
    headers = {k: v for k, v in (("X-Druid-Author", args.author), ("X-Druid-Comment", args.comment)) if v}
    if not client.config():  # Druid wants the empty map posted once before the first lookup
        client.call("POST", "/config", body={}, headers=headers)
    if args.where:
        tier, name = args.where
        client.call("POST", f"/config/{tier}/{name}", body=doc, headers=headers)
        return [f"set {tier}/{name}"]
    if not isinstance(doc, dict):
        raise LookupsError(f"{args.file} must hold {{tier: {{id: spec}}}}", 2)
    client.call("POST", "/config", body=doc, headers=headers)
    return [f"set {tier}/{name}" for tier, lookups in sorted(doc.items()) for name in sorted(lookups or {})]


def perform(client: LookupsClient, args: argparse.Namespace) -> list[str]:
    """The lines to print for the action."""
    if args.action == "list":
        return list_lookups(client)
    if args.action == "status":
        return status_lines(client, args.tier)
    if args.action == "set":
        return set_lookups(client, args)
    where = f"{args.tier}/{args.id}"
    missing = f"no lookup {where}"
    if args.action == "get":
        return [json.dumps(client.call("GET", f"/config/{where}", missing=missing), indent=2)]
    client.call("DELETE", f"/config/{where}", missing=missing)
    return [f"deleted {where}"]


def run(args: argparse.Namespace) -> int:
    from strata.cli.credentials import CredentialsError, client_credentials

    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        auth = client_credentials(base_url(args.coordinator), args.user)
    except CredentialsError as e:
        print(f"strata lookups: error: {e}", file=sys.stderr)
        return 2
    client = LookupsClient(args.coordinator, auth=auth, timeout=args.timeout, verify=args.tls_ca or True)
    try:
        for line in perform(client, args):
            print(line)
    except LookupsError as e:
        print(f"strata lookups: error: {e}", file=sys.stderr)
        return e.code
    finally:
        client.close()
    return 0
