"""The SQL planner's view of the cluster: datasources and their columns, segments and servers for
the `sys` tables.

Column types come from a segmentMetadata query through the broker's runner, kept for
`CATALOG_TTL` seconds per datasource; past that a statement still plans with the kept columns
while one refresh runs beside it (as Druid's broker refreshes its SQL schema in the background), so
no statement waits on a metadata query but a datasource's first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from broker_service.broker import Broker
from strata.query.base import parse_query
from strata.sql.column_types import catalog_type
from timeline import Interval

CATALOG_TTL = 10.0
ETERNITY = "-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"
log = logging.getLogger(__name__)


class BrokerCatalog:
    """The planner's view of the cluster: datasources, their columns and types, segments, servers."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._columns: dict[str, tuple[float, dict[str, str]]] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}  # background refreshes, held until done

    def tables(self) -> Sequence[str]:
        return sorted(self.broker.view.data_sources())

    def columns(self, table: str) -> Mapping[str, str] | None:
        cached = self._columns.get(table)
        return None if cached is None else cached[1]

    async def load(self, tables: Sequence[str]) -> None:
        """Columns of `tables` known before planning: a datasource never seen is read now, one whose
        columns are older than `CATALOG_TTL` is refreshed in the background."""
        known = set(self.broker.view.data_sources())
        now = time.monotonic()
        for table in tables:
            cached = self._columns.get(table)
            if table not in known or (cached is not None and now - cached[0] < CATALOG_TTL):
                continue
            if cached is None:
                await self._refresh(table)
            elif table not in self._refreshing:
                self._refreshing[table] = asyncio.create_task(self._refresh_behind(table))

    async def _refresh_behind(self, table: str) -> None:
        try:
            await self._refresh(table)
        except Exception:  # the kept columns stay; the next statement past the TTL tries again
            log.warning("refreshing the columns of [%s] failed; keeping the known ones", table, exc_info=True)
        finally:
            self._refreshing.pop(table, None)

    async def _refresh(self, table: str) -> None:
        started = time.monotonic()
        query = parse_query(
            {
                "queryType": "segmentMetadata",
                "dataSource": table,
                "intervals": [ETERNITY],
                "merge": True,
                "analysisTypes": [],
                "context": {"useCache": False},
            }
        )
        result = await self.broker.runner.run(query)
        rows = result.results if result.results is not None else orjson.loads(result.body or b"[]")
        types: dict[str, str] = {}
        for row in rows:
            for name, info in sorted(row.get("columns", {}).items()):
                types.setdefault(name, catalog_type(info))
        columns = {"__time": "LONG"}
        for name in [*self._column_order(table), *types]:
            if name in types and name not in columns:
                columns[name] = types[name]
        self._columns[table] = (started, columns)

    def _column_order(self, table: str) -> list[str]:
        """Druid's order of a datasource's columns (SELECT *, ORDINAL_POSITION): each segment's
        dimensions then metrics, the segment with the latest start first; columns no segment
        names (a live segment's) follow by name."""
        segments = [sel.segment for sel in self.broker.view.selectors() if sel.segment.data_source == table]
        segments.sort(key=lambda s: s.id)
        segments.sort(key=lambda s: s.interval.start, reverse=True)
        return list(dict.fromkeys(name for s in segments for name in (*s.dimensions, *s.metrics)))

    def snapshot(self, *, system: bool) -> CatalogSnapshot:
        """What planning may read; the segment and server rows only for a statement reading the
        system tables (they cost a walk over every segment)."""
        names = tuple(self.tables())
        columns = {t: cached[1] for t in names if (cached := self._columns.get(t)) is not None}
        if not system:
            return CatalogSnapshot(names, columns)
        return CatalogSnapshot(names, columns, tuple(self.segments()), tuple(self.servers()))

    def segments(self) -> list[dict[str, Any]]:
        view = self.broker.view
        timelines = {name: view.timeline(name) for name in view.data_sources()}  # before the walk
        out = []
        for sel in view.selectors():
            seg = sel.segment
            timeline = timelines.get(seg.data_source)
            overshadowed = timeline is not None and timeline.is_overshadowed(seg.interval, seg.version)
            out.append(
                {
                    "segment_id": seg.id,
                    "datasource": seg.data_source,
                    "start": str(seg.interval).split("/")[0],
                    "end": str(seg.interval).split("/")[1],
                    "size": seg.size,
                    "version": seg.version,
                    "partition_num": seg.partition_num,
                    "num_replicas": len(sel.servers),
                    "num_rows": facts.num_rows if (facts := sel.row_facts) is not None else None,
                    "is_published": 1,
                    "is_available": int(bool(sel.servers)),
                    "is_realtime": int(not sel.is_historical),
                    "is_overshadowed": int(overshadowed),
                }
            )
        return out

    def segment_intervals(self, table: str) -> list[tuple[Interval, int | None]]:
        """The datasource's segments' intervals, with their rows where known (a streamed selection
        sizes its chunks by them)."""
        return [
            (sel.segment.interval, facts.num_rows if (facts := sel.row_facts) is not None else None)
            for sel in self.broker.view.selectors()
            if sel.segment.data_source == table
        ]

    def servers(self) -> list[dict[str, Any]]:
        view = self.broker.view
        return [
            {
                "server": s.name,
                "host": s.host.rsplit(":", 1)[0],
                "plaintext_port": int(s.host.rsplit(":", 1)[1]),
                "tls_port": -1,
                "server_type": s.type,
                "tier": s.tier,
                "curr_size": sum(seg.size for seg in view.segments_of(s.name).values()),
                "max_size": s.max_size,
            }
            for s in view.servers()
        ]


@dataclass(frozen=True)
class CatalogSnapshot:
    """The catalog as one statement plans against it, taken on the event loop: planning runs in a
    worker thread and must not read the broker's server view while the loop changes it."""

    table_names: tuple[str, ...]
    table_columns: Mapping[str, Mapping[str, str]]
    segment_rows: tuple[dict[str, Any], ...] = ()
    server_rows: tuple[dict[str, Any], ...] = ()

    def tables(self) -> Sequence[str]:
        return self.table_names

    def columns(self, table: str) -> Mapping[str, str] | None:
        return self.table_columns.get(table)

    def segments(self) -> list[dict[str, Any]]:
        return list(self.segment_rows)

    def servers(self) -> list[dict[str, Any]]:
        return list(self.server_rows)
