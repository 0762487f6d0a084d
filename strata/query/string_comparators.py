"""Druid's string orderings (`lexicographic`, `alphanumeric`, `numeric`, `strlen`, `version`).

Bound filters, the search query's `sort`, topN dimension metrics and groupBy limit specs all name
one of these. Each is a three-way `compare(a, b)` with nulls first, as Druid's StringComparators;
`sort_key` turns one into a key for Python sorting. Lexicographic compares code points (Druid
compares UTF-16 units; the two differ only between astral characters and U+E000..U+FFFF).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from strata.query.errors import invalid

LEXICOGRAPHIC = "lexicographic"
ALPHANUMERIC = "alphanumeric"
NUMERIC = "numeric"
STRLEN = "strlen"
VERSION = "version"
ORDERINGS = (LEXICOGRAPHIC, ALPHANUMERIC, NUMERIC, STRLEN, VERSION)

# What java.math.BigDecimal(String) accepts: optional sign, digits with an optional point, exponent.
NUMBER_PATTERN = r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?"
_NUMBER = re.compile(NUMBER_PATTERN)

Comparator = Callable[[str | None, str | None], int]


def parse_ordering(value: Any) -> str:
    """An ordering given as a name or as `{"type": name}`."""
    if isinstance(value, dict):
        value = value.get("type")
    if not isinstance(value, str) or value.lower() not in ORDERINGS:
        raise invalid("Unknown string ordering [%s]; expected one of %s", value, ", ".join(ORDERINGS))
    return value.lower()


def parse_number(text: str) -> Decimal | None:
    """The exact number a string spells as Java's BigDecimal reads it, or None."""
    if not _NUMBER.fullmatch(text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:  # pragma: no cover - the pattern admits only valid decimals
        return None


def _sign(x: int) -> int:
    return (x > 0) - (x < 0)


def _nulls_first(cmp: Callable[[str, str], int]) -> Comparator:
    def compare(a: str | None, b: str | None) -> int:
        if a is None or b is None:
            return (a is not None) - (b is not None)
        return cmp(a, b)

    return compare


@_nulls_first
def compare_lexicographic(a: str, b: str) -> int:
    return _sign((a > b) - (a < b))


@_nulls_first
def compare_strlen(a: str, b: str) -> int:
    return _sign(len(a) - len(b)) or compare_lexicographic(a, b)


@_nulls_first
def compare_numeric(a: str, b: str) -> int:
    """Numbers by value; unparseable strings sort before every number, among themselves lexically."""
    x, y = parse_number(a), parse_number(b)
    if x is not None and y is not None:
        return _sign((x > y) - (x < y))
    if x is None and y is None:
        return compare_lexicographic(a, b)
    return -1 if x is None else 1


_DIGIT_ZEROS = (0x30, 0x660, 0x6F0, 0x966, 0xFF10)  # the zero of each digit block Druid knows


def _digit_value(ch: str) -> int | None:
    code = ord(ch)
    for zero in _DIGIT_ZEROS:
        if zero <= code <= zero + 9:
            return code - zero
    return None


def _chunks(s: str) -> list[tuple[bool, str]]:
    """Maximal runs of digits and of non-digits, in order."""
    out: list[tuple[bool, str]] = []
    for ch in s:
        is_digit = _digit_value(ch) is not None
        if out and out[-1][0] == is_digit:
            out[-1] = (is_digit, out[-1][1] + ch)
        else:
            out.append((is_digit, ch))
    return out


def _compare_digit_runs(a: str, b: str) -> int:
    zeros_a = len(a) - len(a.lstrip("0\u0660\u06f0\u0966\uff10"))
    zeros_b = len(b) - len(b.lstrip("0\u0660\u06f0\u0966\uff10"))
    sig_a, sig_b = a[zeros_a:], b[zeros_b:]
    if len(sig_a) != len(sig_b):
        return _sign(len(sig_a) - len(sig_b))
    for x, y in zip(sig_a, sig_b, strict=True):
        dx, dy = _digit_value(x), _digit_value(y)
        if dx != dy:
            return _sign((dx or 0) - (dy or 0))
    return _sign(zeros_a - zeros_b)


def _case_insensitive(a: str, b: str) -> int:
    """Java's String.CASE_INSENSITIVE_ORDER: per char, upper-case then lower-case folding."""
    for x, y in zip(a, b, strict=False):
        if x != y:
            xu, yu = x.upper(), y.upper()
            if xu != yu:
                xl, yl = xu.lower(), yu.lower()
                if xl != yl:
                    return _sign(ord(xl[0]) - ord(yl[0]))
    return _sign(len(a) - len(b))


@_nulls_first
def compare_alphanumeric(a: str, b: str) -> int:
    """Natural order: digit runs compare as numbers and sort before text; text ignores case."""
    if not a or not b:
        return _sign(len(a) - len(b))
    for (a_digit, a_run), (b_digit, b_run) in zip(_chunks(a), _chunks(b), strict=False):
        if a_digit != b_digit:
            return -1 if a_digit else 1
        result = _compare_digit_runs(a_run, b_run) if a_digit else _case_insensitive(a_run, b_run)
        if result:
            return result
    return _sign(len(a) - len(b))


# -- version: Maven's ComparableVersion, which Druid uses through DefaultArtifactVersion ------------
_QUALIFIERS = ["alpha", "beta", "milestone", "rc", "snapshot", "", "sp"]
_ALIASES = {"ga": "", "final": "", "release": "", "cr": "rc"}


def _qualifier_rank(q: str) -> str:
    q = _ALIASES.get(q, q)
    if q in _QUALIFIERS:
        return str(_QUALIFIERS.index(q))
    return f"{len(_QUALIFIERS)}-{q}"


VersionItem = int | str | list[Any]


def _parse_version(text: str) -> list[VersionItem]:
    root: list[VersionItem] = []
    current = root
    stack = [root]
    token = ""
    is_digit = False

    def flush(tok: str, digit: bool, followed_by_digit: bool = False) -> None:
        if digit:
            current.append(int(tok or "0"))
        else:
            if followed_by_digit and len(tok) == 1 and tok in "abm":
                tok = {"a": "alpha", "b": "beta", "m": "milestone"}[tok]
            current.append(tok)

    for ch in text.lower():
        if ch == ".":
            flush(token, is_digit)
            token, is_digit = "", False
        elif ch == "-":
            flush(token, is_digit)
            token, is_digit = "", False
            new: list[VersionItem] = []
            current.append(new)
            current = new
            stack.append(new)
        elif ch.isdigit():
            if token and not is_digit:
                flush(token, False, followed_by_digit=True)
                new = []
                current.append(new)
                current = new
                stack.append(new)
                token = ""
            is_digit = True
            token += ch
        else:
            if token and is_digit:
                flush(token, True)
                new = []
                current.append(new)
                current = new
                stack.append(new)
                token = ""
            is_digit = False
            token += ch
    if token or not current:
        flush(token, is_digit)
    for lst in reversed(stack):
        _normalize(lst)
    return root


def _is_null(item: VersionItem) -> bool:
    return item == 0 or item == "" or item == [] or (isinstance(item, str) and _ALIASES.get(item) == "")


def _normalize(items: list[VersionItem]) -> None:
    while items and _is_null(items[-1]):
        items.pop()


def _compare_item(a: VersionItem | None, b: VersionItem | None) -> int:
    if a is None:
        return -_compare_item(b, None) if b is not None else 0
    if isinstance(a, int):
        if b is None:
            return 1 if a else 0
        if isinstance(b, int):
            return _sign(a - b)
        return 1  # numbers beat qualifiers and sub-lists
    if isinstance(a, str):
        if b is None:
            return compare_lexicographic(_qualifier_rank(a), _qualifier_rank(""))
        if isinstance(b, str):
            return compare_lexicographic(_qualifier_rank(a), _qualifier_rank(b))
        return -1
    if b is None:
        return _compare_item(a[0], None) if a else 0
    if isinstance(b, int):
        return -1
    if isinstance(b, str):
        return 1
    for i in range(max(len(a), len(b))):
        result = _compare_item(a[i] if i < len(a) else None, b[i] if i < len(b) else None)
        if result:
            return result
    return 0


@_nulls_first
def compare_version(a: str, b: str) -> int:
    return _compare_item(_parse_version(a), _parse_version(b))


COMPARATORS: dict[str, Comparator] = {
    LEXICOGRAPHIC: compare_lexicographic,
    ALPHANUMERIC: compare_alphanumeric,
    NUMERIC: compare_numeric,
    STRLEN: compare_strlen,
    VERSION: compare_version,
}


def sort_key(ordering: str) -> Callable[[str | None], Any]:
    return functools.cmp_to_key(COMPARATORS[ordering])
