"""Strata: a Druid-compatible query broker with historical and real-time data nodes."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("strata")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
