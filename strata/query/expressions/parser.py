"""Druid's native expression language, parsed into a small immutable tree.

The grammar is Druid's (`Expr.g4`): literals (long, double, 'string', null), identifiers (bare or
"double-quoted"), unary `-` and `!`, then by decreasing precedence `^` (right-associative),
`* / %`, `+ -`, comparisons, `&&`, `||`, and function calls. Function names are case-insensitive,
as Druid looks them up in lower case. Array literals hold literals (`[1, 2]`, `['a', null]`, a
typed empty one `<LONG>[]`); a lambda (`(x, y) -> x + y`) is an argument of the apply functions
(`map`, `filter`, `fold`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from strata.query.errors import QueryUnsupported, invalid
from strata.query.regex_check import check_regex

MAX_LENGTH = 65_536
MAX_DEPTH = 200


@dataclass(frozen=True, slots=True)
class Literal:
    value: int | float | str | None


@dataclass(frozen=True, slots=True)
class Identifier:
    name: str


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-" or "!"
    arg: Node


@dataclass(frozen=True, slots=True)
class Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Call:
    name: str  # lower case
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class ArrayLiteral:
    elements: tuple[Literal, ...]
    element_type: str | None = None  # LONG, DOUBLE or STRING when written `<TYPE>[...]`


@dataclass(frozen=True, slots=True)
class Lambda:
    params: tuple[str, ...]
    body: Node


Node = Literal | Identifier | Unary | Binary | Call | ArrayLiteral | Lambda

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<double>(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)
  | (?P<long>\d+)
  | (?P<string>'(?:[^'\\]|\\.)*')
  | (?P<quoted>"(?:[^"\\]|\\.)*")
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<typed><(?:LONG|DOUBLE|STRING|long|double|string)>\s*\[)
  | (?P<op>->|<=|>=|==|!=|&&|\|\||[-+*/%^<>!(),\[\]])
    """,
    re.VERBOSE,
)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)")
_BINARY_POWER = {
    "||": 1,
    "&&": 2,
    "<": 3,
    "<=": 3,
    ">": 3,
    ">=": 3,
    "==": 3,
    "!=": 3,
    "+": 4,
    "-": 4,
    "*": 5,
    "/": 5,
    "%": 5,
    "^": 7,
}
_JAVA_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code[0] == "u" and len(code) == 5:
            return chr(int(code[1:], 16))
        return _JAVA_ESCAPES.get(code, code)

    return _ESCAPE.sub(one, text)


