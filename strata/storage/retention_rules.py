"""Druid's retention rules as a pure rule: what the JSON says, and where it sends a segment.

A data source's rules, then the cluster's `_default` rules, are read in order; the first rule that
applies to a segment's interval decides (Druid's RunRules): a load rule gives the replicas each tier
keeps (`tieredReplicants`), a drop rule drops the segment from every server (the coordinator marks it
unused), a broadcast rule puts it on every historical. A segment no rule applies to stays where it
is. The coordinator and every historical evaluate the same rules with this module, so the
historicals know which tier loads a segment without asking anyone.

Which instants match follow Druid's rule classes: `loadByInterval` and `broadcastByInterval` apply
to a segment their interval overlaps, `dropByInterval` to one it contains; the period rules look
back `period` from now (`includeFuture`, default true, extends them forward for ever: a load
matches when the segment ends after the period's start, a drop when it starts at or after it);
`dropBeforeByPeriod` applies to a segment that ends at or before now minus `period`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from timeline import Interval, Period

DEFAULT_TIER = "_default_tier"  # Druid's DruidServer.DEFAULT_TIER
DEFAULT_REPLICANTS = 2  # DruidServer.DEFAULT_NUM_REPLICANTS
DEFAULT_RULES_KEY = "_default"  # the data source name Druid keeps the cluster's default rules under
DEFAULT_RULES: tuple[dict[str, Any], ...] = (
    {
        "type": "loadForever",
        "tieredReplicants": {DEFAULT_TIER: DEFAULT_REPLICANTS},
        "useDefaultTierForNull": True,
    },
)

LOAD, DROP, BROADCAST = "load", "drop", "broadcast"
_KINDS = {
    "loadForever": (LOAD, None), "loadByInterval": (LOAD, "interval"), "loadByPeriod": (LOAD, "period"),
    "dropForever": (DROP, None), "dropByInterval": (DROP, "interval"), "dropByPeriod": (DROP, "period"),
    "dropBeforeByPeriod": (DROP, "before"),
    "broadcastForever": (BROADCAST, None), "broadcastByInterval": (BROADCAST, "interval"),
    "broadcastByPeriod": (BROADCAST, "period"),
}  # fmt: skip


class RuleError(ValueError):
    """Rules that are not Druid's shape (the rules API answers 400 with the message)."""


@dataclass(frozen=True)
class RetentionRule:
    type: str
    interval: Interval | None = None
    period: Period | None = None
    include_future: bool = True
    tiered_replicants: Mapping[str, int] | None = None  # load rules only
    use_default_tier_for_null: bool = True

    @property
    def kind(self) -> str:
        return _KINDS[self.type][0]

    def applies(self, interval: Interval, now_ms: int) -> bool:
        """Whether the rule decides for a segment over `interval`, at `now_ms` (Druid's appliesTo)."""
        scope = _KINDS[self.type][1]
        if scope is None:
            return True
        if scope == "interval":
            assert self.interval is not None
            if self.kind == DROP:
                return self.interval.contains(interval)
            return self.interval.overlaps(interval)
        assert self.period is not None
        since = self.period.add_to(now_ms, times=-1)
        if scope == "before":
            return interval.end <= since
        if self.kind == DROP:  # the period must hold the whole segment
            return since <= interval.start and (self.include_future or interval.end <= now_ms)
        if self.include_future:
            return since < interval.end
        return interval.start < now_ms and since < interval.end

    def to_json(self) -> dict[str, Any]:
        """As Druid serializes the rule (defaults filled in, intervals normalized)."""
        out: dict[str, Any] = {"type": self.type}
        if self.interval is not None:
            out["interval"] = str(self.interval)
        if self.period is not None:
            out["period"] = str(self.period)
            if self.type != "dropBeforeByPeriod":
                out["includeFuture"] = self.include_future
        if self.kind == LOAD:
            out["tieredReplicants"] = dict(self.tiered_replicants or {})
            out["useDefaultTierForNull"] = self.use_default_tier_for_null
        return out


