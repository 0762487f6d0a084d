"""Functions of Druid's reference that Strata refuses, each with the reason."""

from __future__ import annotations

from strata_sql.functions.spec import FunctionSpec, specs

_JSON = "nested COMPLEX<json> columns are not part of Strata's segments"

_JSON_ROWS = {
    "JSON_KEYS": "Field names of a JSON object at a path.",
    "JSON_MERGE": "Merges JSON objects.",
    "JSON_OBJECT": "Builds a JSON object.",
    "JSON_PATHS": "Paths of the literal values of a JSON value.",
    "JSON_QUERY": "A JSON value at a path.",
    "JSON_QUERY_ARRAY": "An array of JSON values at a path.",
    "JSON_VALUE": "A literal value at a path.",
    "PARSE_JSON": "Parses a string as JSON.",
    "TRY_PARSE_JSON": "Parses a string as JSON, null when invalid.",
    "TO_JSON_STRING": "Serializes a value as JSON text.",
}
JSON_SPECS: list[FunctionSpec] = specs(
    "scalar", "JSON", _JSON_ROWS, unsupported={name: _JSON for name in _JSON_ROWS}
)


OTHER_UNSUPPORTED: list[FunctionSpec] = specs(
    "scalar",
    "other",
    {
        "BLOOM_FILTER_TEST": "Whether a value is in a Base64 Bloom filter.",
        "DECODE_BASE64_COMPLEX": "Decodes Base64 into a complex value.",
    },
    unsupported={
        "BLOOM_FILTER_TEST": "needs the druid-bloom-filter extension, outside Strata's scope",
        "DECODE_BASE64_COMPLEX": "Strata has no complex column types to decode into",
    },
)
