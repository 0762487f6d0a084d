"""One task's own process: `python -m strata.coordinator.task_process --task-id ID --attempt N ...`.

The coordinator starts one per running task, in a session of its own (a shutdown stops exactly its
process group: this process and, on Spark, its JVM), tied to the coordinator's life, logging into
the task's log file. The metadata store comes from `STRATA_METADATA`, never the command line (a
URL may hold a password).

It runs the task's type (task_types.KINDS), then writes the final status and report itself, in one
transaction checked against its attempt: a process the coordinator shut down or gave up on writes
nothing. Exit codes: 0 SUCCESS written, 1 FAILED written, 3 nothing written (stopped, superseded).
SIGTERM (a shutdown, or the coordinator's death) interrupts the task where it is; everything it
staged or pushed is removed by the ingestion's own clean-up, and nothing is published.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from strata.coordinator.task_context import (
    TaskContext,
    TaskFailed,
    TaskRun,
    coordinator_alive,
    parent_from_env,
)
from strata.coordinator.task_status import task_status
from strata.storage.task_store import Fenced, TaskStore

log = logging.getLogger("strata.task")

SUCCESS_EXIT, FAILED_EXIT, FENCED_EXIT = 0, 1, 3


def _runner(dotted: str) -> TaskRun:
    module, _, name = dotted.partition(":")
    run: TaskRun = getattr(importlib.import_module(module), name)
    return run


def watch_parent() -> None:
    """SIGTERM this process when the coordinator that started it is gone (`STRATA_PARENT_PID` no
    longer its parent): the parent-death signal's stand-in where setpriv is missing."""
    parent = parent_from_env()
    if parent is None:
        return

    def watch() -> None:
        while coordinator_alive(parent):
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="strata.coordinator.task_process")
    p.add_argument("--task-id", required=True)
    p.add_argument("--attempt", type=int, required=True)
    p.add_argument("--deep-storage", required=True)
    p.add_argument("--s3-endpoint")
    p.add_argument("--s3-region")
    p.add_argument("--engine", default="local", choices=["local", "spark", "auto"])
    p.add_argument("--spark-master")
    p.add_argument("--spark-conf", action="append", default=[])
    return p


def run_task(ctx: TaskContext) -> int:
    """Run the task and record how it ended; the process's exit code."""
    from strata.coordinator import task_registry  # noqa: F401  (registers the task types)
    from strata.coordinator.task_types import kind_of

    began = time.monotonic()
    report: dict[str, Any] | None
    try:
        report = _runner(kind_of(ctx.row.type).runner)(ctx)
        state, error = "SUCCESS", None
        log.info("task %s succeeded", ctx.task_id)
    except Fenced as e:
        log.warning("stopped without writing anything: %s", e)
        return FENCED_EXIT
    except TaskFailed as e:
        state, error, report = "FAILED", str(e), e.report
        log.error("task %s failed: %s", ctx.task_id, e)
    except Exception as e:  # the task failed; say why in its status, never leave it running
        state, error, report = "FAILED", f"{type(e).__name__}: {e}", None
        log.exception("task %s failed", ctx.task_id)
    duration = int((time.monotonic() - began) * 1000)
    done = ctx.tasks.finish(ctx.task_id, task_status(ctx.task_id, state, duration, error), report,
                            attempt=ctx.attempt)  # fmt: skip
    if done is None:
        log.warning("task %s was shut down or restarted meanwhile: its status stays as recorded", ctx.task_id)
        return FENCED_EXIT
    return SUCCESS_EXIT if state == "SUCCESS" else FAILED_EXIT


def main(argv: Sequence[str] | None = None) -> int:
    from strata.ingestion.cli import spark_conf
    from strata.server.lifecycle import Shutdown, raise_on_signals
    from strata.storage import open_metadata_store

    args = _parser().parse_args(argv)
    logging.basicConfig(  # the servers' format: the task's log reads like theirs
        level=os.environ.get("STRATA_LOG_LEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    metadata = os.environ.get("STRATA_METADATA")
    if not metadata:
        log.error("STRATA_METADATA is not set: no metadata store to run the task against")
        return FENCED_EXIT
    try:
        with raise_on_signals():
            watch_parent()
            store = open_metadata_store(metadata)
            try:
                tasks = TaskStore(store)
                row = tasks.get(args.task_id)
                # the coordinator bumps the attempt before it starts a process: an older one stops here
                if row is None or not row.active or row.attempt != args.attempt:
                    log.warning("task %s attempt %d is not current: done", args.task_id, args.attempt)
                    return FENCED_EXIT
                log.info("task %s (%s) attempt %d: pid %d", row.id, row.type, args.attempt, os.getpid())
                ctx = TaskContext(
                    row, args.attempt, store, tasks, args.deep_storage, args.s3_endpoint, args.s3_region,
                    args.engine, args.spark_master, spark_conf(args.spark_conf),
                )  # fmt: skip
                return run_task(ctx)
            finally:
                store.close()
    except Shutdown as e:
        log.warning("task %s stopped by %s: nothing published", args.task_id, e)
        return FENCED_EXIT


if __name__ == "__main__":
    sys.exit(main())
