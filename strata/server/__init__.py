"""What every Strata server process shares: Druid-shaped JSON responses and error handlers, the
signal-driven lifecycle (drain, parent watch), Prometheus metrics under Druid's names, the version.

Services import this package, never the `strata` command line, which sits on top of them all.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("strata")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
