"""The lookups a node has loaded: what its queries read (`registeredLookup`, `LOOKUP()`, the `lookup`
dataSource) and what `/druid/listen/v1/lookups` shows.

One registry per process (`REGISTRY`): a node serves one tier. `sync` brings it to a tier's
configuration: loads new and newer lookups, drops the removed ones, re-reads a `cachedNamespace`
file once its `pollPeriod` has passed. A lookup that fails to load keeps its previous values (or
stays absent) and is listed under `toLoad` with the reason, so the coordinator's status shows it
pending; nothing here raises to the caller.

Readers take the current snapshot (an immutable mapping swapped whole), so a query sees one
consistent set of lookups. Each loaded lookup carries a `fingerprint` (its version and a digest of
its values): per-segment cache keys include it, so a changed lookup, a re-read file included, never
answers from results computed with its old values.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import orjson
import pyarrow as pa

from strata.lookups.namespace import DEFAULT_MAX_BYTES, LookupLoadError, load_map, namespace_file
from strata.lookups.spec import LookupContainer, poll_period_ms
from strata.query.errors import ServiceUnavailable

log = logging.getLogger("strata.lookups")


@dataclass(frozen=True)
class LoadedLookup:
    name: str
    container: LookupContainer
    mapping: Mapping[str, str]
    fingerprint: str
    loaded_at: float
    source_stamp: tuple[int, int] | None = None  # a namespace file's (mtime_ns, size) when read
    _table: list[pa.Table] = field(default_factory=list, compare=False, repr=False)

    @property
    def version(self) -> str | None:
        return self.container.version

    @property
    def injective(self) -> bool:
        return self.container.injective

    def table(self) -> pa.Table:
        """The lookup as rows `k`, `v` (strings), built once."""
        if not self._table:
            self._table.append(
                pa.table(
                    {"k": pa.array(list(self.mapping), pa.string()),
                     "v": pa.array(list(self.mapping.values()), pa.string())}
                )
            )  # fmt: skip
        return self._table[0]


def _fingerprint(version: str | None, mapping: Mapping[str, str]) -> str:
    digest = hashlib.sha256(orjson.dumps(mapping, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    return f"{version}:{digest}"


def _stamp(container: LookupContainer) -> tuple[int, int] | None:
    if container.factory["type"] != "cachedNamespace":
        return None
    try:
        st = namespace_file(container.factory["extractionNamespace"]).stat()
    except (LookupLoadError, OSError):
        return None
    return (st.st_mtime_ns, st.st_size)


class LookupRegistry:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._loaded: Mapping[str, LoadedLookup] = MappingProxyType({})
        self._pending: dict[str, tuple[LookupContainer, str]] = {}
        self._lock = threading.Lock()  # one sync at a time; readers never wait
        self.generation = 0
        self.synced = False  # a tier's configuration was applied at least once
        self.refresh: Callable[[], Awaitable[None]] | None = None  # a forced poll (set by the node's sync)

    # -- readers ---------------------------------------------------------------------------------
    def get(self, name: str) -> LoadedLookup | None:
        return self._loaded.get(name)

    def snapshot(self) -> Mapping[str, LoadedLookup]:
        return self._loaded

    def fingerprints(self, names: set[str]) -> dict[str, str | None]:
        loaded = self._loaded
        return {n: (loaded[n].fingerprint if n in loaded else None) for n in sorted(names)}

    def state(self) -> dict[str, Any]:
        """Druid's LookupsState: `current`, `toLoad` (here: failed loads, with `loadError`), `toDrop`."""
        pending = {n: {**c.to_json(), "loadError": why} for n, (c, why) in sorted(self._pending.items())}
        return {
            "current": {n: lk.container.to_json() for n, lk in sorted(self._loaded.items())},
            "toLoad": pending,
            "toDrop": [],
        }

    # -- the tier's configuration applied ----------------------------------------------------------
    def sync(
        self, configured: Mapping[str, LookupContainer], now: float | None = None, *, force: bool = False
    ) -> bool:
        """Load, replace, re-read and drop lookups to match `configured`; True when anything changed.
        `force`: re-read a changed namespace file before its pollPeriod has passed."""
        now = time.time() if now is None else now
        with self._lock:
            loaded = dict(self._loaded)
            changed = False
            for name in [n for n in loaded if n not in configured]:
                del loaded[name]
                changed = True
                log.info("lookup %s dropped", name)
            self._pending = {n: p for n, p in self._pending.items() if n in configured}
            for name, container in configured.items():
                current = loaded.get(name)
                if (
                    current is not None
                    and current.container == container
                    and not self._due(current, now, force)
                ):
                    continue
                fresh = self._load(name, container, now, current)
                if fresh is not None and (current is None or fresh.fingerprint != current.fingerprint
                                          or fresh.container != current.container):  # fmt: skip
                    loaded[name] = fresh
                    changed = True
                elif fresh is not None:
                    loaded[name] = fresh  # re-read, same values: keep the new read time
            if changed:
                self.generation += 1
            self._loaded = MappingProxyType(loaded)
            self.synced = True
            return changed

    def _due(self, current: LoadedLookup, now: float, force: bool = False) -> bool:
        """A namespace is re-read once its pollPeriod has passed and its file changed."""
        factory = current.container.factory
        if factory["type"] != "cachedNamespace":
            return False
        period = poll_period_ms(factory["extractionNamespace"]) / 1000
        if period <= 0 or (now - current.loaded_at < period and not force):
            return False
        return _stamp(current.container) != current.source_stamp

    def _load(
        self, name: str, container: LookupContainer, now: float, current: LoadedLookup | None
    ) -> LoadedLookup | None:
        stamp = _stamp(container)
        try:
            mapping = load_map(container.factory, self.max_bytes)
        except (LookupLoadError, OSError, ValueError, KeyError, IndexError) as e:
            why = str(e) or type(e).__name__
            log.error("lookup %s (version %s) not loaded: %s", name, container.version, why)
            self._pending[name] = (container, why)
            if current is not None and current.container == container:
                return LoadedLookup(name, container, current.mapping, current.fingerprint, now, stamp)
            return None
        self._pending.pop(name, None)
        if current is None or current.container != container:
            log.info("lookup %s loaded: version %s, %d keys", name, container.version, len(mapping))
        fingerprint = _fingerprint(container.version, mapping)
        return LoadedLookup(name, container, MappingProxyType(mapping), fingerprint, now, stamp)


LOOKUP_FINGERPRINTS = "lookupFingerprints"  # the context key a broker sends its fingerprints in


class LookupsDiffer(ServiceUnavailable):
    """A data node's lookup values differ from the broker's, even after reloading: answering would
    let the broker cache a partial under the wrong lookup. Transient (a poll period at most)."""


async def check_fingerprints(expected: Any, names: set[str], registry: LookupRegistry | None = None) -> None:
    """On a data node: the lookups a query reads must be the broker's (`expected`, from the query's
    context); a node behind reloads once first."""
    registry = registry or REGISTRY
    if not isinstance(expected, dict) or not names:
        return
    wanted = {n: expected.get(n) for n in names}
    if registry.fingerprints(names) == wanted:
        return
    if registry.refresh is not None:
        await registry.refresh()
    held = registry.fingerprints(names)
    if held != wanted:
        differ = sorted(n for n in names if held[n] != wanted[n])
        raise LookupsDiffer(
            f"Lookup(s) {differ} on this node differ from the broker's (being reloaded): try again"
        )


REGISTRY = LookupRegistry()
