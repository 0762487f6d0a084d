"""An operator's log says what the node does, not every HTTP call the broker makes to a data node."""

from __future__ import annotations

import logging

from strata.cli.main import configure_logging


def test_http_client_request_lines_only_at_debug() -> None:
    loggers = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    before = [lg.level for lg in loggers]
    try:
        configure_logging("info")
        assert all(not lg.isEnabledFor(logging.INFO) and lg.isEnabledFor(logging.WARNING) for lg in loggers)
        for lg in loggers:
            lg.setLevel(logging.NOTSET)
        configure_logging("DEBUG")
        assert all(lg.level == logging.NOTSET for lg in loggers)
    finally:
        for lg, level in zip(loggers, before, strict=True):
            lg.setLevel(level)
