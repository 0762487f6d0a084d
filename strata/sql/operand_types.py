"""Druid SQL's types as its validator (Calcite) names them, for the operand checks of
`strata.sql.operand_checks`: a column's Druid type, a literal's or a call's result in Calcite's
terms (`BIGINT`, `CHAR(3)`, `DECIMAL(2, 1)`, `BIGINT ARRAY`, `COMPLEX<JSON>`), and the families
its operand checkers accept.

A type that cannot be worked out is `None`: the checks refuse only operands whose type is known.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from strata.query.druid_types import MULTI_VALUE_STRING


@dataclass(frozen=True)
class SqlType:
    """A Calcite type: a scalar (`name`), or an ARRAY of `element`."""

    name: str
    element: SqlType | None = None

    def __str__(self) -> str:
        return f"{self.element} ARRAY" if self.element is not None else self.name

    @property
    def is_array(self) -> bool:
        return self.element is not None

    @property
    def is_json(self) -> bool:
        return self.name == "COMPLEX<JSON>"

    @property
    def is_numeric(self) -> bool:
        return self.element is None and self.name.split("(")[0] in NUMERIC_NAMES

    @property
    def is_string(self) -> bool:
        return self.element is None and self.name.split("(")[0] in ("VARCHAR", "CHAR")

    @property
    def is_scalar(self) -> bool:
        """A value no array nor nested-JSON operand checker takes (NULL takes any type)."""
        return self.element is None and not self.is_json and self.name != "NULL"


NUMERIC_NAMES = frozenset(["TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "REAL", "DOUBLE", "DECIMAL"])
BIGINT = SqlType("BIGINT")
DOUBLE = SqlType("DOUBLE")
VARCHAR = SqlType("VARCHAR")
BOOLEAN = SqlType("BOOLEAN")
TIMESTAMP = SqlType("TIMESTAMP(3)")
JSON = SqlType("COMPLEX<JSON>")
NULL = SqlType("NULL")
_DRUID = {
    "LONG": BIGINT,
    "DOUBLE": DOUBLE,
    "FLOAT": SqlType("FLOAT"),
    "STRING": VARCHAR,
    MULTI_VALUE_STRING: VARCHAR,
    "COMPLEX<json>": JSON,
}


def array_of(element: SqlType) -> SqlType:
    return SqlType("ARRAY", element)


def of_druid(druid: str, name: str = "") -> SqlType | None:
    """The SQL type of a column of Druid type `druid` (`__time` is a TIMESTAMP)."""
    if name == "__time":
        return TIMESTAMP
    if druid.startswith("ARRAY<") and druid.endswith(">"):
        element = of_druid(druid[6:-1])
        return None if element is None or element.is_array else array_of(element)
    return _DRUID.get(druid)


def of_literal(node: exp.Expr) -> SqlType | None:
    """A literal's type as Calcite reads it: `1` INTEGER, `0.5` DECIMAL(1, 1), `'ab'` CHAR(2)."""
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Boolean):
        return BOOLEAN
    if not isinstance(node, exp.Literal):
        return None
    text = str(node.this)
    if node.is_string:
        return SqlType(f"CHAR({len(text)})")
    if "e" in text.lower():
        return DOUBLE
    if "." in text:
        whole, _, fraction = text.lstrip("-").partition(".")
        digits = len(whole.lstrip("0")) + len(fraction)
        return SqlType(f"DECIMAL({max(digits, len(fraction), 1)}, {len(fraction)})")
    return BIGINT if abs(int(text)) > 2**31 - 1 else SqlType("INTEGER")


_SQLGLOT_SCALARS = {
    exp.DType.BIGINT: "BIGINT",
    exp.DType.INT: "INTEGER",
    exp.DType.SMALLINT: "SMALLINT",
    exp.DType.TINYINT: "TINYINT",
    exp.DType.DOUBLE: "DOUBLE",
    exp.DType.FLOAT: "FLOAT",
    exp.DType.BOOLEAN: "BOOLEAN",
    exp.DType.VARCHAR: "VARCHAR",
    exp.DType.CHAR: "CHAR",
    exp.DType.TEXT: "VARCHAR",
    exp.DType.TIMESTAMP: "TIMESTAMP(3)",
    exp.DType.DATE: "DATE",
}


def of_data_type(kind: exp.DataType) -> SqlType | None:
    """The type a CAST or a RETURNING clause names."""
    if kind.this == exp.DType.ARRAY:
        inner = kind.expressions[0] if kind.expressions else None
        element = of_data_type(inner) if isinstance(inner, exp.DataType) else None
        return None if element is None else array_of(element)
    if kind.this == exp.DType.DECIMAL:
        return SqlType("DECIMAL(19, 0)")
    name = _SQLGLOT_SCALARS.get(kind.this)
    return None if name is None else SqlType(name)


def shown(kind: SqlType | None) -> str:
    """How a message prints one operand's type."""
    return f"<{kind if kind is not None else 'ANY'}>"
