"""Multi-value strings, `auto` columns, nested JSON, flattenSpec and transformSpec: the Spark engine
(several read tasks over one file) writes the local engine's segments, file by file, and both hold
what Druid's rules make of the raw rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from strata.ingestion.readers import resolve_inputs
from strata.ingestion.spec import parse_spec
from strata.storage.segment_file import read_segment_facts
from tests.ingestion.conftest import inline_spec
from tests.ingestion.data_model_oracle import auto_type, auto_value
from tests.spark_ingest.compare import assert_same_segments, ordered
from tests.spark_ingest.test_engine import _both

pytestmark = pytest.mark.timeout(180)


def _row(i: int) -> dict[str, Any]:
    """Values whose types differ from one part of the file (one read task) to the next."""
    early = i < 200
    return {
        "ts": f"2020-01-0{1 + i % 3}T{i % 24:02d}:00:00Z",
        "tags": [f"t{i % 5}", f"t{i % 3}"] if i % 4 else f"t{i % 7}",
        "n": i if early else i + 0.5,
        "arr": [i, None] if i % 5 else [],
        "meta": {"user": {"id": i % 9, "name": f"u{i % 4}"}, "flags": [i % 2 == 0]} if i % 6 else None,
        "country": ["fr", "de", "us"][i % 3],
    }


def test_the_spark_engine_writes_the_local_engines_segments(
    tmp_path: Path, spark: Any, monkeypatch: Any
) -> None:
    import strata.ingestion.splits as splits

    rows = [_row(i) for i in range(600)]
    path = tmp_path / "events.json"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setattr(splits, "SPLIT_BYTES", 20_000)
    fmt = {
        "type": "json",
        "flattenSpec": {"fields": [{"type": "path", "name": "user_id", "expr": "$.meta.user.id"}]},
    }
    spec = inline_spec(
        "", fmt,
        dimensionsSpec={"dimensions": ["tags", {"name": "user_id", "type": "long"}, {"name": "meta", "type": "json"}],
                        "useSchemaDiscovery": True},
        transformSpec={"transforms": [{"type": "expression", "name": "country", "expression": "upper(country)"}],
                       "filter": {"type": "not", "field": {"type": "selector", "dimension": "country", "value": "US"}}},
        tuning={"partitionsSpec": {"type": "dynamic", "maxRowsPerSegment": 90}},
    )  # fmt: skip
    spec["ioConfig"]["inputSource"] = {"type": "local", "files": [str(path)]}
    parsed = parse_spec(spec)
    assert len(splits.split_inputs(resolve_inputs(parsed.input_source), parsed.input_format)) > 2
    local, built = _both(spec, tmp_path, spark)
    assert_same_segments(local, built)
    kept = [r for r in rows if r["country"] != "us"]
    assert built.rows_ingested == len(kept) and built.rows_thrown_away == len(rows) - len(kept)
    by_n = {float(r["n"]): r for r in kept}  # every row's `n` differs: it names the row
    for w in ordered(built):
        table = pq.read_table(w.segment.load_spec["path"]).to_pydict()
        mine = [by_n[float(v)] for v in table["n"]]
        entries = {d["name"]: d for d in read_segment_facts(w.segment.load_spec["path"])["dimensions"]}
        for name in ("n", "arr"):  # typed from this segment's own rows
            kind = auto_type([r[name] for r in mine])
            assert entries[name]["columnType"] == kind
            assert table[name] == [auto_value(kind, r[name]) for r in mine]
        assert table["user_id"] == [(r["meta"] or {}).get("user", {}).get("id") for r in mine]
        assert table["country"] == [r["country"].upper() for r in mine]
