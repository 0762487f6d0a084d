"""Strata: a Druid-compatible query broker with historical and real-time data nodes."""

from server_common import __version__

__all__ = ["__version__"]
