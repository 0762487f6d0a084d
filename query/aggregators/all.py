"""Imports every aggregator module so each registers its types."""

import query.aggregators.filtered
import query.aggregators.first_last
import query.aggregators.simple
import query.aggregators.sketches  # noqa: F401
