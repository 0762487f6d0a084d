"""Druid's query laning: which lane a query runs in, and how many queries each lane may run at once.

Lanes reserve the broker's query capacity for some workloads: a lane's cap leaves the rest of the
total to everything else, so a flood of heavy queries in a capped lane cannot take every slot from
interactive ones. The strategies are Druid's (`druid.query.scheduler.laning.strategy`):

- `none`: no lanes; only the total capacity applies.
- `hilo`: a query whose context `priority` is negative runs in lane `low`, capped at
  `maxLowPercent` of the total capacity (rounded up); the rest run with no lane.
- `manual`: a query runs in the lane its context `lane` names; each configured lane has a cap (a
  count, or a percent of the total). A lane nobody configured has no cap of its own.

Pure: the broker's admission control (broker_service.admission) enforces what this says.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from strata.query.errors import invalid

LOW = "low"
STRATEGIES = ("none", "hilo", "manual")
RESERVED_LANES = ("total", "default")  # Druid's names for the scheduler's own limits


class LaningConfigError(ValueError):
    """Laning flags that cannot make a working scheduler."""


@dataclass(frozen=True)
class Laning:
    strategy: str = "none"
    limits: Mapping[str, int] = field(default_factory=dict)  # lane -> most queries at once

    def lane_of(self, priority: int, lane: str | None) -> str | None:
        """The lane a query with this context `priority` and `lane` runs in (None: no lane)."""
        if self.strategy == "hilo" and priority < 0:
            return LOW
        return lane

    def cap(self, lane: str | None) -> int | None:
        return None if lane is None else self.limits.get(lane)


def hilo(total: int, max_low_percent: int) -> Laning:
    """Druid's `hilo`: lane `low` for negative priorities, at most `max_low_percent` of `total`."""
    if not 1 <= max_low_percent <= 100:
        raise LaningConfigError(f"the low lane's percent must be from 1 to 100, got {max_low_percent}")
    return Laning("hilo", {LOW: limit_from_percent(total, max_low_percent)})


def manual(total: int, lanes: Mapping[str, int], limits_are_percent: bool = False) -> Laning:
    """Druid's `manual`: each named lane with its cap (a count, or a percent of `total`)."""
    if not lanes:
        raise LaningConfigError("the manual laning strategy needs at least one lane (--lane NAME=LIMIT)")
    out: dict[str, int] = {}
    for name, limit in lanes.items():
        if name in RESERVED_LANES:
            raise LaningConfigError(f"a lane cannot be named '{name}'")
        if limits_are_percent and not 1 <= limit <= 100:
            raise LaningConfigError(f"lane '{name}': a percent limit must be from 1 to 100, got {limit}")
        if limit < 1:
            raise LaningConfigError(f"lane '{name}': the limit must be greater than 0, got {limit}")
        out[name] = limit_from_percent(total, limit) if limits_are_percent else limit
    return Laning("manual", out)


def limit_from_percent(total: int, percent: int) -> int:
    """Druid's rounding: a lane's share of the total, rounded up, so it is never zero."""
    return max(1, math.ceil(total * percent / 100))


def parse_lane_flag(text: str) -> tuple[str, int]:
    """`NAME=LIMIT` as given to `--lane`."""
    name, sep, limit = text.partition("=")
    if not sep or not name.strip():
        raise LaningConfigError(f"--lane takes NAME=LIMIT, got [{text}]")
    try:
        return name.strip(), int(limit)
    except ValueError:
        message = f"--lane {name.strip()}: the limit must be an integer, not [{limit}]"
        raise LaningConfigError(message) from None


def scheduling_keys(context: Mapping[str, Any] | None) -> tuple[int, str | None]:
    """A request context's `priority` (default 0) and `lane` (default none), checked as Druid checks
    them: a priority that is not an integer or a lane that is not a string is the user's 400."""
    if not context:
        return 0, None
    priority = context.get("priority", 0)
    if isinstance(priority, str):
        try:
            priority = int(priority.strip())
        except ValueError:
            raise invalid("Context parameter [priority] must be an integer, got [%s]", priority) from None
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
        raise invalid("Context parameter [priority] must be an integer, got [%s]", priority)
    lane = context.get("lane")
    if lane is not None and not isinstance(lane, str):
        raise invalid("Context parameter [lane] must be a string, got [%s]", lane)
    return priority, lane or None
