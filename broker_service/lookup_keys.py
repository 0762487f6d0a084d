"""What a query's cache keys add for the lookups it reads: each lookup's fingerprint (its version
and a digest of its values, as this broker loaded it), so a changed lookup, a re-read namespace
file included, never answers from a partial or a result computed with its old values."""

from __future__ import annotations

from strata.lookups.registry import REGISTRY
from strata.query import Query
from strata.query.cache_key import canonical_json
from strata.query.lookup_refs import referenced_lookups


def lookup_key(query: Query) -> bytes:
    names = referenced_lookups(query.to_json())
    if not names:
        return b""
    return b"|lookups:" + canonical_json(REGISTRY.fingerprints(names))
