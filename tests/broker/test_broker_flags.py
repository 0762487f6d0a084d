"""The broker's own flags as its parser reads them."""

from __future__ import annotations

import argparse

import pytest

from broker_service.cli import configure


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    configure(parser)
    return parser.parse_args(list(argv))


def test_switch_interval_is_one_millisecond_unless_set() -> None:
    assert parsed().switch_interval_ms == 1.0
    assert parsed("--switch-interval-ms", "5").switch_interval_ms == 5.0
    assert parsed("--switch-interval-ms", "0.5").switch_interval_ms == 0.5


@pytest.mark.parametrize("value", ["0", "-1", "1001", "nan", "soon"])
def test_switch_interval_out_of_range_is_refused(value: str) -> None:
    with pytest.raises(SystemExit):
        parsed("--switch-interval-ms", value)


def test_low_priority_nice_is_10_unless_set() -> None:
    assert parsed().low_priority_nice == 10
    assert parsed("--low-priority-nice", "0").low_priority_nice == 0
    assert parsed("--low-priority-nice", "0").low_priority_nice == 0
    for value in ("-1", "20", "x"):
        with pytest.raises(SystemExit):
            parsed("--low-priority-nice", value)
