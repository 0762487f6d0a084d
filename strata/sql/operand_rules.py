"""Which operand types Druid's SQL validator takes for each operator and function, and the type a
call gives (what the checks of `strata.sql.operand_checks` need of it).

An operand is one of: a scalar (numbers, strings, times: never an ARRAY nor a nested JSON), an
array (an ARRAY, or a string as a multi-value string), a multi-value operand (anything but a nested
JSON value: a scalar is a one-value row), an ARRAY proper, an array's element (a scalar), or
anything.
Strings and numbers convert to each other implicitly, as in Druid, so they are never refused for
one another.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from strata.sql.operand_types import BIGINT, BOOLEAN, DOUBLE, NULL, TIMESTAMP, VARCHAR, SqlType, array_of

Kinds = Sequence[SqlType | None]
Operand = Literal[
    "scalar", "string", "timestamp", "array", "element", "mv", "mv_string", "literal_array", "any"
]


def _refused(operand: Operand, kind: SqlType | None) -> bool:
    if kind is None or kind.name == "NULL":
        return False
    if operand in ("scalar", "element"):
        return kind.is_array or kind.is_json
    if operand == "timestamp":  # numbers do not convert to times implicitly
        return kind.is_array or kind.is_json or kind.is_numeric
    if operand == "string":  # a Druid operator's CHARACTER operand: numbers do not convert to it
        return kind.is_array or kind.is_json or kind.is_numeric
    if operand == "array":
        return not (kind.is_array or kind.is_string)
    if operand == "mv":  # a multi-value string, an array, or a scalar read as a one-value one
        return kind.is_json
    if operand == "mv_string":  # the same, but no number: most MV_ functions take STRING there
        return kind.is_json or kind.is_numeric
    if operand == "literal_array":
        return not kind.is_array
    return False


@dataclass(frozen=True)
class Rule:
    """One operator's operand checker: `operands` (the last one repeats), or a `check` of its own."""

    operands: tuple[Operand, ...]
    supported: str
    form: Literal["call", "binary", "between"] = "call"
    shown: str | None = None
    message: str | None = None  # Druid's own wording where it is not Calcite's
    check: Callable[[Kinds], bool] | None = None

    def refuses(self, kinds: Kinds) -> bool:
        if self.check is not None:
            return self.check(kinds)
        last = self.operands[-1] if self.operands else "any"
        return any(
            _refused(self.operands[i] if i < len(self.operands) else last, kind)
            for i, kind in enumerate(kinds)
        )


def _form(name: str, families: Sequence[str]) -> str:
    return f"'{name}(" + ", ".join(f"<{f}>" for f in families) + ")'"


def _scalar(name: str, *families: str) -> Rule:
    return Rule(("scalar",), _form(name, families))


