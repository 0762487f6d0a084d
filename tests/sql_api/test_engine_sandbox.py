"""The broker's relational engine on its own (issue 36): the DuckDB it opens refuses files,
extensions and settings whatever statement reaches it; its answers come out a batch at a time with
the values DuckDB's own rows had; its failures are Druid's errors; a slot goes back only once an
interrupted statement's thread has stopped; the subquery allowance and the timeout rules."""

from __future__ import annotations

import asyncio
import datetime
import gc
import os
import sys
import threading
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from broker_service.relational_engine import EngineSlot, EngineSlots, RelationalEngine
from strata.query.context import scatter_gather_bytes_within, timeout_within
from strata.query.duck import EngineLimits, MiB
from strata.query.errors import InvalidInput, QueryInterrupted, ResourceLimitExceeded
from strata.server.thread_priority import LOW_NICE
from strata.sql.sandbox import ResultBatches, engine_failure, open_database
from strata.sql.subquery_limits import SubqueryLimits

LIMITS = EngineLimits(query_memory=64 * MiB, engine_memory=128 * MiB, threads=1, external_access=False)


@pytest.fixture
def cursor() -> duckdb.DuckDBPyConnection:
    conn = open_database(LIMITS, "test")
    cur = conn.cursor()
    cur.register("t", pa.table({"x": list(range(10))}))
    return cur


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/hostname')",
        "SELECT * FROM '/etc/passwd'",
        "SELECT * FROM glob('/etc/*')",
        "COPY t TO '{tmp}/out.csv'",
        "COPY (SELECT 1) TO '{tmp}/out.parquet' (FORMAT parquet)",
        "ATTACH '{tmp}/other.db' AS other",
        "EXPORT DATABASE '{tmp}/export'",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SELECT * FROM read_parquet('https://example.com/x.parquet')",
        "SET memory_limit = '100GB'",
        "SET GLOBAL threads = 64",
        "RESET memory_limit",
        "PRAGMA memory_limit = '100GB'",
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "SET temp_directory = '/'",
        "CALL duckdb_secrets()",
    ],
)
def test_the_database_refuses_what_no_statement_should_reach(
    cursor: duckdb.DuckDBPyConnection, statement: str, tmp_path: Path
) -> None:
    with pytest.raises(duckdb.Error):
        cursor.execute(statement.format(tmp=tmp_path)).fetchall()
    assert list(tmp_path.iterdir()) == []
    assert cursor.execute("SELECT current_setting('memory_limit')").fetchone() == ("64.0 MiB",)


def test_a_statements_tables_are_its_own_cursors(cursor: duckdb.DuckDBPyConnection) -> None:
    assert cursor.execute("SELECT COUNT(*) FROM t").fetchone() == (10,)
    other = open_database(LIMITS, "other").cursor()
    with pytest.raises(duckdb.CatalogException):
        other.execute("SELECT COUNT(*) FROM t")


def test_batches_carry_the_values_duckdbs_rows_had(cursor: duckdb.DuckDBPyConnection) -> None:
    statement = (
        "SELECT 12345678901234567890::HUGEINT AS h, 1.25::DECIMAL(10, 2) AS d, "
        "TIMESTAMP '2015-09-12 01:02:03.004' AS ts, DATE '2015-09-12' AS day, INTERVAL 2 DAY AS i, "
        "NULL::TIMESTAMP AS nothing, 'x' AS s"
    )
    relation = cursor.sql(statement)
    kinds = [str(t) for t in relation.types]
    want = cursor.execute(statement).fetchall()[0]
    batches = ResultBatches(relation.to_arrow_reader(16), kinds, "America/Los_Angeles")
    batch = batches.next_batch()
    assert batch is not None and batches.next_batch() is None
    (row,) = batches.rows(batch)
    assert row == [
        int(want[0]),
        1.25,
        "2015-09-11T18:02:03.004-07:00",
        "2015-09-12T00:00:00.000-07:00",
        datetime.timedelta(days=2),
        None,
        "x",
    ]


def test_failures_are_druids_errors_naming_the_limits() -> None:
    spilling = EngineLimits(query_memory=64 * MiB, work_dir="/somewhere", spill_bytes=256 * MiB)
    out_of_memory = engine_failure(
        duckdb.OutOfMemoryException("Out of Memory Error: could not allocate"), spilling
    )
    assert isinstance(out_of_memory, ResourceLimitExceeded) and out_of_memory.status == 400
    assert "64 MiB" in out_of_memory.error_message and "--query-memory" in out_of_memory.error_message
    assert "256 MiB" in out_of_memory.error_message and "--spill-bytes" in out_of_memory.error_message
    mid_stream = engine_failure(OSError("INTERRUPT Error: Interrupted!"), LIMITS)  # as Arrow passes it on
    assert isinstance(mid_stream, QueryInterrupted)


