from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def tutorial_spec(wikipedia_index_spec: Path, wikipedia_sample: Path) -> dict[str, Any]:
    """Druid's tutorial spec, changed only in baseDir."""
    spec = json.loads(wikipedia_index_spec.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(wikipedia_sample.parent)
    return spec


@pytest.fixture
def stores(tmp_path: Path) -> dict[str, Path]:
    return {"deep_storage": tmp_path / "deep", "metadata": tmp_path / "meta.db"}


def inline_spec(data: str, fmt: dict[str, Any] | None = None, **schema: Any) -> dict[str, Any]:
    """A small spec over inline data; keyword args override dataSchema parts, `tuning` the tuningConfig."""
    tuning = schema.pop("tuning", {})
    data_schema: dict[str, Any] = {
        "dataSource": "t",
        "timestampSpec": {"column": "ts", "format": "auto"},
        "dimensionsSpec": {"dimensions": []},
        "granularitySpec": {"segmentGranularity": "day", "queryGranularity": "none", "rollup": False},
    }
    data_schema.update(schema)
    return {
        "dataSchema": data_schema,
        "ioConfig": {"inputSource": {"type": "inline", "data": data}, "inputFormat": fmt or {"type": "json"}},
        "tuningConfig": tuning,
    }
