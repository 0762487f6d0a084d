"""Druid's lookup configuration: tiers of named lookups, each a versioned extractor factory.

The coordinator keeps one document, `{tier: {name: {"version", "lookupExtractorFactory"}}}`, under
Druid's config key `lookupsConfig`. A change adds or replaces lookups (a replacement must carry a
lexicographically greater version, as Druid's `LookupExtractorFactoryMapContainer.replaces`), a
deletion removes one lookup or a whole tier. Until the document exists (an empty map posted once,
as Druid asks) a change naming lookups is refused, so a coordinator that could not read the
document never overwrites it.

Factories are checked here, where they are posted: `map` (`map` of string to string) and
`cachedNamespace` with a `uri` extraction namespace; what their values mean at load time is
`strata.lookups.namespace`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONFIG_KEY = "lookupsConfig"  # Druid's LookupCoordinatorManager.LOOKUP_CONFIG_KEY
DEFAULT_TIER = "__default"
FACTORY_TYPES = ("map", "cachedNamespace")
PARSE_FORMATS = ("csv", "tsv", "simpleJson", "customJson")

TierMap = dict[str, dict[str, dict[str, Any]]]


class LookupSpecError(ValueError):
    """A lookup configuration Druid would refuse; the message says why."""


@dataclass(frozen=True)
class LookupContainer:
    """One lookup as configured: its version and its extractor factory's JSON."""

    version: str | None
    factory: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "lookupExtractorFactory": dict(self.factory)}

    def replaces(self, other: LookupContainer) -> bool:
        """Druid's rule: a versioned spec replaces an unversioned one, else the greater version wins."""
        if self.version is None:
            return False
        return other.version is None or self.version > other.version

    @property
    def injective(self) -> bool:
        return bool(self.factory.get("injective", False))


def parse_container(value: Any, where: str) -> LookupContainer:
    if not isinstance(value, Mapping):
        raise LookupSpecError(f"lookup [{where}] must be an object: [version], and [lookupExtractorFactory]")
    version = value.get("version")
    if version is not None and not isinstance(version, str):
        raise LookupSpecError(f"lookup [{where}]: [version] must be a string")
    factory = value.get("lookupExtractorFactory")
    check_factory(factory, where)
    assert isinstance(factory, Mapping)
    return LookupContainer(version, factory)


def check_factory(factory: Any, where: str) -> None:
    if not isinstance(factory, Mapping):
        raise LookupSpecError(f"lookup [{where}] needs a [lookupExtractorFactory] object")
    kind = factory.get("type")
    if kind not in FACTORY_TYPES:
        raise LookupSpecError(
            f"lookup [{where}]: unknown lookupExtractorFactory type [{kind}]; "
            f"known types: {', '.join(FACTORY_TYPES)}"
        )
    if "injective" in factory and not isinstance(factory["injective"], bool):
        raise LookupSpecError(f"lookup [{where}]: [injective] must be true or false")
    if kind == "map":
        mapping = factory.get("map")
        if not isinstance(mapping, Mapping):
            raise LookupSpecError(f"lookup [{where}]: a map lookup needs a [map] object")
        if any(not isinstance(v, str) for v in mapping.values()):
            raise LookupSpecError(f"lookup [{where}]: the values of [map] must be strings")
    else:
        check_namespace(factory.get("extractionNamespace"), where)


def check_namespace(ns: Any, where: str) -> None:
    if not isinstance(ns, Mapping) or ns.get("type") != "uri":
        raise LookupSpecError(
            f"lookup [{where}]: cachedNamespace needs an [extractionNamespace] of type [uri] "
            "(the one Strata loads)"
        )
    if (ns.get("uri") is None) == (ns.get("uriPrefix") is None):
        raise LookupSpecError(f"lookup [{where}]: set exactly one of [uri] and [uriPrefix]")
    for key in ("uri", "uriPrefix", "fileRegex"):
        if ns.get(key) is not None and not isinstance(ns[key], str):
            raise LookupSpecError(f"lookup [{where}]: [{key}] must be a string")
    if ns.get("fileRegex") is not None:
        if ns.get("uri") is not None:
            raise LookupSpecError(f"lookup [{where}]: [fileRegex] goes with [uriPrefix], not [uri]")
        try:
            re.compile(ns["fileRegex"])
        except re.error as e:
            raise LookupSpecError(f"lookup [{where}]: bad [fileRegex]: {e}") from None
    poll_period_ms(ns, where)
    check_parse_spec(ns.get("namespaceParseSpec"), where)


