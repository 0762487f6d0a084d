"""The `dataSource` of a query: a table's name. A `query` dataSource is parsed by `parse_query`
(the broker answers it); other kinds fail with a clear 501."""

from __future__ import annotations

from typing import Any

from strata.query.errors import QueryUnsupported, invalid


def parse_data_source(value: Any) -> str:
    if isinstance(value, str):
        if not value:
            raise invalid("Field [dataSource] must not be empty")
        return value
    if isinstance(value, dict):
        kind = value.get("type")
        if kind == "table":
            name = value.get("name")
            if not isinstance(name, str) or not name:
                raise invalid("Table dataSource needs a non-empty [name]")
            return name
        if kind in ("union", "inline", "join", "lookup", "unnest", "filtered"):
            raise QueryUnsupported(f"dataSource type [{kind}] is not supported")
        raise invalid("Unknown dataSource type [%s]", kind)
    if value is None:
        raise invalid("Missing required field [dataSource]")
    raise invalid("Field [dataSource] must be a string or an object")
