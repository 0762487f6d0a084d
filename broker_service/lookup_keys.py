"""What a query's cache keys add for the lookups it reads: each lookup's fingerprint (its version
and a digest of its values, as this broker loaded it), so a changed lookup, a re-read namespace
file included, never answers from a partial or a result computed with its old values.

The names a query reads are remembered per parsed query (a dashboard's body is parsed once); the
fingerprints are read on every request, so the key moves the moment the broker's lookup moves.
Whole answers remembered by body (`broker_service.answer_memo`) are keyed by `answer_version`,
which moves with any lookup change too.
"""

from __future__ import annotations

from broker_service.query_memo import PerQuery
from strata.lookups.registry import REGISTRY
from strata.query import Query
from strata.query.cache_key import canonical_json
from strata.query.lookup_refs import referenced_lookups

_names = PerQuery(lambda query: frozenset(referenced_lookups(query.to_json())))
_GENERATION_SHIFT = 40  # the view's version stays below 2**40: both move the answer's version


def lookup_key(query: Query) -> bytes:
    names = _names(query)
    if not names:
        return b""
    return b"|lookups:" + canonical_json(REGISTRY.fingerprints(set(names)))


def answer_version(view_version: int) -> int:
    """The version a remembered answer holds: the server view's and the loaded lookups' together."""
    return view_version + (REGISTRY.generation << _GENERATION_SHIFT)


def lookup_fingerprints(query: Query) -> dict[str, str | None]:
    """The fingerprints of the lookups `query` reads, sent to data nodes in its context
    (`lookupFingerprints`): a node holding other values reloads, or refuses rather than answer a
    partial the broker would cache under these."""
    names = _names(query)
    return REGISTRY.fingerprints(set(names)) if names else {}