def check_parse_spec(spec: Any, where: str) -> None:
    if not isinstance(spec, Mapping) or spec.get("format") not in PARSE_FORMATS:
        raise LookupSpecError(
            f"lookup [{where}]: [namespaceParseSpec] needs a [format], one of {', '.join(PARSE_FORMATS)}"
        )
    kind = spec["format"]
    if kind in ("csv", "tsv"):
        columns = spec.get("columns")
        if columns is None and not spec.get("hasHeaderRow"):
            raise LookupSpecError(f"lookup [{where}]: [columns] are required unless [hasHeaderRow] is true")
        if columns is not None and (
            not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) or not columns
        ):
            raise LookupSpecError(f"lookup [{where}]: [columns] must be a list of column names")
        for key in ("keyColumn", "valueColumn"):
            name = spec.get(key)
            if name is not None and columns is not None and name not in columns:
                raise LookupSpecError(f"lookup [{where}]: [{key}] [{name}] is not one of the columns")
        if columns is not None and len(columns) < 2 and spec.get("valueColumn") is None:
            raise LookupSpecError(f"lookup [{where}]: a key and a value column are needed")
    if kind == "customJson":
        for key in ("keyFieldName", "valueFieldName"):
            if not isinstance(spec.get(key), str) or not spec[key]:
                raise LookupSpecError(f"lookup [{where}]: customJson needs [{key}]")


_PERIOD = re.compile(r"^PT(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?$")


def poll_period_ms(ns: Mapping[str, Any], where: str = "") -> int:
    """The namespace's `pollPeriod` (ISO-8601 `PT..` or milliseconds) in ms; 0: read once."""
    value = ns.get("pollPeriod")
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        if value.isdigit():
            return int(value)
        m = _PERIOD.match(value)
        if m and any(m.groups()):
            h, mi, s = (float(g or 0) for g in m.groups())
            return int(((h * 60 + mi) * 60 + s) * 1000)
    raise LookupSpecError(f"lookup [{where}]: [pollPeriod] must be an ISO-8601 period (PT10M) or ms")


def parse_tier_map(value: Any) -> dict[str, dict[str, LookupContainer]]:
    """A posted `{tier: {name: container}}`; every container must carry a version (Druid's check)."""
    if not isinstance(value, Mapping):
        raise LookupSpecError("the lookup configuration must be an object of tiers")
    out: dict[str, dict[str, LookupContainer]] = {}
    for tier, lookups in value.items():
        if not isinstance(lookups, Mapping):
            raise LookupSpecError(f"tier [{tier}] must be an object of lookups")
        out[tier] = {}
        for name, container in lookups.items():
            parsed = parse_container(container, f"{tier}:{name}")
            if parsed.version is None:
                raise LookupSpecError(f"lookup [{tier}]:[{name}] does not have version.")
            out[tier][name] = parsed
    return out


def with_updates(prior: TierMap | None, updates: dict[str, dict[str, LookupContainer]]) -> TierMap:
    """Druid's LookupCoordinatorManager.updateLookups: add or replace, never delete."""
    if prior is None:
        if updates:
            raise LookupSpecError(
                "Not initialized. If this is the first lookup, post an empty map to initialize"
            )
        return {}
    out = {tier: dict(lookups) for tier, lookups in prior.items()}
    for tier, lookups in updates.items():
        current = out.setdefault(tier, {})
        for name, container in lookups.items():
            if name in current and not container.replaces(parse_container(current[name], name)):
                raise LookupSpecError(
                    f"given update for lookup [{tier}]:[{name}] can't replace existing spec "
                    f"[version {current[name].get('version')}]: post a greater version"
                )
        current.update({name: c.to_json() for name, c in lookups.items()})
    return out


def without_lookup(prior: TierMap | None, tier: str, name: str) -> TierMap:
    """The map without `tier`/`name` (a tier left empty goes too); KeyError when it is not there."""
    if prior is None or name not in prior.get(tier, {}):
        raise KeyError(name)
    out = {t: dict(lookups) for t, lookups in prior.items()}
    del out[tier][name]
    if not out[tier]:
        del out[tier]
    return out


def without_tier(prior: TierMap | None, tier: str) -> TierMap:
    if prior is None or tier not in prior:
        raise KeyError(tier)
    return {t: lookups for t, lookups in prior.items() if t != tier}
