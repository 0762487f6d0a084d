"""Runs Strata locally for the tests and the benchmarks alike: Strata child processes bounded in
time (`processes`), a local Spark session with the `strata` data source (`spark_session`), and
segment files written straight from rows without Strata's ingestion (`raw_segments`, an oracle
independent of the code under test).

Development only: not part of the installed distribution.
"""
