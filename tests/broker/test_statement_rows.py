"""A SQL statement's native answers made into rows (broker_service.sql_execution): a large one on a
worker thread, so its Python work does not hold the event loop against every other query; a small
one on the loop (a thread hop would cost more); the same rows either way, counted against the
statement's subquery allowance as before. A low-priority statement's rows are made at nice 10."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from broker_service import sql_execution
from broker_service.query_runner import QueryResult
from broker_service.sql_execution import ROWS_ON_LOOP_BYTES, StatementExecution
from broker_service.sql_statements import RunningStatement
from strata.query.errors import ResourceLimitExceeded
from strata.server.thread_priority import LOW_NICE
from strata.sql import encode_rows
from strata.sql.plan import Output, SqlPlan
from strata.sql.stage_tables import stage_table
from strata.sql.subquery_limits import SubqueryLimits

SCAN = {"queryType": "scan", "dataSource": "wiki", "intervals": ["2015-09-12/2015-09-13"],
        "columns": ["page", "added"], "resultFormat": "compactedList"}  # fmt: skip


def answer(rows: int) -> list[dict[str, Any]]:
    return [{"segmentId": "s", "columns": ["page", "added"], "events": [[f"p{i}", i] for i in range(rows)]}]


class RecordingPlan(SqlPlan):
    """A scan plan that notes the thread it made its rows on."""

    threads: list[str]
    nice: list[int]
    collecting: list[bool]  # whether the cyclic collector ran while the rows were made

    def rows(self, native_results: list[Any]) -> list[list[Any]]:
        self.threads.append(threading.current_thread().name)
        self.nice.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        self.collecting.append(gc.isenabled())
        return super().rows(native_results)


def plan() -> RecordingPlan:
    made = RecordingPlan([Output("page", "page", "STRING"), Output("added", "added", "LONG")], native=SCAN)
    made.threads, made.nice, made.collecting = [], [], []
    return made


def execution(result: QueryResult) -> StatementExecution:
    async def run(query: Any, *, as_table: bool = False, sql: Any = None) -> QueryResult:
        return result

    broker = SimpleNamespace(runner=SimpleNamespace(run=run))
    return StatementExecution(broker, catalog=None)  # type: ignore[arg-type]


async def rows_of(
    result: QueryResult, *, subquery: bool, max_bytes: int = 1 << 30, priority: int = 0
) -> tuple[list[Any], RecordingPlan]:
    statement = RunningStatement("q", 60_000, SubqueryLimits(100_000, max_bytes, max_bytes), lambda: None)
    statement.priority = priority
    made = plan()
    return await execution(result).native_rows(made, statement, subquery=subquery), made


@pytest.mark.parametrize(
    "decoded", [True, False]
)  # merged in a thread (results) or a worker process (JSON only)
def test_a_large_answer_is_made_into_rows_off_the_loop_and_a_small_one_on_it(decoded: bool) -> None:
    async def main() -> None:
        for size in (10, 8_000):
            results = answer(size)
            body = orjson.dumps(results)
            rows, made = await rows_of(QueryResult(results if decoded else None, body=body), subquery=True)
            assert rows == [[f"p{i}", i] for i in range(size)]
            on_loop = len(body) <= ROWS_ON_LOOP_BYTES
            assert on_loop == (size == 10)
            assert (made.threads == [threading.current_thread().name]) == on_loop, made.threads

    asyncio.run(asyncio.wait_for(main(), timeout=30))


def test_a_subquerys_answer_is_counted_in_bytes_before_it_is_decoded() -> None:
    async def main() -> None:
        body = orjson.dumps(answer(8_000))
        with pytest.raises(ResourceLimitExceeded):
            await rows_of(QueryResult(None, body=body), subquery=True, max_bytes=len(body) - 1)
        rows, made = await rows_of(QueryResult(None, body=body), subquery=False, max_bytes=len(body) - 1)
        assert len(rows) == 8_000  # the statement's own answer is not a subquery's
        assert not made.threads or made.threads != [threading.current_thread().name]

    asyncio.run(asyncio.wait_for(main(), timeout=30))


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")
def test_a_low_priority_statements_large_answer_is_made_into_rows_at_nice_10() -> None:
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert own < LOW_NICE

    async def main() -> None:
        body = orjson.dumps(answer(8_000))
        rows, low = await rows_of(QueryResult(None, body=body), subquery=True, priority=-1)
        assert len(rows) == 8_000 and low.nice == [LOW_NICE], low.nice
        assert low.threads[0].startswith("low-priority")
        rows, normal = await rows_of(QueryResult(None, body=body), subquery=True, priority=0)
        assert len(rows) == 8_000 and normal.nice == [own]
        assert not normal.threads[0].startswith("low-priority")

    asyncio.run(asyncio.wait_for(main(), timeout=30))


def test_rows_are_made_and_encoded_with_the_collector_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Millions of parsed objects and rows, none in a cycle: collections would walk them all again
    and again. The collector runs again afterwards."""
    assert gc.isenabled()

    async def main() -> None:
        for decoded in (True, False):
            results = answer(8_000)
            result = QueryResult(results if decoded else None, body=orjson.dumps(results))
            rows, made = await rows_of(result, subquery=False)
            assert len(rows) == 8_000 and made.collecting == [False]
            assert gc.isenabled()

    asyncio.run(asyncio.wait_for(main(), timeout=30))
    collecting: list[bool] = []

    def encode(*args: Any, **kwargs: Any) -> tuple[bytes, str]:
        collecting.append(gc.isenabled())
        return encode_rows(*args, **kwargs)

    monkeypatch.setattr(sql_execution, "encode_rows", encode)
    rows: list[list[Any]] = [["a", [1, 2]], [None, None]]
    columns = (["page", "nums"], ["STRING", "ARRAY<LONG>"], ["VARCHAR", "ARRAY"])
    body = sql_execution._encoded_whole(rows, *columns, fmt="array")
    assert body == encode_rows(rows, *columns, fmt="array")
    assert orjson.loads(body[0]) == [["a", "[1,2]"], [None, None]]  # Druid's stringified arrays
    assert collecting == [False] and gc.isenabled()


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")
def test_a_scan_stage_reaches_the_engine_as_arrow_made_at_the_statements_priority(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A stage the broker's engine reads asks the runner for the merged partials (never JSON), makes
    its table on the statement's threads (nice 10 for a low-priority one), and counts its rows and
    bytes; a stage whose columns the JSON path would change gets that path's rows."""
    import pyarrow as pa

    merged = pa.table({"__segment": pa.array(["s"] * 3), "page": pa.array(["a", None, "c"]),
                       "added": pa.array([1, 2, None], pa.int64())})  # fmt: skip
    asked: list[bool] = []
    made_on: list[int] = []

    def recording(plan: SqlPlan, answer: pa.Table) -> pa.Table | None:
        made_on.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return stage_table(plan, answer)

    monkeypatch.setattr("broker_service.sql_execution.stage_table", recording)

    async def run(query: Any, *, as_table: bool = False, sql: Any = None) -> QueryResult:
        asked.append(as_table)
        return QueryResult(None, table=table)

    async def main(priority: int, max_bytes: int = 1 << 30) -> tuple[Any, RunningStatement]:
        statement = RunningStatement("q", 60_000, SubqueryLimits(100_000, max_bytes, max_bytes), lambda: None)
        statement.priority = priority
        staged = plan()
        staged.raw_times = True
        execution = StatementExecution(SimpleNamespace(runner=SimpleNamespace(run=run)), catalog=None)  # type: ignore[arg-type]
        return await execution.stage_input(staged, statement), statement

    table = merged
    got, statement = asyncio.run(asyncio.wait_for(main(-1), timeout=30))
    assert isinstance(got, pa.Table) and asked == [True] and made_on == [LOW_NICE]
    assert got.to_pylist() == [
        {"page": "a", "added": 1},
        {"page": None, "added": 2},
        {"page": "c", "added": None},
    ]
    assert statement.limits.rows == 3 and statement.limits.bytes == got.nbytes
    with pytest.raises(ResourceLimitExceeded):
        asyncio.run(asyncio.wait_for(main(-1, max_bytes=got.nbytes - 1), timeout=30))
    table = merged.set_column(2, "added", pa.array([1.5, 2.0, None]))  # a LONG column stored as doubles
    got, _ = asyncio.run(asyncio.wait_for(main(0), timeout=30))
    assert got == [["a", 1.5], [None, 2.0], ["c", None]]  # the JSON path's rows, as before
