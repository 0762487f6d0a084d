"""Druid's input sources, parsed: where an ingestion's rows come from.

`local` (files on the host running the ingestion), `inline` (the rows in the spec), `http` (URIs
fetched over HTTP(S)), `s3` (objects of a bucket: `uris`, `prefixes` or `objects`) and `druid` (the
used segments of a data source over an interval: Druid's reindexing source). Remote inputs are
fetched to local files before they are read (`strata.ingestion.fetch`), so every engine splits and
reads them as it reads local files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from strata.ingestion.errors import SpecError
from timeline import Interval


@dataclass(frozen=True)
class LocalInputSource:
    base_dir: str | None = None
    filter: str | None = None
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class InlineInputSource:
    data: str


@dataclass(frozen=True)
class HttpInputSource:
    uris: tuple[str, ...]
    user: str | None = None
    password: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class S3InputSource:
    uris: tuple[str, ...] = ()  # s3://bucket/key
    prefixes: tuple[str, ...] = ()  # s3://bucket/prefix/: every object under it
    access_key: str | None = None  # else the AWS chain (environment, ~/.aws, instance metadata)
    secret_key: str | None = None


@dataclass(frozen=True)
class DruidInputSource:
    """The rows of a data source's used, visible segments over `interval` (Druid's `druid` source)."""

    data_source: str
    interval: Interval


@dataclass(frozen=True)
class SegmentFile:
    """A published segment's file and the parts of its interval still visible (newer versions
    overshadow the rest): only rows within `keep` are read."""

    path: str
    keep: tuple[Interval, ...]


@dataclass(frozen=True)
class SegmentsInputSource:
    """Rows of segments already resolved to files (compaction resolves them through the timeline;
    a spec cannot name this source, it names `druid`)."""

    files: tuple[SegmentFile, ...]


InputSource = (
    LocalInputSource
    | InlineInputSource
    | HttpInputSource
    | S3InputSource
    | DruidInputSource
    | SegmentsInputSource
)
TYPES = ("local", "inline", "http", "s3", "druid")


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):  # Druid's table functions also take a comma-separated string
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"inputSource.{where} must be a list of strings")
    return tuple(value)


def _password(value: Any, where: str) -> str | None:
    """Druid's PasswordProvider: a plain string, or `{"type": "default", "password": ...}` (the
    `environment` type reads `variable`)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        kind = value.get("type", "default")
        if kind == "default" and isinstance(value.get("password"), str):
            return str(value["password"])
        if kind == "environment" and isinstance(value.get("variable"), str):
            import os

            found = os.environ.get(str(value["variable"]))
            if found is None:
                raise SpecError(f"inputSource.{where}: environment variable {value['variable']!r} is not set")
            return found
    raise SpecError(f"inputSource.{where} must be a string or a password provider object")


def _local(obj: Mapping[str, Any]) -> LocalInputSource:
    files = _strings(obj.get("files"), "files")
    base_dir, filt = obj.get("baseDir"), obj.get("filter")
    if not files and not base_dir:
        raise SpecError("local inputSource needs 'baseDir' (with 'filter') or 'files'")
    if base_dir and not filt:
        raise SpecError("local inputSource with 'baseDir' needs a 'filter' glob such as '*.json'")
    return LocalInputSource(base_dir, filt, files)


def _http(obj: Mapping[str, Any]) -> HttpInputSource:
    uris = _strings(obj.get("uris"), "uris")
    if not uris:
        raise SpecError("http inputSource needs 'uris'")
    for uri in uris:
        if urlsplit(uri).scheme not in ("http", "https"):
            raise SpecError(f"http inputSource: {uri!r} is not an http:// or https:// URI")
    headers = obj.get("requestHeaders") or {}
    if not isinstance(headers, Mapping) or not all(isinstance(v, str) for v in headers.values()):
        raise SpecError("inputSource.requestHeaders must be an object of strings")
    return HttpInputSource(
        uris,
        obj.get("httpAuthenticationUsername"),
        _password(obj.get("httpAuthenticationPassword"), "httpAuthenticationPassword"),
        tuple(sorted((str(k), str(v)) for k, v in headers.items())),
    )


def _s3(obj: Mapping[str, Any]) -> S3InputSource:
    uris, prefixes = _strings(obj.get("uris"), "uris"), _strings(obj.get("prefixes"), "prefixes")
    for item in obj.get("objects") or []:
        if not isinstance(item, Mapping) or not isinstance(item.get("bucket"), str) or not item.get("path"):
            raise SpecError("inputSource.objects entries need 'bucket' and 'path'")
        uris += (f"s3://{item['bucket']}/{str(item['path']).lstrip('/')}",)
    if not uris and not prefixes:
        raise SpecError("s3 inputSource needs 'uris', 'prefixes' or 'objects'")
    for uri in uris + prefixes:
        parts = urlsplit(uri)
        if parts.scheme not in ("s3", "s3a", "s3n") or not parts.netloc:
            raise SpecError(f"s3 inputSource: {uri!r} is not an s3://bucket/key URI")
    props = obj.get("properties") or {}
    if not isinstance(props, Mapping):
        raise SpecError("inputSource.properties must be an object")
    return S3InputSource(
        uris,
        prefixes,
        _password(props.get("accessKeyId"), "properties.accessKeyId"),
        _password(props.get("secretAccessKey"), "properties.secretAccessKey"),
    )


def _druid(obj: Mapping[str, Any]) -> DruidInputSource:
    ds, interval = obj.get("dataSource"), obj.get("interval")
    if not isinstance(ds, str) or not ds:
        raise SpecError("druid inputSource needs 'dataSource'")
    if not isinstance(interval, str):
        raise SpecError("druid inputSource needs 'interval' as an ISO-8601 interval")
    if obj.get("filter") is not None:
        raise SpecError("druid inputSource 'filter' is not supported; filter in a SQL statement's WHERE")
    try:
        return DruidInputSource(ds, Interval.parse(interval))
    except ValueError as e:
        raise SpecError(f"druid inputSource interval: {e}") from None


def parse_input_source(obj: Mapping[str, Any]) -> InputSource:
    kind = obj.get("type")
    if kind == "local":
        return _local(obj)
    if kind == "inline":
        data = obj.get("data")
        if not isinstance(data, str):
            raise SpecError("inline inputSource needs 'data' as a string")
        return InlineInputSource(data)
    if kind == "http":
        return _http(obj)
    if kind == "s3":
        return _s3(obj)
    if kind == "druid":
        return _druid(obj)
    raise SpecError(f"inputSource type {kind!r} is not supported (use one of {', '.join(TYPES)})")
