"""Java's text of numbers, as Druid prints them: one place for every layer that needs it."""

from __future__ import annotations

import decimal
import math


def jackson_double(value: float) -> float | str:
    """A double as Jackson, Druid's JSON writer, puts it in an answer: NaN and the infinities as the
    strings "NaN", "Infinity", "-Infinity" (JSON has no such numbers), any other as the number."""
    return value if math.isfinite(value) else java_double(value)


def java_double(value: float) -> str:
    """Java's Double.toString, as Druid prints a DOUBLE as text: plain notation from 10^-3 up to
    10^7 (`1571.0`), else `1.2345678E7`, `1.0E-5`; the shortest digits that read back."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    exact = decimal.Decimal(repr(abs(value)))  # repr gives the shortest round-tripping digits
    if 1e-3 <= abs(value) < 1e7:
        text = format(exact, "f")
        return sign + (text if "." in text else text + ".0")
    _, digits, exponent = exact.as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) + exponent - 1
    return f"{sign}{shown[0]}.{shown[1:] or '0'}E{power}"
