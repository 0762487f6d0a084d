"""Joda-Time `DateTimeFormat` patterns (TIME_FORMAT, TIME_PARSE) as DuckDB strftime/strptime.

A pattern becomes a list of pieces: strftime codes run over the zone's wall-clock time; `Z` and
`ZZ` print the zone's UTC offset (`-0500`, `-05:00`) and `z` its short name (`PDT`; the offset
for a fixed-offset zone), as Joda does.
Joda repeats a numeric letter to set the minimum number of digits (`d` -> `1`, `dd` -> `01`).
"""

from __future__ import annotations

from strata.query.errors import QueryUnsupported

# letter -> {count: strftime code}; the largest count not above the pattern's applies
_CODES: dict[str, dict[int, str]] = {
    "y": {1: "%Y", 2: "%y", 3: "%Y"},
    "Y": {1: "%Y", 2: "%y", 3: "%Y"},
    "u": {1: "%Y", 2: "%y", 3: "%Y"},
    "x": {1: "%G", 2: "%G"},
    "w": {1: "%-V", 2: "%V"},
    "e": {1: "%u"},
    "M": {1: "%-m", 2: "%m", 3: "%b", 4: "%B"},
    "d": {1: "%-d", 2: "%d"},
    "D": {1: "%-j", 3: "%j"},
    "E": {1: "%a", 4: "%A"},
    "a": {1: "%p"},
    "H": {1: "%-H", 2: "%H"},
    "h": {1: "%-I", 2: "%I"},
    "m": {1: "%-M", 2: "%M"},
    "s": {1: "%-S", 2: "%S"},
    "S": {3: "%g"},
    "G": {1: "AD"},
}
OFFSET = "\0offset:"  # a piece printing the zone's offset, then its separator
ZONE_NAME = "\0zone-name"  # a piece printing the zone's short name (PST, PDT, UTC)


def pieces(pattern: str) -> list[str]:
    """Literal text and strftime codes; zone letters become `OFFSET + separator` pieces."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            end = len(pattern) if end < 0 else end
            out.append(pattern[i + 1 : end].replace("%", "%%") or "'")
            i = end + 1
            continue
        count = 1
        while i + count < len(pattern) and pattern[i + count] == char:
            count += 1
        i += count
        if char == "Z":
            out.append(OFFSET + ("" if count == 1 else ":"))
        elif char == "z":
            out.append(ZONE_NAME)
        elif char in _CODES:
            codes = _CODES[char]
            if char == "S" and count != 3:
                raise QueryUnsupported(f"Joda pattern [{pattern}]: only SSS (milliseconds) is supported")
            out.append(
                codes[max(c for c in codes if c <= count)] if min(codes) <= count else codes[min(codes)]
            )
        elif char.isalpha():
            raise QueryUnsupported(f"Joda pattern letter [{char}] in [{pattern}] is not supported")
        else:
            out.append(char.replace("%", "%%"))
    return out


def strptime_format(pattern: str) -> str:
    """The strptime format reading `pattern` (zone letters are not readable)."""
    parts = pieces(pattern)
    if any(p.startswith(OFFSET) or p == ZONE_NAME for p in parts):
        raise QueryUnsupported(f"Parsing a zone from Joda pattern [{pattern}] is not supported")
    return "".join(p.replace("%-", "%") for p in parts)
