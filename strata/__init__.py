"""Strata: a Druid-compatible query broker with historical and real-time data nodes.

Everything Strata installs lives under this name, beside the design card's `broker_service`,
`historical_service`, `timeline` and `cache`. This module imports nothing of its own, so a Spark
executor that unpickles `strata.spark` or a test of `strata.query` loads only what it names.
"""
