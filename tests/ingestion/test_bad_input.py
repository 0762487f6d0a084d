"""Bad rows are counted with line numbers; over the limit nothing is published and nothing is left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.ingestion import IngestionError, TooManyParseExceptions, ingest
from strata.storage import open_metadata_store
from tests.ingestion.conftest import inline_spec

GOOD = '{"ts": "2020-01-01T00:00:00Z", "d": "a", "n": 1}'
CASES = {
    "malformed": ('{"ts": "2020-01-01T00:00:01Z", "d": ', "malformed JSON"),
    "not an object": ("[1, 2]", "not a JSON object"),
    "missing timestamp": ('{"d": "b", "n": 2}', "missing timestamp"),
    "null timestamp": ('{"ts": null, "d": "b", "n": 2}', "missing timestamp"),
    "bad timestamp": ('{"ts": "yesterday", "d": "b", "n": 2}', "unparseable"),
    "wrong type": ('{"ts": "2020-01-01T00:00:02Z", "d": "b", "n": "many"}', "cannot parse as long"),
}
SCHEMA = {"dimensionsSpec": {"dimensions": ["d", {"name": "n", "type": "long"}]}}


def _files(stores: dict[str, Path]) -> list[Path]:
    root = stores["deep_storage"]
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_row_fails_by_default_and_publishes_nothing(case, stores):
    bad, why = CASES[case]
    data = "\n".join([GOOD, GOOD, bad, GOOD])
    with pytest.raises(TooManyParseExceptions) as err:
        ingest(inline_spec(data, **SCHEMA), **stores)
    assert err.value.count == 1 and err.value.examples[0].line == 3
    assert why in err.value.examples[0].message
    assert _files(stores) == []
    store = open_metadata_store(stores["metadata"])
    assert store.segments(include_unused=True) == []
    store.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_rows_within_limit_are_skipped_and_counted(case, stores):
    bad, why = CASES[case]
    data = "\n".join([GOOD, bad, "", GOOD, bad, GOOD])
    summary = ingest(inline_spec(data, **SCHEMA, tuning={"maxParseExceptions": 2}), **stores)
    assert summary.parse_errors == 2 and summary.rows_ingested == 3
    assert [p.line for p in summary.problems] == [2, 5]
    assert all(why in p.message for p in summary.problems)


def test_limit_exceeded_counts_all_kinds(stores):
    data = "\n".join([GOOD] + [bad for bad, _ in CASES.values()])
    with pytest.raises(TooManyParseExceptions):
        ingest(inline_spec(data, **SCHEMA, tuning={"maxParseExceptions": len(CASES) - 1}), **stores)
    summary = ingest(inline_spec(data, **SCHEMA, tuning={"maxParseExceptions": -1}), **stores)
    assert summary.parse_errors == len(CASES)
    assert sorted(p.line for p in summary.problems) == list(range(2, len(CASES) + 2))


def test_csv_wrong_column_count_has_line_number(stores):
    data = "ts,d,n\n2020-01-01T00:00:00Z,a,1\n2020-01-01T00:00:01Z,b\n\n2020-01-01T00:00:02Z,c,x\n"
    fmt = {"type": "csv", "findColumnsFromHeader": True}
    summary = ingest(inline_spec(data, fmt, **SCHEMA, tuning={"maxParseExceptions": 5}), **stores)
    assert summary.rows_ingested == 1
    assert [(p.line, "columns" in p.message or "long" in p.message) for p in summary.problems] == [
        (3, True),
        (5, True),
    ]


def test_failure_before_publish_leaves_no_files(stores, monkeypatch):
    from strata.storage.sqlite_store import SQLiteMetadataStore

    def boom(self, segments, *, overwrite):
        raise KeyboardInterrupt  # an interrupt between the push and the publish

    monkeypatch.setattr(SQLiteMetadataStore, "publish", boom)
    with pytest.raises(KeyboardInterrupt):
        ingest(inline_spec("\n".join([GOOD] * 3), **SCHEMA), **stores)
    assert _files(stores) == []


def test_nothing_to_ingest_is_an_error(stores):
    spec = inline_spec(
        GOOD, granularitySpec={"segmentGranularity": "day", "intervals": ["2021-01-01/2021-01-02"]}
    )
    with pytest.raises(IngestionError, match="1 thrown away"):
        ingest(spec, **stores)