@dataclass(frozen=True)
class Placement:
    """Where the rules send a segment: replicas per tier, every historical, or none."""

    tiers: Mapping[str, int]
    broadcast: bool = False
    dropped: bool = False

    def replicas_in(self, tier: str) -> int:
        return self.tiers.get(tier, 0)


UNMATCHED = Placement({})  # no rule applies: Druid leaves such a segment alone (it logs it)
DROPPED = Placement({}, dropped=True)
BROADCAST_EVERYWHERE = Placement({}, broadcast=True)


def _flag(value: Any, what: str, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise RuleError(f"'{what}' must be true or false, got {value!r}")


def _replicants(value: Any, use_default: bool) -> dict[str, int]:
    if value is None:
        return {DEFAULT_TIER: DEFAULT_REPLICANTS} if use_default else {}
    if not isinstance(value, Mapping):
        raise RuleError(f"'tieredReplicants' must be an object of tier -> replicas, got {value!r}")
    out = {}
    for tier, n in value.items():
        if n is None:
            raise RuleError("Replicant value cannot be empty")
        if isinstance(n, bool) or not isinstance(n, int):
            raise RuleError(f"Replicant value [{n}] of tier [{tier}] must be an integer")
        if n < 0:
            raise RuleError(f"Replicant value [{n}] is less than 0, which is not allowed")
        out[str(tier)] = n
    return out


def parse_rule(obj: Any) -> RetentionRule:
    if not isinstance(obj, Mapping):
        raise RuleError(f"a rule must be a JSON object, got {obj!r}")
    kind = obj.get("type")
    if kind not in _KINDS:
        known = ", ".join(_KINDS)
        raise RuleError(f"Could not resolve type id '{kind}' as a subtype of Rule (known: [{known}])")
    scope = _KINDS[kind][1]
    interval = period = None
    try:
        if scope == "interval":
            interval = Interval.parse(str(obj["interval"]))
        elif scope is not None:
            period = Period.parse(str(obj["period"]))
    except KeyError as e:
        raise RuleError(f"rule {kind} needs '{e.args[0]}'") from None
    except ValueError as e:
        raise RuleError(f"rule {kind}: {e}") from None
    use_default = _flag(obj.get("useDefaultTierForNull"), "useDefaultTierForNull", True)
    loads = _KINDS[kind][0] == LOAD
    return RetentionRule(
        type=str(kind),
        interval=interval,
        period=period,
        include_future=_flag(obj.get("includeFuture"), "includeFuture", True),
        tiered_replicants=_replicants(obj.get("tieredReplicants"), use_default) if loads else None,
        use_default_tier_for_null=use_default,
    )


def parse_rules(body: Any) -> list[RetentionRule]:
    """A rules list as posted; `RuleError` naming what is wrong."""
    if not isinstance(body, list):
        raise RuleError("the rules must be a JSON array of rule objects")
    return [parse_rule(r) for r in body]


def rules_in_force(
    current: Mapping[str, Sequence[Mapping[str, Any]]], data_source: str
) -> list[RetentionRule]:
    """The data source's rules, then the cluster's default rules (Druid's getRulesWithDefault);
    without stored default rules, Druid's own default (load 2 replicas in `_default_tier`).
    A stored rule Strata cannot read is skipped, so one bad row never stops the others."""
    default = current.get(DEFAULT_RULES_KEY, DEFAULT_RULES)
    out = []
    for obj in [*current.get(data_source, ()), *default]:
        try:
            out.append(parse_rule(obj))
        except RuleError:
            continue
    return out


def placement(rules: Sequence[RetentionRule], interval: Interval, now_ms: int) -> Placement:
    """What the first applicable rule decides for a segment over `interval`."""
    for rule in rules:
        if not rule.applies(interval, now_ms):
            continue
        if rule.kind == DROP:
            return DROPPED
        if rule.kind == BROADCAST:
            return BROADCAST_EVERYWHERE
        return Placement(dict(rule.tiered_replicants or {}))
    return UNMATCHED


def time_dependent(rules: Sequence[RetentionRule]) -> bool:
    """Whether the outcome changes as time passes (a period rule is in force)."""
    return any(r.period is not None for r in rules)
