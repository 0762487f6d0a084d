"""A Spark driver run on the driver host against the standalone cluster (`python -m
tests.multihost.spark_job MASTER CONF BROKER OUT ROWS DEEP ENDPOINT METADATA`): its executors are
on the worker hosts. One session (one driver JVM) does both jobs:

- read: every row of `wikipedia` through `spark.read.format("strata")`, written to OUT as JSON
  lines of [__time ms, page, user, added, deleted] (the test compares them with the raw rows);
- write: `df.write.format("strata")` of ROWS generated rows into `written`, the executors
  writing segments to S3 and the driver publishing them in the metadata store.
"""

from __future__ import annotations

import json
import sys


def _session(master: str, conf: dict[str, str]):
    from pyspark.sql import SparkSession

    import strata.spark

    builder = SparkSession.builder.master(master).appName("strata-multihost")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    strata.spark.register(spark)
    return spark


def main(argv: list[str]) -> int:
    master, conf_json, broker, out, count, deep, endpoint, metadata = argv
    from pyspark.sql import functions as F

    spark = _session(master, json.loads(conf_json))
    try:
        df = spark.read.format("strata").option("broker", broker).option("datasource", "wikipedia").load()
        rows = df.select("__time", "page", "user", "added", "deleted").collect()
        with open(out, "w") as f:
            for r in rows:
                f.write(json.dumps([int(r[0].timestamp() * 1000), r[1], r[2], r[3], r[4]]) + "\n")
        generated = spark.range(int(count), numPartitions=2).select(
            (F.lit(1_442_016_000) + F.col("id") * 7).cast("timestamp").alias("ts"),  # from 2015-09-12
            F.concat(F.lit("k"), (F.col("id") % 5).cast("string")).alias("k"),
            F.col("id").alias("n"),
        )
        (generated.write.format("strata").option("datasource", "written").option("timestampColumn", "ts")
         .option("segmentGranularity", "hour").option("deepStorage", deep).option("s3Endpoint", endpoint)
         .option("metadata", metadata).mode("append").save())  # fmt: skip
        print(json.dumps({"read": len(rows), "written": int(count)}))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
