"""The retention rules a historical follows: read from the metadata store every pass, applied to each
used segment (strata.storage.retention_rules), so every historical places a segment in the same
tiers with the same replica counts as the coordinator's rule duty, without asking it.

Without stored default rules the historical's own `--replicas` is the default rule's replica count
in `_default_tier` (Druid's default is 2, as is `--replicas`'), so a cluster that never set a rule
loads as before. When the rules cannot be read the last rules read stay in force.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import orjson

from strata.storage.retention_rules import (
    DEFAULT_RULES_KEY,
    DEFAULT_TIER,
    Placement,
    RetentionRule,
    placement,
    rules_in_force,
    time_dependent,
)
from timeline import DataSegment

log = logging.getLogger(__name__)

RulesSource = Callable[[], Mapping[str, Sequence[Mapping[str, Any]]]]
PERIOD_RECHECK_S = 60.0  # period rules move with the clock: placements are recomputed this often


class RuleView:
    def __init__(self, read: RulesSource | None, default_replicas: int) -> None:
        self._read = read
        self._default = [{"type": "loadForever", "tieredReplicants": {DEFAULT_TIER: default_replicas}}]
        self.current: dict[str, Sequence[Mapping[str, Any]]] = {}
        self._parsed: dict[str, list[RetentionRule]] = {}
        self._text = b"{}"

    async def refresh(self) -> None:
        if self._read is None:
            return
        try:
            current = dict(await asyncio.to_thread(self._read))
        except Exception as e:  # the store away: the last rules read stay in force
            log.warning("cannot read the retention rules (%s); keeping the last ones read", e)
            return
        text = orjson.dumps(current, option=orjson.OPT_SORT_KEYS)
        if text != self._text:
            self.current, self._text, self._parsed = current, text, {}

    def _rules(self, data_source: str) -> list[RetentionRule]:
        rules = self._parsed.get(data_source)
        if rules is None:
            current = dict(self.current)
            current.setdefault(DEFAULT_RULES_KEY, self._default)
            rules = self._parsed[data_source] = rules_in_force(current, data_source)
        return rules

    def key(self) -> tuple[bytes, int]:
        """Changes whenever placements may: the rules change, or a period rule's window moved."""
        moving = any(time_dependent(self._rules(ds)) for ds in {*self.current, DEFAULT_RULES_KEY})
        return self._text, int(time.time() // PERIOD_RECHECK_S) if moving else 0

    def placements(self, segments: Iterable[DataSegment], now_ms: int | None = None) -> dict[str, Placement]:
        """Segment id -> where its rules send it; segments of one data source and interval share
        their rules' answer, so it is worked out once."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        out: dict[str, Placement] = {}
        seen: dict[tuple[str, Any], Placement] = {}
        for s in segments:
            key = (s.data_source, s.interval)
            found = seen.get(key)
            if found is None:
                found = seen[key] = placement(self._rules(s.data_source), s.interval, now)
            out[s.id] = found
        return out