NUMERIC_1 = [
    "ABS",
    "EXP",
    "LN",
    "LOG10",
    "SQRT",
    "SIN",
    "COS",
    "TAN",
    "COT",
    "ASIN",
    "ACOS",
    "ATAN",
    "DEGREES",
    "RADIANS",
    "BITWISE_COMPLEMENT",
    "BITWISE_CONVERT_DOUBLE_TO_LONG_BITS",
    "BITWISE_CONVERT_LONG_BITS_TO_DOUBLE",
    "HUMAN_READABLE_BINARY_BYTE_FORMAT",
    "HUMAN_READABLE_DECIMAL_BYTE_FORMAT",
    "HUMAN_READABLE_DECIMAL_FORMAT",
]
NUMERIC_2 = [
    "POWER",
    "MOD",
    "ATAN2",
    "LOGN",
    "BITWISE_AND",
    "BITWISE_OR",
    "BITWISE_XOR",
    "BITWISE_SHIFT_LEFT",
    "BITWISE_SHIFT_RIGHT",
    "SAFE_DIVIDE",
    "TRUNCATE",
    "TRUNC",
    "ROUND",
]
STRINGS = [
    "LENGTH",
    "CHAR_LENGTH",
    "CHARACTER_LENGTH",
    "STRLEN",
    "LOWER",
    "UPPER",
    "PARSE_LONG",
    "REGEXP_EXTRACT",
    "REGEXP_LIKE",
    "CONTAINS_STRING",
    "ICONTAINS_STRING",
    "REPLACE",
    "STRPOS",
    "SUBSTRING",
    "SUBSTR",
    "RIGHT",
    "LEFT",
    "TRIM",
    "BTRIM",
    "LTRIM",
    "RTRIM",
    "REVERSE",
    "REPEAT",
    "LPAD",
    "RPAD",
    "TEXTCAT",
    "PARSE_JSON",
    "TRY_PARSE_JSON",
    "STRING_TO_ARRAY",
    "STRING_TO_MV",
]
TIMES: dict[str, tuple[Operand, ...]] = {
    "TIME_FLOOR": ("timestamp", "scalar"),
    "TIME_CEIL": ("timestamp", "scalar"),
    "TIME_SHIFT": ("timestamp", "scalar"),
    "TIME_EXTRACT": ("timestamp", "scalar"),
    "TIME_FORMAT": ("timestamp", "scalar"),
    "TIME_IN_INTERVAL": ("timestamp", "scalar"),
    "TIMESTAMP_TO_MILLIS": ("timestamp",),
    "DATE_TRUNC": ("timestamp",),
    "EXTRACT": ("timestamp",),
    "FLOOR TO": ("timestamp",),
    "CEIL TO": ("timestamp",),
    "TIMESTAMPADD": ("scalar", "timestamp"),
    "TIMESTAMPDIFF": ("timestamp", "timestamp"),
    "TIME_PARSE": ("string", "scalar"),
    "MILLIS_TO_TIMESTAMP": ("scalar",),
    "FLOOR": ("scalar",),
    "CEIL": ("scalar",),
}
IP_ADDRESSES = ["IPV4_MATCH", "IPV4_PARSE", "IPV4_STRINGIFY", "IPV6_MATCH"]
AGGREGATES = [
    "SUM",
    "AVG",
    "BIT_AND",
    "BIT_OR",
    "BIT_XOR",
    "APPROX_COUNT_DISTINCT",
    "APPROX_COUNT_DISTINCT_BUILTIN",
]
COMPARABLE = ["GREATEST", "LEAST"]
ARRAY_FUNCTIONS: dict[str, tuple[Operand, ...]] = {
    "ARRAY_LENGTH": ("mv",),
    "ARRAY_OFFSET": ("array", "scalar"),
    "ARRAY_ORDINAL": ("array", "scalar"),
    "ARRAY_CONTAINS": ("array", "any"),
    "ARRAY_OVERLAP": ("array", "array"),
    "ARRAY_OFFSET_OF": ("array", "element"),
    "ARRAY_ORDINAL_OF": ("array", "element"),
    "ARRAY_PREPEND": ("element", "array"),
    "ARRAY_APPEND": ("array", "element"),
    "ARRAY_CONCAT": ("array", "array"),
    "ARRAY_SLICE": ("array", "scalar", "scalar"),
    "ARRAY_TO_STRING": ("array", "scalar"),
    "ARRAY_TO_MV": ("mv",),
    "ARRAY_CONCAT_AGG": ("array",),
}
# each ARRAY_ function's MV_ twin takes a multi-value operand where it takes an array
ARRAY_FUNCTIONS.update(
    {
        "MV_" + name.removeprefix("ARRAY_"): tuple("mv" if o == "array" else o for o in operands)
        for name, operands in list(ARRAY_FUNCTIONS.items())
        if name not in ("ARRAY_TO_MV", "ARRAY_CONCAT_AGG")
    }
)
ARRAY_FUNCTIONS.update(  # Druid's MV_ operators type their multi-value operands STRING (MV_LENGTH,
    # and MV_OVERLAP's second, take numbers too): qaUnnest mv_sql_mv_funcs.std refuses MV_X(c_long)
    {
        name: tuple("mv_string" if o == "mv" and i == 0 else o for i, o in enumerate(operands))
        for name, operands in ARRAY_FUNCTIONS.items()
        if name.startswith("MV_") and name not in ("MV_LENGTH", "MV_PREPEND", "MV_APPEND", "MV_CONCAT")
    }
)
ARRAY_FUNCTIONS.update(
    {
        "MV_PREPEND": ("string", "mv_string"),
        "MV_APPEND": ("mv_string", "string"),
        "MV_CONCAT": ("mv_string", "mv_string"),
        "MV_TO_ARRAY": ("mv",),
        "MV_FILTER_ONLY": ("scalar", "literal_array"),
        "MV_FILTER_NONE": ("scalar", "literal_array"),
    }
)


_FAMILIES = {
    "timestamp": "TIMESTAMP",
    "array": "ARRAY",
    "literal_array": "ARRAY",
    "mv": "STRING",
    "mv_string": "STRING",
    "string": "CHARACTER",
    "scalar": "ANY",
    "element": "ANY",
    "any": "ANY",
}


def _comparison(kinds: Kinds) -> bool:
    """`=` and `<>`: an array beside a scalar or a nested JSON value."""
    a, b = kinds[0], kinds[1]
    if a is None or b is None or "NULL" in (a.name, b.name):
        return False
    return a.is_array != b.is_array and (a.is_json or b.is_json)


def _ordering(kinds: Kinds) -> bool:
    """`<`, BETWEEN: a nested JSON value on either side, or an array beside what is none."""
    known = [k for k in kinds if k is not None and k.name != "NULL"]
    return any(k.is_json for k in known) or _comparison(kinds)


def _arithmetic(kinds: Kinds) -> bool:
    return any(k is not None and (k.is_array or k.is_json) for k in kinds)


