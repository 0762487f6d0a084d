"""Task types the coordinator accepts, and what it must know of a task before running it.

Each type is a `TaskKind`: a pure `plan` of a submitted payload (which data source it writes, on
which intervals, with which lock type; a bad payload raises `InvalidTask`, a 400) and the dotted
name of the function its own process runs. `register` adds a type: `index_parallel`, `index` and
`kill` are registered in `strata.coordinator.task_registry`; `compact` plugs in the same way.

Task ids, group ids and lock settings follow Druid: an id, when not given, is
`<type>_<dataSource>_<8 random letters>[_<start>_<end>]_<created>`; the context's `priority`,
`taskLockType`, `useConcurrentLocks` and `useSharedLock` mean what they mean there; `taskLockTimeout`
bounds how long a task waits for its locks (without it, as long as their holders run).
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from strata.coordinator.locks import LOCK_TYPES, LockRequest
from timeline import ETERNITY, Interval, format_instant


class InvalidTask(ValueError):
    """A submitted task Strata cannot run (Druid answers 400)."""


@dataclass(frozen=True)
class TaskPlan:
    data_source: str
    intervals: tuple[Interval, ...] | None  # None: the data source's whole timeline
    replaces: bool  # overwrites what it covers (REPLACE under concurrent locks), or appends
    id_interval: Interval | None = None  # shown in a generated id, as Druid's kill ids show theirs
    reads: tuple[str, ...] = ()  # data sources it reads (a SQL task): READ on each to submit it
    external: tuple[str, ...] = ()  # input source types it reads (EXTERN): READ on EXTERNAL to submit it


@dataclass(frozen=True)
class TaskKind:
    name: str
    plan: Callable[[Mapping[str, Any]], TaskPlan]
    runner: str  # "module:function" the task's process calls with its `TaskContext`
    default_priority: int
    id_prefix: str = ""


@dataclass(frozen=True)
class Submission:
    """An accepted task: its payload as stored (id, groupId, dataSource filled in) and its locks."""

    id: str
    type: str
    group_id: str
    data_source: str
    payload: dict[str, Any]
    lock: LockRequest
    lock_timeout_ms: int | None  # fail when the locks are not granted this soon; None: wait
    reads: tuple[str, ...] = ()
    external: tuple[str, ...] = ()


KINDS: dict[str, TaskKind] = {}


def register(kind: TaskKind) -> None:
    KINDS[kind.name] = kind


def kind_of(type_name: str) -> TaskKind:
    kind = KINDS.get(type_name)
    if kind is None:
        known = ", ".join(sorted(KINDS))
        raise InvalidTask(f"task type [{type_name}] is not supported (supported: {known})")
    return kind


def check_id(task_id: str, what: str = "id") -> str:
    """Druid's rules for ids (IdUtils.validateId): not empty, no '/', not starting with '.', no
    whitespace but plain spaces. The id also names the task's log file."""
    if not isinstance(task_id, str) or not task_id:
        raise InvalidTask(f"Invalid value for field [{what}]: must not be null or empty")
    if "/" in task_id or task_id.startswith(".") or any(c.isspace() and c != " " for c in task_id):
        raise InvalidTask(f"Invalid value for field [{what}]: [{task_id}] cannot contain '/', start with '.' "
                          "or contain whitespace other than spaces")  # fmt: skip
    if len(task_id) > 255:
        raise InvalidTask(f"Invalid value for field [{what}]: longer than 255 characters")
    return task_id


def _random_letters() -> str:
    return "".join(random.choices(string.ascii_lowercase, k=8))


def new_task_id(kind: TaskKind, plan: TaskPlan, now_ms: int, letters: str | None = None) -> str:
    parts = [kind.id_prefix, kind.name, plan.data_source, letters or _random_letters()]
    if plan.id_interval is not None:
        parts += [format_instant(plan.id_interval.start), format_instant(plan.id_interval.end)]
    return "_".join(p for p in [*parts, format_instant(now_ms)] if p)


def _int(value: Any, what: str, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTask(f"context.{what} must be an integer, got {value!r}")
    return value


def _flag(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.lower() == "true")


def lock_type(context: Mapping[str, Any], plan: TaskPlan) -> str:
    """Druid's choice: `taskLockType` when given; `useConcurrentLocks` gives REPLACE or APPEND;
    `useSharedLock` gives SHARED to an append; otherwise EXCLUSIVE."""
    given = context.get("taskLockType")
    if given is not None:
        text = str(given).upper()
        if text not in LOCK_TYPES:
            raise InvalidTask(f"context.taskLockType [{given}] must be one of {', '.join(LOCK_TYPES)}")
        return text
    if _flag(context.get("useConcurrentLocks")):
        return "REPLACE" if plan.replaces else "APPEND"
    if _flag(context.get("useSharedLock")) and not plan.replaces:
        return "SHARED"
    return "EXCLUSIVE"


def accept(body: Any, now_ms: int, letters: str | None = None) -> Submission:
    """A submitted task JSON -> `Submission`; `InvalidTask` when it cannot run."""
    if not isinstance(body, dict):
        raise InvalidTask("a task must be a JSON object")
    type_name = body.get("type")
    if not isinstance(type_name, str):
        raise InvalidTask("Missing type id when trying to resolve subtype of task: the task needs a 'type'")
    kind = kind_of(type_name)
    plan = kind.plan(body)
    context = body.get("context")
    context = {} if context is None else context
    if not isinstance(context, dict):
        raise InvalidTask("context must be a JSON object")
    task_id = check_id(body["id"]) if body.get("id") is not None else new_task_id(kind, plan, now_ms, letters)
    group_id = check_id(body["groupId"], "groupId") if body.get("groupId") is not None else task_id
    lock = LockRequest(
        data_source=plan.data_source,
        intervals=plan.intervals if plan.intervals is not None else (ETERNITY,),
        lock_type=lock_type(context, plan),
        group_id=group_id,
        priority=_int(context.get("priority"), "priority", kind.default_priority),
    )
    # Druid's queue keeps a task whose locks are taken waiting until they are released (locks are
    # asked all at once, so no two tasks wait for each other); `taskLockTimeout` bounds the wait
    given = context.get("taskLockTimeout")
    timeout = None if given is None else _int(given, "taskLockTimeout", 0)
    payload = {**body, "id": task_id, "groupId": group_id, "dataSource": plan.data_source, "context": context}
    return Submission(task_id, type_name, group_id, plan.data_source, payload, lock, timeout, plan.reads,
                      plan.external)  # fmt: skip