def test_an_interrupted_slot_comes_back_once_its_thread_has_stopped() -> None:
    unhandled: list[str] = []

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: unhandled.append(ctx["message"]))
        engine = RelationalEngine(LIMITS)
        assert engine.limits.slots == 2
        slot = await engine.acquire()
        started = threading.Event()

        def forever() -> object:
            cur = slot.cursor()
            cur.register("n", pa.table({"x": list(range(3000))}))
            started.set()
            return cur.execute("SELECT COUNT(*) FROM n a, n b, n c WHERE a.x + b.x + c.x = -1").fetchall()

        work = asyncio.ensure_future(slot.run(forever))
        await asyncio.to_thread(started.wait, 30)
        await asyncio.sleep(0.2)
        work.cancel()  # what a statement's timeout or cancel does
        with pytest.raises(asyncio.CancelledError):
            await work
        engine.release(slot)
        for _ in range(300):
            if engine.busy == 0:
                break
            await asyncio.sleep(0.05)
        assert engine.busy == 0
        gc.collect()  # the interrupted work's failure was taken: nothing logged as never retrieved
        assert unhandled == []
        again = await asyncio.wait_for(engine.acquire(), 5)
        assert await again.run(lambda: again.cursor().execute("SELECT 42").fetchone()) == (42,)
        engine.release(again)
        engine.close()

    asyncio.run(scenario())


def _where_it_runs(slot: EngineSlot) -> tuple[int, int, int]:
    """In the slot's worker thread: its nice value, its database's DuckDB threads, and the nice
    value of every thread that database started."""
    tasks = Path("/proc/self/task")
    before = {p.name for p in tasks.iterdir()}
    cur = slot.cursor()
    (threads,) = cur.execute("SELECT current_setting('threads')").fetchone() or (0,)
    cur.execute("SELECT SUM(range) FROM range(2000000)").fetchall()
    started = [p for p in tasks.iterdir() if p.name not in before]
    nices = {int((p / "stat").read_text().rsplit(")", 1)[1].split()[16]) for p in started}
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    return own, int(threads), max(nices, default=own)


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")
def test_low_priority_statements_run_on_slots_of_their_own_with_one_duckdb_thread_at_nice_10() -> None:
    limits = EngineLimits(query_memory=32 * MiB, engine_memory=128 * MiB, threads=2, external_access=False)

    async def scenario() -> None:
        slots = EngineSlots(limits)
        try:
            assert slots.low is not None and (slots.normal.slots, slots.low.slots) == (3, 1)
            assert slots.for_priority(-1) is slots.low
            assert slots.for_priority(0) is slots.normal and slots.for_priority(5) is slots.normal
            answers = []
            for engine in (slots.normal, slots.low):
                slot = await engine.acquire()
                answers.append(await slot.run(_where_it_runs, slot))
                assert slots.status()["busy"] == 1
                engine.release(slot)
            (normal_nice, normal_threads, normal_started), (low_nice, low_threads, low_started) = answers
            assert normal_threads == 2 and low_threads == 1
            assert low_nice == LOW_NICE and low_started == LOW_NICE, answers
            assert normal_nice < LOW_NICE and normal_started == normal_nice, answers
            assert slots.status() == {"slots": 4, "busy": 0, "low": {"slots": 1, "busy": 0, "threads": 1}}
        finally:
            slots.close()

    asyncio.run(scenario())


def test_an_engine_of_one_slot_has_no_low_priority_slots() -> None:
    slots = EngineSlots(EngineLimits(query_memory=64 * MiB, engine_memory=64 * MiB))
    try:
        assert slots.low is None and slots.for_priority(-1) is slots.normal
        assert slots.status() == {"slots": 1, "busy": 0}
    finally:
        slots.close()


