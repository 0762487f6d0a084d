"""The segment layout's type names, both ways, and what readers hide."""

from __future__ import annotations

import pyarrow as pa
import pytest

from strata.storage.segment_layout import (
    JSON_TYPE,
    arrow_type,
    column_type,
    column_types,
    hidden_columns,
    multi_value_columns,
    path_column,
)

TYPES = {
    "STRING": pa.string(),
    "LONG": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "ARRAY<STRING>": pa.list_(pa.string()),
    "ARRAY<LONG>": pa.list_(pa.int64()),
    "ARRAY<DOUBLE>": pa.list_(pa.float64()),
    "COMPLEX<json>": JSON_TYPE,
}


@pytest.mark.parametrize("name", list(TYPES))
def test_each_druid_type_has_one_stored_type(name: str) -> None:
    assert arrow_type(name) == TYPES[name]
    assert column_type(TYPES[name]) == name


def test_a_multi_value_string_is_a_list_only_the_footer_tells_apart() -> None:
    assert arrow_type("STRING", multi_value=True) == pa.list_(pa.string())
    assert column_type(pa.list_(pa.string())) == "ARRAY<STRING>"
    facts = {
        "dimensions": [
            {"name": "tags", "type": "string", "columnType": "STRING", "multiValue": True},
            {"name": "doc", "type": "json", "columnType": "COMPLEX<json>",
             "paths": [{"path": "$.a", "column": path_column("doc", "$.a"), "type": "LONG"}]},
            "legacy",
        ]
    }  # fmt: skip
    schema = [pa.field("__time", pa.timestamp("ms")), pa.field("tags", pa.list_(pa.string())),
              pa.field("doc", JSON_TYPE), pa.field("legacy", pa.string()), pa.field("doc.$.a", pa.int64())]  # fmt: skip
    assert multi_value_columns(facts) == {"tags"}
    assert hidden_columns(facts) == {"doc.$.a"}
    assert column_types(facts, schema) == {
        "__time": "LONG", "tags": "STRING", "doc": "COMPLEX<json>", "legacy": "STRING"
    }  # fmt: skip


def test_unknown_types_are_refused() -> None:
    with pytest.raises(ValueError, match="no stored layout"):
        arrow_type("COMPLEX<hyperUnique>")
