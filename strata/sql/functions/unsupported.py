"""Functions of Druid's reference that Strata refuses, each with the reason."""

from __future__ import annotations

from strata.sql.functions.spec import FunctionSpec, specs

OTHER_UNSUPPORTED: list[FunctionSpec] = specs(
    "scalar",
    "other",
    {
        "BLOOM_FILTER_TEST": "Whether a value is in a Base64 Bloom filter.",
    },
    unsupported={
        "BLOOM_FILTER_TEST": "needs the druid-bloom-filter extension, outside Strata's scope",
    },
)
