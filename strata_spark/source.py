"""The `strata` PySpark data source: one class that hands out the writer (and the reader)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource

if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceWriter
    from pyspark.sql.types import StructType


class StrataDataSource(DataSource):
    """`format("strata")`; options are described in `strata_spark.write_options` (writing)."""

    @classmethod
    def name(cls) -> str:
        return "strata"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from strata_spark.writer import StrataWriter

        return StrataWriter(dict(self.options), schema, overwrite)

    # -- reading: schema() and reader() belong here (strata_spark/reader.py) -----------------------
