"""Runs Strata locally for the tests and the benchmarks alike: Strata child processes bounded in
time (`processes`), a local Spark session with the `strata` data source (`spark_session`), and
segment files written straight from rows without Strata's ingestion (`raw_segments`, an oracle
independent of the code under test); for several hosts on one machine, network namespaces on a
private bridge (`netns`), on which those processes, ZooKeeper, PostgreSQL (`postgres`) and an S3
server (`s3_server`) run each on a host of its own.

Development only: not part of the installed distribution.
"""
