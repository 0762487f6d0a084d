"""The overlord's queue: tasks wait for their interval locks, then for a task slot, then run in a
process of their own; everything a restart needs is in the metadata store.

One pass (`_tick`, on the event loop; store work in worker threads) reaps exited processes, grants
locks to waiting tasks (highest priority first, then oldest), starts pending tasks while slots are
free, and escalates shutdowns whose grace ran out. Each start takes a new attempt number before
the process starts, so whatever an earlier attempt's process might still do is fenced off (see
strata.storage.task_store).

At start-up, a task found running was cut off by the previous coordinator: its process is stopped
if it survived; a task that had published is completed as a success, any other starts again as a
new attempt (at most `task_restarts` times, then it fails saying why). Publishing is one guarded
transaction, so a task publishes at most once whatever the restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from dataclasses import dataclass
from typing import Any

from strata.coordinator import task_registry  # noqa: F401  (registers the task types)
from strata.coordinator.locks import LockRequest, conflicting
from strata.coordinator.metrics import TaskMetrics
from strata.coordinator.task_logs import TaskLogs
from strata.coordinator.task_processes import ProcessLauncher, TaskProcess, kill_orphan
from strata.coordinator.task_status import elapsed_ms, status_plus, task_status
from strata.coordinator.task_types import Submission, accept
from strata.storage.task_store import LockRow, TaskRow, TaskStore, now_iso
from timeline import format_instant

log = logging.getLogger("strata.coordinator")

TICK_S = 0.5
SHUTDOWN_MESSAGE = "Shutdown request from user"  # Druid's errorMsg for a task shut down over the API
STOPPING_NOTE = (
    "the coordinator is stopping: this attempt is interrupted (nothing published); the task starts "
    "again when a coordinator starts"
)


@dataclass(frozen=True)
class Waiting:
    request: LockRequest
    timeout_ms: int | None
    since: float  # monotonic


def _now_ms() -> int:
    return int(time.time() * 1000)


def _order(row: TaskRow, request: LockRequest) -> tuple[int, str, str]:
    return (-request.priority, row.created_date, row.id)


class TaskQueue:
    def __init__(self, tasks: TaskStore, launcher: ProcessLauncher, logs: TaskLogs, location: dict[str, Any]):
        self.tasks = tasks
        self.launcher = launcher
        self.logs = logs
        self.location = location
        self.children: dict[str, TaskProcess] = {}
        self.metrics = TaskMetrics()
        self._known_active: set[str] | None = None  # the previous pass's active tasks
        self._waiting: dict[str, Waiting] = {}
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: asyncio.Task[None] | None = None

    @property
    def slots(self) -> int:
        return self.launcher.settings.task_slots

    # -- life ------------------------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        await asyncio.to_thread(self.recover)
        self._runner = self._loop.create_task(self._run(), name="task-queue")

    async def stop(self) -> None:
        """Stop the passes and the running tasks' processes; their rows stay running, so the next
        coordinator starts them again (a new attempt)."""
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        for child in self.children.values():
            self.logs.note(child.task_id, STOPPING_NOTE)
            self.launcher.signal_group(child, signal.SIGTERM)
        deadline = time.monotonic() + self.launcher.settings.stop_grace_s
        while any(c.proc.poll() is None for c in self.children.values()) and time.monotonic() < deadline:  # noqa: ASYNC110 - a child's exit is no event to await
            await asyncio.sleep(0.1)
        for child in self.children.values():
            self.launcher.signal_group(child, signal.SIGKILL)

    def wake(self) -> None:
        """Run a pass soon; callable from any thread."""
        if self._loop is not None and self._wake is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), TICK_S)
            self._wake.clear()
            try:
                await self._tick()
            except Exception as e:  # the store away, say: keep the processes, try again next pass
                log.warning("task queue pass failed (%s: %s); trying again", type(e).__name__, e)

    async def _tick(self) -> None:
        for child in [c for c in self.children.values() if c.proc.poll() is not None]:
            del self.children[child.task_id]
            await asyncio.to_thread(self._reaped, child)
        grace = self.launcher.settings.stop_grace_s
        for child in self.children.values():
            if child.stopping_since is not None and time.monotonic() - child.stopping_since > grace:
                self.launcher.signal_group(child, signal.SIGKILL)
        for row in await asyncio.to_thread(self._schedule, self.slots - len(self.children)):
            await self._spawn(row)

    # -- the API's side ----------------------------------------------------------------------------
    def submit(self, submission: Submission) -> None:
        """Store an accepted task (`TaskExists` when its id is taken); blocking."""
        status = task_status(submission.id, "RUNNING")
        self.tasks.insert(TaskRow(
            id=submission.id, created_date=now_iso(), datasource=submission.data_source, type=submission.type,
            group_id=submission.group_id, payload=submission.payload, status=status,
        ))  # fmt: skip
        iv = ", ".join(str(i) for i in submission.lock.intervals)
        self.logs.note(submission.id, f"submitted: {submission.type} of {submission.data_source}; asks for "
                                      f"{submission.lock.lock_type} locks on {iv}")  # fmt: skip
        self.wake()

    async def shutdown(self, task_id: str) -> bool:
        """Fail the task (unless it published already) and stop its process; False when unknown."""
        row = await asyncio.to_thread(self.tasks.get, task_id)
        if row is None:
            return False
        status = task_status(task_id, "FAILED", elapsed_ms(row.started_date or row.created_date, _now_ms()),
                             SHUTDOWN_MESSAGE)  # fmt: skip
        done = await asyncio.to_thread(self.tasks.finish, task_id, status, unless_published=True, fence=True)
        if done is not None:
            self.logs.note(task_id, "shut down by request: nothing of it is published")
            child = self.children.get(task_id)
            if child is not None:
                child.stopping_since = time.monotonic()
                self.launcher.signal_group(child, signal.SIGTERM)
            self.wake()
        return True

    def status_of(self, row: TaskRow) -> dict[str, Any]:
        return status_plus(row, self.location)

    # -- passes (worker threads) -------------------------------------------------------------------
    def _request(self, row: TaskRow) -> Waiting:
        known = self._waiting.get(row.id)
        if known is None:
            sub = accept(row.payload, _now_ms())
            known = self._waiting[row.id] = Waiting(sub.lock, sub.lock_timeout_ms, time.monotonic())
        return known

    def _schedule(self, free_slots: int) -> list[TaskRow]:
        """Grant locks to waiting tasks; mark as many pending tasks running as slots are free (each
        with a new attempt); returns those to start."""
        active = self.tasks.tasks(active=True)
        self._count(active)
        self._release_leaked_locks({r.id for r in active})
        ordered = sorted(active, key=lambda r: _order(r, self._request(r).request))
        for row in ordered:
            if row.runner_state == "WAITING":
                self._try_lock(row)
        starts: list[TaskRow] = []
        for row in self.tasks.tasks(active=True):
            if row.runner_state == "PENDING" and row.id not in self.children:
                starts.append(row)
        starts.sort(key=lambda r: _order(r, self._request(r).request))
        began: list[TaskRow] = []
        for row in starts[: max(0, free_slots)]:
            changed = self.tasks.update(row.id, row.attempt, runner_state="RUNNING", attempt=row.attempt + 1,
                                        pid=None, started_date=now_iso())  # fmt: skip
            if changed is not None:
                began.append(changed)
        active_ids = {r.id for r in active}
        self._waiting = {k: v for k, v in self._waiting.items() if k in active_ids}
        return began

    def _count(self, active: list[TaskRow]) -> None:
        """Metrics: the tasks that completed since the previous pass, and the active ones now."""
        now = {r.id for r in active}
        for task_id in (self._known_active or set()) - now:
            row = self.tasks.get(task_id)
            if row is not None and not row.active:
                self.metrics.completed(row)
        self._known_active = now
        self.metrics.active(active)

    def _try_lock(self, row: TaskRow) -> None:
        waiting = self._request(row)
        request = waiting.request
        blockers: list[str] = []

        def decide(held: list[LockRow]) -> list[dict[str, Any]] | None:
            blockers[:] = sorted({h.task_id for h in held if conflicting(request, [h.payload])})
            return None if blockers else request.payloads(format_instant(_now_ms()))

        if self.tasks.grant(row.id, request.data_source, decide) is not None:
            self.tasks.update(row.id, row.attempt, runner_state="PENDING")
            self.logs.note(row.id, "locks granted; waiting for a task slot")
            return
        waited_ms = (time.monotonic() - waiting.since) * 1000
        if waiting.timeout_ms is not None and waited_ms >= waiting.timeout_ms:
            iv = ", ".join(str(i) for i in request.intervals)
            message = (
                f"Timed out waiting for {request.lock_type} locks on [{iv}] of [{request.data_source}] after "
                f"taskLockTimeout {waiting.timeout_ms} ms; held by task(s) {blockers}"
            )
            if self.tasks.finish(row.id, task_status(row.id, "FAILED", int(waited_ms), message)) is not None:
                self.logs.note(row.id, message)

    def _release_leaked_locks(self, active: set[str]) -> None:
        """Locks of tasks no longer active (left by hand edits of the tables): released, not waited on."""
        for task_id in {lock.task_id for lock in self.tasks.locks()} - active:
            log.warning("releasing locks of task %s, which is not active", task_id)
            self.tasks.release(task_id)

    async def _spawn(self, row: TaskRow) -> None:
        """Start the task's process (on the loop's thread: see task_processes) and record its pid."""
        try:
            child = self.launcher.start(row.id, row.attempt)
        except OSError as e:
            message = f"could not start the task's process: {e}"
            await asyncio.to_thread(self.tasks.finish, row.id, task_status(row.id, "FAILED", 0, message),
                                    attempt=row.attempt)  # fmt: skip
            self.logs.note(row.id, message)
            return
        self.children[row.id] = child
        self.logs.note(row.id, f"attempt {row.attempt} started: pid {child.pid}")
        recorded = await asyncio.to_thread(self.tasks.update, row.id, row.attempt, pid=child.pid)
        if recorded is None:  # shut down between the pass and the start
            child.stopping_since = time.monotonic()
            self.launcher.signal_group(child, signal.SIGTERM)

    def _reaped(self, child: TaskProcess) -> None:
        """A task's process exited: if it did not record how the task ended, say so here."""
        code = child.proc.returncode
        row = self.tasks.get(child.task_id)
        if row is None or not row.active or row.attempt != child.attempt:
            return  # it recorded its end, or it was shut down / superseded
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        duration = elapsed_ms(row.started_date, _now_ms())
        if row.published:
            message = f"the task's process {how} after publishing its segments, before it recorded its report"
            status = task_status(row.id, "SUCCESS", duration)
        else:
            message = f"The task's process {how} before it finished; nothing was published (see the task log)"
            status = task_status(row.id, "FAILED", duration, message)
        if self.tasks.finish(row.id, status, attempt=child.attempt) is not None:
            self.logs.note(row.id, message)

    def recover(self) -> None:
        """Tasks the previous coordinator was running (see the module docstring)."""
        restarts = self.launcher.settings.task_restarts
        for row in self.tasks.tasks(active=True):
            if row.runner_state != "RUNNING":
                continue
            kill_orphan(row.pid, row.id)
            duration = elapsed_ms(row.started_date, _now_ms())
            if row.published:
                self.tasks.finish(row.id, task_status(row.id, "SUCCESS", duration), attempt=row.attempt)
                self.logs.note(row.id, "the coordinator restarted after this task published: a success")
                continue
            if row.attempt > restarts:
                message = (
                    f"The coordinator restarted while this task ran (attempt {row.attempt}); nothing of it "
                    f"was published, and it is not started again (--task-restarts {restarts})"
                )
                if self.tasks.finish(row.id, task_status(row.id, "FAILED", duration, message), fence=True):
                    self.logs.note(row.id, message)
                continue
            if self.tasks.update(row.id, row.attempt, runner_state="PENDING", pid=None) is not None:
                note = f"the coordinator restarted while attempt {row.attempt} ran; nothing was published"
                self.logs.note(row.id, note + "; the task starts again as a new attempt")
