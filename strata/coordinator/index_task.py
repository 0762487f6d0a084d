"""`index_parallel` and `index` tasks: Druid's native batch spec run by strata.ingestion (the local
engine or Spark, as the coordinator was started with), in the task's own process.

The ingestion publishes through `GuardedStore`, which hands the metadata store the task's guard:
the publish commits only if the task still holds its interval locks and has not been shut down or
superseded, and it marks the task published in that same transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from strata.coordinator.task_context import TaskContext, TaskFailed
from strata.coordinator.task_status import ingestion_report
from strata.ingestion.errors import IngestionError, TooManyParseExceptions
from strata.ingestion.spec import IngestionSpec
from strata.ingestion.summary import IngestionSummary
from strata.storage.deep_storage import DeepStorage
from strata.storage.metadata_store import MetadataStore, Replacement, SegmentRecord, TransactionGuard
from strata.storage.schema import Migration
from timeline import DataSegment

MAX_SAVED_PARSE_EXCEPTIONS = 20


class GuardedStore:
    """A `MetadataStore` whose publishes carry a task's guard; everything else goes straight through."""

    def __init__(self, inner: MetadataStore, ctx: TaskContext) -> None:
        self._inner = inner
        self._ctx = ctx

    def publish(
        self,
        segments: Sequence[DataSegment],
        *,
        overwrite: bool,
        guard: TransactionGuard | None = None,
        replace: Replacement | None = None,
    ) -> None:
        writes = [(s.data_source, s.interval) for s in segments]
        if replace is not None:  # what a REPLACE drops is written too: its lock must cover it
            writes += [(replace.data_source, iv) for iv in replace.intervals]
        joins = [] if overwrite else [(s.data_source, s.interval, s.version) for s in segments]
        checked = self._ctx.guard(writes, publishes=True, joins=joins)
        if replace is None:
            self._inner.publish(segments, overwrite=overwrite, guard=checked)
        else:
            self._inner.publish(segments, overwrite=overwrite, guard=checked, replace=replace)

    def used_segments(self, data_source: str | None = None) -> list[DataSegment]:
        return self._inner.used_segments(data_source)

    def segments(self, data_source: str | None = None, include_unused: bool = False) -> list[SegmentRecord]:
        return self._inner.segments(data_source, include_unused)

    def mark_unused(self, ids: Iterable[str]) -> int:
        return self._inner.mark_unused(ids)

    def mark_used(self, ids: Iterable[str]) -> int:
        return self._inner.mark_used(ids)

    def delete_unused(self, ids: Iterable[str], *, guard: TransactionGuard | None = None) -> int:
        return self._inner.delete_unused(ids, guard=guard)

    def data_sources(self) -> list[str]:
        return self._inner.data_sources()

    def subscribe(self, callback: Callable[[], None]) -> None:
        self._inner.subscribe(callback)

    @property
    def dialect(self) -> str:
        return self._inner.dialect

    def transaction(self) -> AbstractContextManager[Any]:
        return self._inner.transaction()

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        return self._inner.migrate(component, migrations)

    def close(self) -> None:
        """The task's process owns the inner store and closes it."""


def _row_stats(summary: IngestionSummary) -> dict[str, int]:
    return {
        "processed": summary.rows_read - summary.parse_errors - summary.rows_thrown_away,
        "unparseable": summary.parse_errors,
        "thrownAway": summary.rows_thrown_away,
    }


@contextmanager
def ingestion_failed(ctx: TaskContext) -> Iterator[None]:
    """An ingestion's failure as the task's: its message and Druid's report of it."""
    try:
        yield
    except TooManyParseExceptions as e:
        examples = [str(p) for p in e.examples[:MAX_SAVED_PARSE_EXCEPTIONS]]
        report = ingestion_report(ctx.task_id, "BUILD_SEGMENTS", {"unparseable": e.count}, examples, str(e))
        raise TaskFailed(str(e), report) from None
    except IngestionError as e:
        raise TaskFailed(str(e), ingestion_report(ctx.task_id, "BUILD_SEGMENTS", {}, [], str(e))) from None


def ingest_guarded(
    ctx: TaskContext, spec: IngestionSpec | Mapping[str, Any], deep_storage: str | DeepStorage
) -> IngestionSummary:
    """`spec` ingested on the task's engine, published under the task's guard."""
    from strata.ingestion.api import ingest

    return ingest(
        spec,
        deep_storage=deep_storage,
        metadata=GuardedStore(ctx.metadata, ctx),
        engine=ctx.engine,
        spark_master=ctx.spark_master,
        spark_conf=ctx.spark_conf,
        s3_endpoint=ctx.s3_endpoint,
        s3_region=ctx.s3_region,
    )


def run(ctx: TaskContext) -> dict[str, Any]:
    with ingestion_failed(ctx):
        summary = ingest_guarded(ctx, ctx.payload, ctx.deep_storage)
    problems = [str(p) for p in summary.problems[:MAX_SAVED_PARSE_EXCEPTIONS]]
    published = len(summary.segments)
    return ingestion_report(ctx.task_id, "COMPLETED", _row_stats(summary), problems, None, published)
