"""strata.storage.retry: bounded attempts, backoff growth, permanent errors end at once."""

from __future__ import annotations

import pytest

from strata.storage.retry import Backoff, is_transient, retrying


def test_transient_errors_are_retried_until_success_with_growing_waits() -> None:
    waits: list[float] = []
    calls = iter([OSError("AWS Error NETWORK_CONNECTION: reset"), OSError("HTTP 503 SlowDown"), "ok"])

    def op() -> str:
        item = next(calls)
        if isinstance(item, BaseException):
            raise item
        assert isinstance(item, str)
        return item

    assert retrying(op, "op", Backoff(attempts=3, first_s=1.0, max_s=10.0), sleep=waits.append) == "ok"
    assert len(waits) == 2 and 0.75 <= waits[0] <= 1.25 and 1.5 <= waits[1] <= 2.5


def test_attempts_are_bounded_and_the_last_error_propagates() -> None:
    waits: list[float] = []
    with pytest.raises(OSError, match="third"):
        errors = iter([OSError("first"), OSError("second"), OSError("third")])
        retrying(lambda: (_ for _ in ()).throw(next(errors)), "op", Backoff(attempts=3), sleep=waits.append)
    assert len(waits) == 2


@pytest.mark.parametrize(
    "error",
    [FileNotFoundError("gone"), PermissionError("no"), OSError("AWS Error ACCESS_DENIED"), ValueError("bug")],
)
def test_permanent_errors_end_at_once(error: BaseException) -> None:
    assert not is_transient(error)
    waits: list[float] = []

    def op() -> None:
        raise error

    with pytest.raises(type(error)):
        retrying(op, "op", Backoff(attempts=5), sleep=waits.append)
    assert waits == []


def test_waits_are_capped() -> None:
    assert all(Backoff(first_s=1.0, max_s=4.0).delay(n) <= 5.0 for n in range(1, 20))
