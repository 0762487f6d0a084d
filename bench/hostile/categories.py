"""Hostile SQL requests by category, as fuzzing found them (issue 26): each is what a client could
send, with the status Druid's rules give it (400 for anything malformed, whatever it is)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from bench.hostile.request import Hostile
from strata.sql.guard import MAX_NESTING

PREDICATE = "added > 100"
FIELDS_OF_TYPE: dict[str, list[Any]] = {
    "query": [5, None, [], {}, True],
    "context": ["x", 5, [], True, ["sqlQueryId", "a"]],
    "parameters": ["x", 5, {}, True, [{"type": "VARCHAR", "value": {"a": 1}}]],
    "resultFormat": [5, [], {}, True],
    "header": ["yes", 2, [], {}],
    "typesHeader": ["no", 7, [True]],
    "sqlTypesHeader": [{}, 3.5],
}


def nested(rnd: random.Random, depth: int) -> str:
    """A predicate nested `depth` levels by a random mix of parentheses, NOT pairs, CASE and calls."""
    text = PREDICATE
    for _ in range(depth):
        text = rnd.choice(
            ["({})", "NOT NOT {}", "CASE WHEN {} THEN TRUE ELSE FALSE END", "COALESCE({}, FALSE)"]
        ).format(text)
    return f"SELECT COUNT(*) AS c FROM wikipedia WHERE {text}"


def _deep(rnd: random.Random) -> Hostile:
    depth = rnd.choice([MAX_NESTING + 1, 100, 1000, rnd.randint(MAX_NESTING + 1, 5000)])
    shape = rnd.choice(["(", "NOT ", "- ", "ABS(", "CASE WHEN TRUE THEN ", "(SELECT ", "ARRAY["])
    closer = {"(": ")", "ABS(": ")", "(SELECT ": ")", "ARRAY[": "]", "CASE WHEN TRUE THEN ": " END"}.get(
        shape, ""
    )
    inner = "added" if shape in ("- ", "ABS(", "CASE WHEN TRUE THEN ", "ARRAY[") else PREDICATE
    where = "" if shape in ("- ", "ABS(", "CASE WHEN TRUE THEN ", "ARRAY[") else " WHERE "
    body = shape * depth + inner + closer * depth
    sql = f"SELECT COUNT(*) FROM wikipedia{where}{body}" if where else f"SELECT {body} FROM wikipedia"
    return Hostile("deep nesting", {"json": {"query": sql}})


def _not_chain(rnd: random.Random) -> Hostile:
    n = rnd.choice([MAX_NESTING + 2, 1000, 10_000, rnd.randint(MAX_NESTING + 2, 50_000)])
    op = rnd.choice(["NOT ", "NOT(", "- ", "+ ", "~ ", "NOT -"])
    sql = f"SELECT COUNT(*) FROM wikipedia WHERE {op * n}{PREDICATE}"
    return Hostile("NOT chains", {"json": {"query": sql}})


def _in_list(rnd: random.Random) -> Hostile:
    items = rnd.choice([1_000, 20_000, 200_000, 1_000_000])
    values = ",".join(f"'v{i}'" for i in range(items))
    sql = f"SELECT COUNT(*) AS c FROM wikipedia WHERE channel IN ('#en.wikipedia',{values})"
    return Hostile("huge IN lists", {"json": {"query": sql}}, (200,) if items <= 20_000 else (400,))


def _control_id(rnd: random.Random) -> Hostile:
    bad = chr(rnd.choice([*range(0, 32), 127, 0x85, 0x9F, 0x2028, 0xFEFF, 0x1F600]))
    at = rnd.randint(0, 8)
    query_id = ("query-id"[:at] + bad + "query-id"[at:]) if rnd.random() < 0.9 else "x" * 5000
    sql = rnd.choice(["SELECT 1 AS one", "SELECT COUNT(*) AS c FROM wikipedia"])
    return Hostile("control characters in ids", {"json": {"query": sql, "context": {"sqlQueryId": query_id}}})


def _wrong_type(rnd: random.Random) -> Hostile:
    name = rnd.choice(sorted(FIELDS_OF_TYPE))
    body: dict[str, Any] = {"query": "SELECT 1 AS one", name: rnd.choice(FIELDS_OF_TYPE[name])}
    if rnd.random() < 0.2:
        return Hostile("wrong JSON types", {"json": rnd.choice([[body], "SELECT 1", 5, None, True])})
    return Hostile("wrong JSON types", {"json": body})


def _garbage(rnd: random.Random) -> Hostile:
    data = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 3000)))
    kind = rnd.choice(["application/json", "text/plain", "application/x-www-form-urlencoded", ""])
    if rnd.random() < 0.3:  # a valid start, then garbage
        data = b'{"query": "SELECT ' + data
    if kind == "text/plain" and rnd.random() < 0.5:  # NULs and controls inside a statement
        data = b"SELECT COUNT(*) FROM wikipedia WHERE channel = '" + data.replace(b"'", b"") + b"'"
        return Hostile("garbage bytes", {"content": data, "headers": {"Content-Type": kind}}, (200, 400))
    return Hostile("garbage bytes", {"content": data, "headers": {"Content-Type": kind} if kind else {}})


CATEGORIES = {
    "deep nesting": _deep,
    "NOT chains": _not_chain,
    "huge IN lists": _in_list,
    "control characters in ids": _control_id,
    "wrong JSON types": _wrong_type,
    "garbage bytes": _garbage,
}


def hostile_requests(rnd: random.Random, per_category: int) -> Iterator[Hostile]:
    """`per_category` requests of each category (huge IN lists: a few, they take seconds each)."""
    for name, make in CATEGORIES.items():
        for _ in range(per_category if name != "huge IN lists" else min(per_category, 4)):
            yield make(rnd)