def _rules() -> dict[str, Rule]:
    rules: dict[str, Rule] = {}
    for name in NUMERIC_1:
        rules[name] = _scalar(name, "NUMERIC")
    for name in NUMERIC_2:
        rules[name] = _scalar(name, "NUMERIC", "NUMERIC")
    for name in STRINGS + IP_ADDRESSES:
        rules[name] = _scalar(name, "STRING")
    for name, operands in {**TIMES, **ARRAY_FUNCTIONS}.items():
        rules[name] = Rule(operands, _form(name, [_FAMILIES[o] for o in operands]), shown=name.split()[0])
    for name in AGGREGATES:
        rules[name] = _scalar(name, "NUMERIC")
    for name in ("MIN", "MAX"):
        refused = f"Aggregation [{name}] does not support ARRAY or COMPLEX<JSON> values"
        rules[name] = Rule(("scalar",), _form(name, ["COMPARABLE_TYPE"]), message=refused)
    for name in COMPARABLE:
        rules[name] = _scalar(name, "COMPARABLE_TYPE")
    comparable = "'<COMPARABLE_TYPE> {} <COMPARABLE_TYPE>'"
    for op in ("=", "<>"):
        rules[op] = Rule((), comparable.format(op), "binary", check=_comparison)
    for op in ("<", "<=", ">", ">="):
        rules[op] = Rule((), comparable.format(op), "binary", check=_ordering)
    for op in ("+", "-", "*", "/", "||"):
        family = "STRING" if op == "||" else "NUMERIC"
        rules[op] = Rule((), f"'<{family}> {op} <{family}>'", "binary", check=_arithmetic)
    rules["CONCAT"] = Rule(
        ("scalar",), "'CONCAT(<STRING>, ...)'", message="Parameters must be of the same type"
    )
    rules["LIKE"] = Rule(("scalar",), "'LIKE(<STRING>, <STRING>)'")
    rules["BETWEEN ASYMMETRIC"] = Rule(
        (), "'<COMPARABLE_TYPE> BETWEEN <COMPARABLE_TYPE> AND <COMPARABLE_TYPE>'", "between", check=_ordering
    )
    return rules


RULES = _rules()


_ARRAY_RESULTS = frozenset(
    [
        "ARRAY_APPEND",
        "ARRAY_PREPEND",
        "ARRAY_CONCAT",
        "ARRAY_SLICE",
        "MV_APPEND",
        "MV_PREPEND",
        "MV_CONCAT",
        "MV_SLICE",
    ]
)


def result_type(name: str, kinds: Kinds) -> SqlType | None:
    """The type a call of `name` over operands of `kinds` gives, where the checks need it."""
    if name in ("MV_TO_ARRAY", "STRING_TO_ARRAY"):
        return array_of(VARCHAR)
    if name == "ARRAY":  # ARRAY[NULL, NULL] is a NULL ARRAY, as in Calcite
        element = next((k for k in kinds if k is None or k.name != "NULL"), NULL if kinds else None)
        return None if element is None or element.is_array else array_of(element)
    if name in _ARRAY_RESULTS:
        array = next((k for k in kinds if k is not None and k.is_array), None)
        if array is not None:
            return array
        return VARCHAR if name.startswith("MV_") else None
    if name == "ARRAY_AGG":
        return array_of(kinds[0]) if kinds and kinds[0] is not None and not kinds[0].is_array else None
    if name == "ARRAY_CONCAT_AGG":
        return kinds[0] if kinds and kinds[0] is not None and kinds[0].is_array else None
    if name in ("JSON_QUERY", "PARSE_JSON", "TRY_PARSE_JSON", "JSON_OBJECT"):
        return SqlType("COMPLEX<JSON>")
    if name in ("ARRAY_TO_MV", "MV_TO_STRING", "ARRAY_TO_STRING", "STRING_AGG", "TO_JSON_STRING"):
        return VARCHAR
    if name.startswith("HUMAN_READABLE_"):  # a formatted number: `+` casts it back to DOUBLE
        return VARCHAR
    if name in ("CEIL", "FLOOR") and kinds and kinds[0] is not None and kinds[0].is_numeric:
        return kinds[0]  # Calcite's ARG0: CEIL of a BIGINT is a BIGINT
    if name in ("ARRAY_LENGTH", "MV_LENGTH", "COUNT", "STRLEN", "LENGTH", "TIMESTAMP_TO_MILLIS"):
        return BIGINT
    if name in ("TIME_FLOOR", "TIME_CEIL", "TIME_SHIFT", "TIME_PARSE", "MILLIS_TO_TIMESTAMP", "DATE_TRUNC"):
        return TIMESTAMP
    if name in ("ARRAY_CONTAINS", "ARRAY_OVERLAP", "MV_CONTAINS", "MV_OVERLAP", *_PREDICATES):
        return BOOLEAN
    if name in NUMERIC_1 and name not in ("ABS",) and not name.startswith("HUMAN"):
        return DOUBLE
    if name in ("MIN", "MAX", "ANY_VALUE", "EARLIEST", "LATEST", "COALESCE", "NULLIF") and kinds:
        return kinds[0]
    return None


_PREDICATES = ("=", "<>", "<", "<=", ">", ">=", "LIKE", "BETWEEN ASYMMETRIC", "AND", "OR", "NOT")
