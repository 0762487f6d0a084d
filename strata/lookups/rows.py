"""A loaded lookup as rows: the `lookup` dataSource's `k`, `v` table (Druid's LookupDataSource),
for the broker to answer a lookup leaf or send a lookup join's right side as inline rows."""

from __future__ import annotations

from strata.lookups.registry import REGISTRY, LoadedLookup, LookupRegistry
from strata.query.data_source import InlineSource
from strata.query.errors import InvalidInput, invalid


def lookup_not_found(name: str) -> InvalidInput:
    return invalid("Lookup [%s] not found", name)


def loaded(name: str, registry: LookupRegistry = REGISTRY) -> LoadedLookup:
    found = registry.get(name)
    if found is None:
        raise lookup_not_found(name)
    return found


def lookup_inline(name: str, registry: LookupRegistry = REGISTRY) -> InlineSource:
    lookup = loaded(name, registry)
    rows = tuple(sorted(lookup.mapping.items()))
    return InlineSource(("k", "v"), ("STRING", "STRING"), rows)
