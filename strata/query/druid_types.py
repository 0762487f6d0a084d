"""Druid's names for column types, as scan row signatures and segmentMetadata report them."""

from __future__ import annotations

import pyarrow as pa


def druid_type(t: pa.DataType) -> str:
    """Druid's type of a column from its Arrow type alone (a segment's footer can say more: a list
    of strings there may be a multi-value STRING, see `strata.storage.segment_layout`)."""
    if pa.types.is_dictionary(t):
        return druid_type(t.value_type)
    if isinstance(t, pa.JsonType):
        return "COMPLEX<json>"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = druid_type(t.value_type)
        return f"ARRAY<{'DOUBLE' if element == 'FLOAT' else element}>"
    if pa.types.is_timestamp(t) or pa.types.is_integer(t):
        return "LONG"
    if pa.types.is_float32(t):
        return "FLOAT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "COMPLEX<HLLSketch>"  # the only complex metric segments hold
    return "STRING"


def arrow_type(druid: str) -> pa.DataType:
    """The Arrow type a column of Druid type `druid` travels as (typed scans, the Spark reader)."""
    kind = druid.upper()
    if kind == "LONG":
        return pa.int64()
    if kind == "FLOAT":
        return pa.float32()
    if kind == "DOUBLE":
        return pa.float64()
    if kind.startswith("COMPLEX"):
        return pa.binary()
    return pa.string()
