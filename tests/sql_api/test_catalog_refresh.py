"""The SQL catalog's columns: read before a datasource's first statement, refreshed behind later
ones once older than the TTL, and kept when a refresh fails."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from broker_service import sql_catalog
from strata.query.errors import QueryError
from timeline import DataSegment, Interval


class FakeRunner:
    def __init__(self) -> None:
        self.columns: dict[str, Any] = {"page": {"type": "STRING"}}
        self.calls = 0
        self.fail = False
        self.gate = asyncio.Event()
        self.gate.set()

    async def run(self, query: Any) -> Any:
        self.calls += 1
        await self.gate.wait()
        if self.fail:
            raise QueryError("historicals unreachable")
        return SimpleNamespace(results=[{"columns": dict(self.columns)}], body=None)


def catalog(runner: FakeRunner, segments: tuple[DataSegment, ...] = ()) -> sql_catalog.BrokerCatalog:
    view = SimpleNamespace(
        data_sources=lambda: ["wiki"], selectors=lambda: [SimpleNamespace(segment=s) for s in segments]
    )
    return sql_catalog.BrokerCatalog(SimpleNamespace(view=view, runner=runner))  # type: ignore[arg-type]


def test_columns_in_druids_order() -> None:
    """As Druid's broker orders a datasource's signature: each segment's dimensions then metrics,
    the segment starting latest first (Druid's INFORMATION_SCHEMA test of `foo`: __time, dim1,
    dim2, dim3, cnt, m1, m2); columns no segment names come last, by name."""
    hour = 3_600_000
    older = DataSegment("wiki", Interval(0, hour), "v1", dimensions=("b", "a"), metrics=("m",))
    newer = DataSegment("wiki", Interval(hour, 2 * hour), "v1", dimensions=("dim2", "dim1"), metrics=("cnt",))

    async def scenario() -> None:
        runner = FakeRunner()
        runner.columns = {n: {"type": "STRING"} for n in ("a", "b", "cnt", "dim1", "dim2", "live", "m")}
        cat = catalog(runner, (older, newer))
        await cat.load(["wiki"])
        assert list(cat.columns("wiki") or {}) == ["__time", "dim2", "dim1", "cnt", "b", "a", "m", "live"]

    asyncio.run(scenario())


def test_first_statement_waits_later_ones_refresh_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> None:
        runner = FakeRunner()
        cat = catalog(runner)
        await cat.load(["wiki", "missing"])
        assert cat.columns("wiki") == {"__time": "LONG", "page": "STRING"}
        assert cat.columns("missing") is None and runner.calls == 1

        await cat.load(["wiki"])  # fresh: no query
        assert runner.calls == 1

        monkeypatch.setattr(sql_catalog, "CATALOG_TTL", 0.0)
        runner.columns["added"] = {"type": "LONG"}
        runner.gate.clear()  # the refresh cannot finish: load must not wait for it
        await asyncio.wait_for(cat.load(["wiki"]), 1)
        await asyncio.wait_for(cat.load(["wiki"]), 1)  # one refresh at a time per datasource
        assert cat.columns("wiki") == {"__time": "LONG", "page": "STRING"}
        runner.gate.set()
        for _ in range(100):
            await asyncio.sleep(0)
        assert runner.calls == 2
        assert cat.columns("wiki") == {"__time": "LONG", "page": "STRING", "added": "LONG"}

        runner.fail = True
        await cat.load(["wiki"])
        for _ in range(100):
            await asyncio.sleep(0)
        assert cat.columns("wiki") == {"__time": "LONG", "page": "STRING", "added": "LONG"}

    asyncio.run(scenario())


def test_first_read_failing_is_the_statements_error() -> None:
    async def scenario() -> None:
        runner = FakeRunner()
        runner.fail = True
        with pytest.raises(QueryError):
            await catalog(runner).load(["wiki"])

    asyncio.run(scenario())
