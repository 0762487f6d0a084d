"""The coordinator's rule duty (Druid's RunRules): a used segment whose first applicable retention rule
is a drop rule is marked unused, as Druid's coordinator does ("segments dropped from the cluster via
rules are always marked as unused"), so the historicals drop it and a kill task may delete it.

Load and broadcast rules need nothing from the coordinator: every historical reads the rules and
places segments by them itself (historical_service.rule_view). A segment dropped by a rule comes
back only by changing the rules and marking it used again, as in Druid.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from strata.storage.metadata_store import MetadataStore
from strata.storage.retention_rules import UNMATCHED, RetentionRule, placement, rules_in_force
from strata.storage.rule_store import RuleStore

log = logging.getLogger("strata.coordinator")


@dataclass
class RuleRunStats:
    """The last run's counts, shown on /status (Druid emits them as segment/dropped/count etc.)."""

    runs: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # data source -> segments marked unused
    unmatched: dict[str, int] = field(default_factory=dict)  # data source -> segments no rule applies to


class RulesOwner(Protocol):
    """What the duty needs of the coordinator."""

    rules: RuleStore
    metadata: MetadataStore
    rule_stats: RuleRunStats


def run_rules(coordinator: RulesOwner) -> None:
    now = int(time.time() * 1000)
    current = coordinator.rules.current()
    by_source: dict[str, list[RetentionRule]] = {}
    drop: dict[str, list[str]] = {}
    unmatched: dict[str, int] = {}
    for segment in coordinator.metadata.used_segments():
        ds = segment.data_source
        rules = by_source.get(ds)
        if rules is None:
            rules = by_source[ds] = rules_in_force(current, ds)
        placed = placement(rules, segment.interval, now)
        if placed.dropped:
            drop.setdefault(ds, []).append(segment.id)
        elif placed is UNMATCHED:
            unmatched[ds] = unmatched.get(ds, 0) + 1
    stats = coordinator.rule_stats
    stats.runs += 1
    stats.dropped = {}
    for ds, ids in drop.items():
        changed = coordinator.metadata.mark_unused(ids)
        stats.dropped[ds] = changed
        if changed:
            log.info("retention rules dropped %d segments of %s (marked unused)", changed, ds)
    for ds, n in unmatched.items():
        log.warning("no retention rule applies to %d segments of %s; they stay where they are", n, ds)
    stats.unmatched = unmatched
