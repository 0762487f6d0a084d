"""Typed access to fields of a query's JSON with Druid-style validation messages.

Every parser in the query package reads its JSON through these helpers so that a wrong type or a
missing field always ends as an `InvalidInput` (HTTP 400) naming the field, never a KeyError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, overload

from strata.query.errors import invalid

_MISSING: Any = object()
T = TypeVar("T")


def as_object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise invalid("%s must be a JSON object, got %s", what, _kind(value))
    return value


@overload
def get_str(obj: Mapping[str, Any], key: str, *, what: str = "") -> str: ...
@overload
def get_str(obj: Mapping[str, Any], key: str, default: T, *, what: str = "") -> str | T: ...
def get_str(obj: Mapping[str, Any], key: str, default: Any = _MISSING, *, what: str = "") -> Any:
    """A string field; absent or null is `default` (an error when none is given)."""
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise invalid("Missing required field [%s]%s", key, _where(what))
        return default
    if not isinstance(value, str):
        raise invalid("Field [%s]%s must be a string, got %s", key, _where(what), _kind(value))
    return value


JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1


def get_int(
    obj: Mapping[str, Any],
    key: str,
    default: Any = _MISSING,
    *,
    what: str = "",
    minimum: int | None = None,
    maximum: int = JAVA_LONG_MAX,
) -> Any:
    """An integer field; beyond `maximum` (Druid's Java long, or int where Druid has an int) is an error."""
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise invalid("Missing required field [%s]%s", key, _where(what))
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise invalid("Field [%s]%s must be an integer, got %s", key, _where(what), _kind(value))
    try:
        number = int(value)
        if isinstance(value, float) and number != value:
            raise ValueError
    except ValueError:
        raise invalid("Field [%s]%s must be an integer, got %r", key, _where(what), value) from None
    if minimum is not None and number < minimum:
        raise invalid("Field [%s]%s must be >= %d, got %d", key, _where(what), minimum, number)
    if number > maximum or number < -maximum - 1:
        raise invalid("Field [%s]%s is out of range (at most %d), got %d", key, _where(what), maximum, number)
    return number


def get_float(obj: Mapping[str, Any], key: str, default: Any = _MISSING, *, what: str = "") -> Any:
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise invalid("Missing required field [%s]%s", key, _where(what))
        return default
    if isinstance(value, bool):
        raise invalid("Field [%s]%s must be a number, got a boolean", key, _where(what))
    try:
        return float(value)
    except (TypeError, ValueError):
        raise invalid("Field [%s]%s must be a number, got %r", key, _where(what), value) from None


def get_bool(obj: Mapping[str, Any], key: str, default: bool, *, what: str = "") -> bool:
    """Booleans as Druid (Jackson) accepts them: true/false, "true"/"false", 0/1."""
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise invalid("Field [%s]%s must be a boolean, got %r", key, _where(what), value)


def get_list(obj: Mapping[str, Any], key: str, default: Any = _MISSING, *, what: str = "") -> Any:
    value = obj.get(key, _MISSING)
    if value is _MISSING or value is None:
        if default is _MISSING:
            raise invalid("Missing required field [%s]%s", key, _where(what))
        return default
    if not isinstance(value, list):
        raise invalid("Field [%s]%s must be a JSON array, got %s", key, _where(what), _kind(value))
    return value


def _where(what: str) -> str:
    return f" of {what}" if what else ""


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
