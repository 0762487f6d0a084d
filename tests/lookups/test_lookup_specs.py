"""Lookup specs and files, unit by unit: Druid's version rule, the parse formats, uriPrefix with
fileRegex (the newest match), the size bound and pollPeriod; expected maps are written out by hand
from the files' lines."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from strata.lookups import spec
from strata.lookups.namespace import LookupLoadError, load_map, parse_lines
from strata.lookups.registry import LookupRegistry


def test_versions_replace_as_druid_compares_them() -> None:
    v1, v2 = (spec.LookupContainer(v, {"type": "map", "map": {}}) for v in ("v1", "v2"))
    assert v2.replaces(v1) and not v1.replaces(v2) and not v1.replaces(v1)
    assert v1.replaces(spec.LookupContainer(None, {"type": "map", "map": {}}))
    prior = spec.with_updates({}, {"t": {"a": v1}})
    with pytest.raises(spec.LookupSpecError, match="can't replace"):
        spec.with_updates(prior, {"t": {"a": v1}})
    assert spec.with_updates(prior, {"t": {"a": v2}})["t"]["a"]["version"] == "v2"
    assert spec.without_lookup(prior, "t", "a") == {}  # an emptied tier goes too
    with pytest.raises(spec.LookupSpecError, match="Not initialized"):
        spec.with_updates(None, {"t": {"a": v1}})


@pytest.mark.parametrize(("parse", "text", "expected"), [
    ({"format": "csv", "columns": ["id", "x", "name"], "keyColumn": "id", "valueColumn": "name"},
     "1,a,one\n2,b,\"two, too\"\n,c,none\n", {"1": "one", "2": "two, too"}),
    ({"format": "tsv", "hasHeaderRow": True, "skipHeaderRows": 1},
     "comment\nk\tv\nx\t1\ny\t2\n", {"x": "1", "y": "2"}),
    ({"format": "tsv", "columns": ["k", "v"], "delimiter": "|"}, "a|b\nc|d\n", {"a": "b", "c": "d"}),
    ({"format": "simpleJson"}, '{"a": "1", "b": "2"}\n\n{"c": "3"}\n', {"a": "1", "b": "2", "c": "3"}),
    ({"format": "customJson", "keyFieldName": "id", "valueFieldName": "name"},
     '{"id": "1", "name": "one", "other": 5}\n{"id": "2"}\n', {"1": "one"}),
])  # fmt: skip
def test_parse_formats(parse: dict, text: str, expected: dict[str, str]) -> None:
    spec.check_parse_spec(parse, "t:x")
    assert parse_lines(parse, text) == expected


def test_uri_prefix_reads_the_newest_matching_file_and_refuses_past_the_bound(tmp_path: Path) -> None:
    old, new, other = tmp_path / "codes-1.tsv", tmp_path / "codes-2.tsv", tmp_path / "zzz.txt"
    old.write_text("a\told\n")
    new.write_text("a\tnew\n")
    other.write_text("a\tother\n")
    os.utime(old, (2_000_000_000, 2_000_000_000))  # newest by time, though its name sorts first
    ns = {"type": "uri", "uriPrefix": tmp_path.as_uri() + "/", "fileRegex": r"codes-\d+\.tsv",
          "namespaceParseSpec": {"format": "tsv", "columns": ["k", "v"]}}  # fmt: skip
    factory = {"type": "cachedNamespace", "extractionNamespace": ns}
    spec.check_factory(factory, "t:codes")
    assert load_map(factory) == {"a": "old"}
    with pytest.raises(LookupLoadError, match="over the limit of 3"):
        load_map(factory, max_bytes=3)
    with pytest.raises(LookupLoadError, match="only file: URIs"):
        load_map({**factory, "extractionNamespace": {**ns, "uriPrefix": "s3://bucket/"}})


def test_poll_periods() -> None:
    assert spec.poll_period_ms({"pollPeriod": "PT10M"}) == 600_000
    assert spec.poll_period_ms({"pollPeriod": "PT0.5S"}) == 500
    assert spec.poll_period_ms({"pollPeriod": 2000}) == 2000
    assert spec.poll_period_ms({}) == 0
    with pytest.raises(spec.LookupSpecError):
        spec.poll_period_ms({"pollPeriod": "soon"})


def test_a_failed_load_keeps_the_previous_values(tmp_path: Path) -> None:
    path = tmp_path / "m.tsv"
    path.write_text("a\t1\n")
    ns = {"type": "uri", "uri": path.as_uri(), "pollPeriod": 1,
          "namespaceParseSpec": {"format": "tsv", "columns": ["k", "v"]}}  # fmt: skip
    registry = LookupRegistry(max_bytes=10)
    container = spec.LookupContainer("v1", {"type": "cachedNamespace", "extractionNamespace": ns})
    assert registry.sync({"m": container}, now=0)
    first = registry.get("m")
    assert first is not None and dict(first.mapping) == {"a": "1"}
    path.write_text("a\t2\nb\t3\nc\t4\n")  # past the bound
    registry.sync({"m": container}, now=5)
    again = registry.get("m")
    assert again is not None and dict(again.mapping) == {"a": "1"}
    assert "m" in registry.state()["toLoad"]
    assert registry.sync({}, now=6) and registry.get("m") is None  # dropped once unconfigured
    assert registry.state() == {"current": {}, "toLoad": {}, "toDrop": []}