def _tokens(text: str) -> list[tuple[str, str, int]]:
    out: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise invalid("Invalid expression [%s]: unexpected character at position %d", text, pos)
        kind = m.lastgroup
        assert kind is not None
        if kind != "ws":
            out.append((kind, m.group(), pos))
        pos = m.end()
    out.append(("end", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0

    def fail(self, what: str) -> Exception:
        _, token, pos = self.tokens[self.i]
        shown = token or "end of input"
        return invalid("Invalid expression [%s]: %s at position %d (%s)", self.text, what, pos, shown)

    def peek(self) -> tuple[str, str, int]:
        return self.tokens[self.i]

    def take(self) -> tuple[str, str, int]:
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, value: str) -> None:
        if self.peek()[1] != value:
            raise self.fail(f"expected '{value}'")
        self.i += 1

    def expression(self, min_power: int = 0) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise invalid("Invalid expression: nested deeper than %d levels", MAX_DEPTH)
        left = self.prefix()
        while True:
            kind, op, _ = self.peek()
            power = _BINARY_POWER.get(op) if kind == "op" else None
            if power is None or power < min_power:
                break
            self.take()
            # `^` is right-associative; every other operator is left-associative
            right = self.expression(power if op == "^" else power + 1)
            left = Binary(op, left, right)
        self.depth -= 1
        return left

    def prefix(self) -> Node:
        kind, value, _ = self.take()
        if kind == "long":
            return Literal(int(value))
        if kind == "double":
            return Literal(float(value))
        if kind == "string":
            return Literal(_unescape(value[1:-1]))
        if kind == "quoted":
            return Identifier(_unescape(value[1:-1]))
        if kind == "ident":
            lowered = value.lower()
            if self.peek()[1] == "(":
                self.take()
                return Call(lowered, self.arguments())
            if value == "null":
                return Literal(None)
            if value == "NaN":
                return Literal(float("nan"))
            if value == "Infinity":
                return Literal(float("inf"))
            return Identifier(value)
        if value == "(":
            params = self._lambda_params()
            if params is not None:
                return Lambda(params, self.expression())
            inner = self.expression()
            self.expect(")")
            return inner
        if kind == "typed":
            return self._array(value[1 : value.index(">")].upper())
        if value in ("-", "!"):
            # Druid's grammar ranks unary operators above every binary one: -2^2 is (-2)^2
            arg = self.prefix()
            if value == "-" and isinstance(arg, Literal) and isinstance(arg.value, (int, float)):
                return Literal(-arg.value)
            return Unary(value, arg)
        if value == "[":
            return self._array(None)
        self.i -= 1
        raise self.fail("unexpected token")

    def _lambda_params(self) -> tuple[str, ...] | None:
        """After `(`: the parameters of a lambda (`(x, y) ->`), consumed with its `->`; else None
        and nothing consumed."""
        j, params = self.i, []
        while self.tokens[j][0] == "ident":
            params.append(self.tokens[j][1])
            j += 1
            if self.tokens[j][1] != ",":
                break
            j += 1
        if self.tokens[j][1] != ")" or self.tokens[j + 1][1] != "->":
            return None
        self.i = j + 2
        return tuple(params)

    def _array(self, element_type: str | None) -> ArrayLiteral:
        """After `[`: literals up to `]` (Druid's array literals hold no expressions)."""
        elements: list[Literal] = []
        if self.peek()[1] == "]":
            self.take()
            return ArrayLiteral((), element_type)
        while True:
            element = self.prefix()
            if not isinstance(element, Literal):
                raise QueryUnsupported(f"Array literals hold literals only: [{self.text}]")
            elements.append(element)
            if self.peek()[1] == ",":
                self.take()
                continue
            self.expect("]")
            return ArrayLiteral(tuple(elements), element_type)

    def arguments(self) -> tuple[Node, ...]:
        args: list[Node] = []
        if self.peek()[1] == ")":
            self.take()
            return ()
        while True:
            args.append(self.expression())
            if self.peek()[1] == ",":
                self.take()
                continue
            self.expect(")")
            return tuple(args)


def parse_expression(text: str) -> Node:
    """The tree of one Druid expression; a syntax error is an InvalidInput naming the position."""
    if not isinstance(text, str) or not text.strip():
        raise invalid("Expression must be a non-empty string")
    if len(text) > MAX_LENGTH:
        raise invalid("Expression is longer than %d characters", MAX_LENGTH)
    parser = _Parser(text)
    node = parser.expression()
    if parser.peek()[0] != "end":
        raise parser.fail("unexpected token")
    _check_patterns(node)
    return node


# functions whose argument at that position is a regular expression: checked where the query is
# parsed (the broker), as Druid checks them at planning, not first on a data node
_PATTERN_ARGUMENT = {"regexp_extract": 1, "regexp_like": 1, "regexp_replace": 1}


def _check_patterns(node: Node) -> None:
    for n in walk(node):
        if isinstance(n, Call) and (at := _PATTERN_ARGUMENT.get(n.name)) is not None and len(n.args) > at:
            pattern = n.args[at]
            if isinstance(pattern, Literal) and isinstance(pattern.value, str):
                check_regex(pattern.value, f"function [{n.name}]")


def walk(node: Node) -> Iterator[Node]:
    """Every node of an expression's tree, without recursion (a deeply nested one is valid input)."""
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(children(n))


def identifiers(node: Node) -> set[str]:
    """Every column an expression reads (a lambda's parameters are not columns)."""
    found: set[str] = set()
    stack: list[tuple[Node, frozenset[str]]] = [(node, frozenset())]
    while stack:
        n, bound = stack.pop()
        if isinstance(n, Identifier):
            if n.name not in bound:
                found.add(n.name)
        elif isinstance(n, Lambda):
            stack.append((n.body, bound | set(n.params)))
        else:
            stack.extend((child, bound) for child in children(n))
    return found


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Unary):
        return (node.arg,)
    if isinstance(node, Binary):
        return (node.left, node.right)
    if isinstance(node, Call):
        return node.args
    if isinstance(node, ArrayLiteral):
        return node.elements
    if isinstance(node, Lambda):
        return (node.body,)
    return ()
