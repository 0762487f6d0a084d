"""INSERT and REPLACE from `strata sql`: posted to Druid's SQL task API and followed to their end.

The statement becomes a task on the coordinator (`POST /druid/v2/sql/task`); the client then polls
its status through the broker, as Druid's own clients do, and prints one row: the task, how it
ended, the rows it read and the segments it published (from its `multiStageQuery` report). With
`--no-wait` it prints the task id at once. Ctrl-C while waiting shuts the task down, which then
publishes nothing.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from strata.cli.sql_client import SqlClient

POLL_S = 0.5
COLUMNS = ["taskId", "state", "dataSource", "rows", "segments", "durationMs", "errorMsg"]


class Session(Protocol):
    """What following a task takes of `strata sql`'s session (`strata.cli.sql_cli.Session`)."""

    @property
    def client(self) -> SqlClient: ...
    @property
    def context(self) -> dict[str, Any]: ...
    @property
    def wait(self) -> bool: ...
    @property
    def fmt(self) -> str: ...
    @property
    def header(self) -> bool: ...
    @property
    def out(self) -> TextIO: ...
    @property
    def err(self) -> TextIO: ...


def is_task_statement(sql: str) -> bool:
    """INSERT or REPLACE, without EXPLAIN (an EXPLAIN is answered as rows)."""
    from strata.query.errors import QueryError
    from strata.sql.ingest.clauses import EXPLAIN, ingest_operation

    try:
        return not EXPLAIN.match(sql) and ingest_operation(sql) is not None
    except QueryError:  # a statement that does not even tokenize: the SQL API says why
        return False


def run_task(session: Session, sql: str) -> bool:
    from strata.cli.sql_client import SqlError
    from strata.cli.sql_output import write_rows

    client = session.client
    try:
        task_id = client.submit_task(sql, session.context)
    except SqlError as exc:
        session.err.write(f"Error: {exc}\n")
        return False
    if not session.wait:
        write_rows(session.out, session.fmt, COLUMNS[:2], [[task_id, "RUNNING"]], header=session.header)
        session.out.flush()
        return True
    if session.fmt == "table":
        session.err.write(f"Task {task_id} submitted; waiting for it (Ctrl-C shuts it down).\n")
    try:
        status = _wait(session, task_id)
    except KeyboardInterrupt:
        client.shutdown_task(task_id)
        session.err.write(f"\nTask {task_id} shut down: nothing of it is published.\n")
        raise
    except SqlError as exc:
        session.err.write(f"Error: {exc}\n")
        return False
    counters = _counters(client.task_report(task_id))
    row = [
        task_id,
        status["statusCode"],
        status.get("dataSource"),
        counters.get("rows"),
        counters.get("segments"),
        status.get("duration"),
        status.get("errorMsg"),
    ]
    write_rows(session.out, session.fmt, COLUMNS, [row], header=session.header)
    session.out.flush()
    if status["statusCode"] != "SUCCESS":
        session.err.write(f"Error: task {task_id} failed: {status.get('errorMsg')}\n")
        return False
    return True


def _wait(session: Session, task_id: str) -> dict[str, Any]:
    last = None
    while True:
        status = session.client.task_status(task_id)
        state = status["runnerStatusCode"] if status["statusCode"] == "RUNNING" else status["statusCode"]
        if session.fmt == "table" and state != last:
            session.err.write(f"  {state}\n")
            last = state
        if status["statusCode"] != "RUNNING":
            return status
        time.sleep(POLL_S)


def _counters(report: dict[str, Any] | None) -> dict[str, Any]:
    """Rows read and segments published, from a `multiStageQuery` report."""
    try:
        counters = (report or {})["multiStageQuery"]["payload"]["counters"]
        return {"rows": counters["0"]["0"]["input0"]["rows"][0],
                "segments": counters["1"]["0"]["segments"]["published"]}  # fmt: skip
    except (KeyError, IndexError, TypeError):
        return {}
