"""The coordinator-overlord (`strata coordinator`): Druid's task API (ingestion on the local engine or
Spark, kill; each task in its own process, holding interval locks kept in the metadata store) and
its data-management API (data sources, segments, marking them used or unused), with a duty loop
for periodic jobs. See docs/coordinator.md.
"""