def test_subqueries_share_one_allowance() -> None:
    limits = SubqueryLimits.of({"maxSubqueryRows": 100}, ceiling=1000)
    limits.add(60, 10)
    with pytest.raises(ResourceLimitExceeded, match=r"maximum\[100\] rows.*maxSubqueryRows"):
        limits.add(41, 10)
    lowered = SubqueryLimits.of({"maxSubqueryBytes": "500"}, ceiling=1000)
    with pytest.raises(ResourceLimitExceeded, match=r"maximum\[500\] bytes.*\[maxSubqueryBytes\]"):
        lowered.add_bytes(501)
    for asked in ("auto", "disabled", 10**12, 0):
        capped = SubqueryLimits.of({"maxSubqueryBytes": asked}, ceiling=1000)
        with pytest.raises(ResourceLimitExceeded, match=r"maximum\[1000\] bytes.*--max-subquery-bytes"):
            capped.add_bytes(1001)
    assert SubqueryLimits.of({}, ceiling=1000).max_rows == 100_000
    with pytest.raises(InvalidInput, match="maxSubqueryBytes"):
        SubqueryLimits.of({"maxSubqueryBytes": "lots"}, ceiling=1000)


def test_timeouts_under_the_servers_default_and_maximum() -> None:
    assert timeout_within({}, 300_000, 0) == 300_000
    assert timeout_within({"timeout": 5}, 300_000, 0) == 5
    assert timeout_within({"timeout": 0}, 300_000, 0) == 0  # none, as Druid
    assert timeout_within({"timeout": 0}, 300_000, 60_000) == 60_000  # none, where a maximum is set
    assert timeout_within({"timeout": "60000"}, 300_000, 60_000) == 60_000
    with pytest.raises(InvalidInput, match=r"configured \[timeout = 60001\] is more than enforced limit"):
        timeout_within({"timeout": 60_001}, 300_000, 60_000)
    with pytest.raises(InvalidInput):
        timeout_within({"timeout": -1}, 300_000, 0)


def test_scatter_gather_bytes_under_the_brokers_limit() -> None:
    assert scatter_gather_bytes_within({}, 0) == 0  # none, as Druid's default
    assert scatter_gather_bytes_within({"maxScatterGatherBytes": 5}, 0) == 5
    assert scatter_gather_bytes_within({}, 1000) == 1000
    assert scatter_gather_bytes_within({"maxScatterGatherBytes": "999"}, 1000) == 999
    assert scatter_gather_bytes_within({"maxScatterGatherBytes": None}, 1000) == 1000
    with pytest.raises(
        InvalidInput, match=r"configured \[maxScatterGatherBytes = 1001\] is more than enforced"
    ):
        scatter_gather_bytes_within({"maxScatterGatherBytes": 1001}, 1000)
    for bad in (0, -1, "lots", [1]):
        with pytest.raises(InvalidInput, match="maxScatterGatherBytes"):
            scatter_gather_bytes_within({"maxScatterGatherBytes": bad}, 1000)


def test_nan_and_infinities_are_spelled_as_druids_json_writer_does(cursor: duckdb.DuckDBPyConnection) -> None:
    """Druid answers `LN(0)` with -Infinity and `ASIN(2)` with NaN, which Jackson writes as strings
    (JSON has no such numbers); orjson would write null for them."""
    statement = "SELECT ln(x) AS l, asin(x + 2) AS a, x::FLOAT AS f FROM (VALUES (0.0), (1.0), (NULL)) t(x)"
    relation = cursor.sql(statement)
    batches = ResultBatches(relation.to_arrow_reader(16), [str(t) for t in relation.types], None)
    batch = batches.next_batch()
    assert batch is not None
    assert batches.rows(batch) == [["-Infinity", "NaN", 0.0], [0.0, "NaN", 1.0], [None, None, None]]


def test_timestamps_of_any_year_print_as_instants(cursor: duckdb.DuckDBPyConnection) -> None:
    """Druid's TIME_PARSE('0') is the year 0 (qaUnnest/mv_sql_scalar_datetime_funcs.std.iq line
    226), which no Python datetime holds: the batch reads epoch milliseconds instead."""
    statement = (
        "SELECT make_timestamp(-62167219200000000) AS y0, TIMESTAMP '2015-09-12 01:02:03.004' AS ts,"
        " make_timestamp(-1) AS before, NULL::TIMESTAMP AS nothing"
    )
    relation = cursor.sql(statement)
    batches = ResultBatches(relation.to_arrow_reader(16), [str(t) for t in relation.types], None)
    batch = batches.next_batch()
    assert batch is not None
    assert batches.rows(batch) == [
        ["0000-01-01T00:00:00.000Z", "2015-09-12T01:02:03.004Z", "1969-12-31T23:59:59.999Z", None]
    ]
