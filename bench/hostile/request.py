"""One hostile request: what a client could send, and what Druid's rules let it be answered with."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field
from typing import Any

SQL_PATH = "/druid/v2/sql"
NATIVE_PATH = "/druid/v2/"
_SHORT = reprlib.Repr()  # Python 3.11's takes no keywords
_SHORT.maxstring, _SHORT.maxother, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxlevel = 200, 200, 8, 12, 5
DEADLINE_MS = 30_000  # the `timeout` context hostile statements carry: answered by then, or a 504


@dataclass
class Hostile:
    """One request: its category, httpx.post's keyword arguments, the statuses it may get, and the
    deadline it carries (None: none in the body, e.g. garbage bytes)."""

    category: str
    kwargs: dict[str, Any]
    statuses: tuple[int, ...] = (400,)
    note: str = field(default="")
    path: str = SQL_PATH
    deadline_s: float | None = None

    def __str__(self) -> str:
        """Short, without serialising a 10 MB body to show its first 200 characters."""
        return f"{self.category}: {self.path} {_SHORT.repr(self.kwargs)}"


def sql(category: str, statement: str, statuses: tuple[int, ...] = (400,), **context: Any) -> Hostile:
    """A SQL statement carrying the hostile deadline in its context."""
    body = {"query": statement, "context": {"timeout": DEADLINE_MS, **context}}
    return Hostile(category, {"json": body}, statuses, deadline_s=DEADLINE_MS / 1000)


def native(category: str, query: dict[str, Any], statuses: tuple[int, ...] = (400,)) -> Hostile:
    """A native query carrying the hostile deadline in its context (unless it sets its own)."""
    context = query.get("context")
    if isinstance(context, dict) and "timeout" not in context:
        query = {**query, "context": {**context, "timeout": DEADLINE_MS}}
    elif context is None:
        query = {**query, "context": {"timeout": DEADLINE_MS}}
    deadline = DEADLINE_MS / 1000 if isinstance(query.get("context"), dict) else None
    return Hostile(category, {"json": query}, statuses, path=NATIVE_PATH, deadline_s=deadline)
