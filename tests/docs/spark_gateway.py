"""One Spark JVM for the docs' Python blocks (`python -m tests.docs.spark_gateway`).

PySpark connects to a running JVM when PYSPARK_GATEWAY_PORT and PYSPARK_GATEWAY_SECRET are set, as
under `spark-submit` or the `pyspark` shell, so each block (a fresh Python process) builds and stops
its own SparkSession on this JVM instead of starting one of its own. This process starts the JVM,
prints `PORT SECRET`, and holds it until its standard input closes; the JVM ends when this process
does (Spark's gateway exits when its own standard input closes). The JVM's JIT stops at its quick
first tier, as in the sessions `strata ingest` starts in local mode (`LOCAL_JVM_OPTIONS`): the
optimising compiler would spend more CPU on Spark's own code than the blocks' small jobs take.
"""

from __future__ import annotations

import sys


def main() -> int:
    from pyspark import SparkConf
    from pyspark.java_gateway import launch_gateway

    from strata.ingestion.spark_engine import LOCAL_JVM_OPTIONS

    gateway = launch_gateway(
        SparkConf(loadDefaults=False).set("spark.driver.extraJavaOptions", LOCAL_JVM_OPTIONS)
    )
    params = gateway.gateway_parameters
    print(params.port, params.auth_token, flush=True)
    sys.stdin.read()  # until the test closes our input
    return 0


if __name__ == "__main__":
    sys.exit(main())
