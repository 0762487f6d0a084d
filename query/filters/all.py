"""Imports every filter module so each registers its types."""

import query.filters.expression
import query.filters.logical
import query.filters.match
import query.filters.ranges
import query.filters.text  # noqa: F401
