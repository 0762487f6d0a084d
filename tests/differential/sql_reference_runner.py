"""Run the reference-generated SQL (tests.differential.sql_reference_generator) through real brokers
and compare each result table with DuckDB's answer (tests.differential.sql_reference_oracle).

    python -m tests.differential sql-reference [--n 1000] [--seed 1] [--examples 2]

Every statement goes to a broker without cache and to one with the LRU cache, asked twice (cold,
then warm), on each chosen segmentation of the sample. A statement is *equal* when every answer
matches the oracle's table (column names, values with float tolerance, order only when its ORDER
BY determines it), *refused* when an answer is an error, *different* otherwise. The report counts
them by category, by how the session zone was set, and lists examples of each failure.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx

from harness.processes import StrataProcess
from tests.differential.fanout import Fanout
from tests.differential.sql_reference_generator import RefCase, generate_reference
from tests.differential.sql_reference_oracle import ReferenceOracle, Table, difference

OUTCOMES = ("equal", "different", "refused")


@dataclass
class Verdict:
    case: RefCase
    outcome: str  # equal | different | refused | oracle-error
    detail: str = ""
    target: str = ""


@dataclass
class RefOutcome:
    counts: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    by_zone: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    examples: dict[tuple[str, str], list[Verdict]] = field(default_factory=lambda: defaultdict(list))
    reasons: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    verdicts: list[Verdict] = field(default_factory=list)

    def add(self, verdict: Verdict, keep: int) -> None:
        cat = verdict.case.category
        self.counts[cat][verdict.outcome] += 1
        self.by_zone[verdict.case.zone_via][verdict.outcome] += 1
        self.verdicts.append(verdict)
        if verdict.outcome != "equal":
            self.reasons[cat][_reason(verdict.detail)] += 1
            self.reasons["(all)"][_reason(verdict.detail)] += 1
            if len(self.examples[(cat, verdict.outcome)]) < keep:
                self.examples[(cat, verdict.outcome)].append(verdict)

    def failing(self) -> set[str]:
        return {cat for cat, c in self.counts.items() if c["equal"] != sum(c.values())}

    def summary(self) -> str:
        head = f"{'category':34} {'run':>5} {'equal':>6} {'differ':>6} {'refused':>7} {'oracle':>6}  fail%"
        lines = [head]
        total: Counter[str] = Counter()
        for cat in sorted(self.counts, key=lambda k: (-_fail_rate(self.counts[k]), k)):
            c = self.counts[cat]
            total.update(c)
            lines.append(_row(cat, c))
        lines.append(_row("total", total))
        lines.append("")
        lines.append("by session zone: " + "; ".join(
            f"{via}: {sum(c.values())} run, {c['equal']} equal" for via, c in sorted(self.by_zone.items())))  # fmt: skip
        return "\n".join(lines)

    def report(self) -> str:
        """The summary, then per failing category its reasons and example statements."""
        out = [self.summary(), "", "== the commonest reasons, over all categories"]
        for reason, n in self.reasons["(all)"].most_common(12):
            cats = sorted(cat for cat, r in self.reasons.items() if cat != "(all)" and reason in r)
            out.append(f"   {n:4} x {reason}  [{len(cats)} categories: {', '.join(cats[:6])}]")
        out.append("")
        for cat in sorted(self.failing(), key=lambda k: (-_fail_rate(self.counts[k]), k)):
            c = self.counts[cat]
            out.append(f"== {cat}: {sum(c.values()) - c['equal']} of {sum(c.values())} fail")
            for reason, n in self.reasons[cat].most_common(4):
                out.append(f"   {n:4} x {reason}")
            for kind in ("refused", "different", "oracle-error"):
                for v in self.examples.get((cat, kind), []):
                    out.append(f"   [{kind} {v.case.id} {v.target} zone={v.case.zone} via {v.case.zone_via}]")
                    out.append(f"     {v.case.statement()}")
                    if kind == "different" or kind == "oracle-error":
                        out.append(f"     duckdb: {v.case.duck[:400]}")
                    out.append(f"     -> {v.detail[:400]}")
            out.append("")
        return "\n".join(out)


def _fail_rate(c: Counter[str]) -> float:
    run = sum(c.values())
    return (run - c["equal"]) / run if run else 0.0


def _row(cat: str, c: Counter[str]) -> str:
    run = sum(c.values())
    return (f"{cat:34} {run:5} {c['equal']:6} {c['different']:6} {c['refused']:7} {c['oracle-error']:6}  "
            f"{100 * _fail_rate(c):5.1f}")  # fmt: skip


def _reason(detail: str) -> str:
    """An error message or difference with its particulars blurred, to count alike failures."""
    match = re.match(r"HTTP (\d+): (.*)", detail, re.S)
    if match:
        try:
            body = json.loads(match.group(2))
            text = f"HTTP {match.group(1)} {body.get('errorMessage', body)}"
        except ValueError:
            text = detail
    else:
        text = re.sub(r"; got .*", "", detail, flags=re.S)
        text = re.sub(r"got ('[^']*'|\S+), expected ('[^']*'|\S+)", lambda m: f"got {_shape(m.group(1))}, "
                      f"expected {_shape(m.group(2))}", text)  # fmt: skip
        text = re.sub(r"(sorted )?row \d+", "row", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


def _shape(value: str) -> str:
    """The kind of a printed value: null, true/false, a number, an ISO time, or some text."""
    if value in ("None", "True", "False"):
        return value
    if re.fullmatch(r"-?\d+", value):
        return "an integer"
    if re.fullmatch(r"-?[\d.]+(e-?\d+)?", value):
        return "a decimal"
    if re.fullmatch(r"'\d{4}-\d\d-\d\dT[^']*'", value):
        return "ISO time " + re.sub(r"\d", "N", value)
    return "text"


def _table(resp: httpx.Response) -> Table | str:
    if resp.status_code != 200:
        return f"HTTP {resp.status_code}: {resp.text[:600]}"
    try:
        body: Any = resp.json()
    except ValueError:
        return f"HTTP 200 with a body that is not JSON: {resp.text[:200]}"
    if not isinstance(body, list) or not body or not isinstance(body[0], list):
        return f"HTTP 200 without a header row: {str(body)[:200]}"
    return Table([str(n) for n in body[0]], [list(r) for r in body[1:]])


def judge(case: RefCase, want: Table, answers: list[tuple[str, httpx.Response]]) -> Verdict:
    for label, resp in answers:
        got = _table(resp)
        if isinstance(got, str):
            return Verdict(case, "refused", got, label)
        diff = difference(want, got, case.types, case.ordered)
        if diff is not None:
            return Verdict(case, "different", f"{diff}; got {got.rows[:3]!r}", label)
    return Verdict(case, "equal")


def run_reference(n: int, seed: int, targets: dict[str, StrataProcess], oracle: ReferenceOracle,
                  datasources: list[str], *, examples: int = 2) -> RefOutcome:  # fmt: skip
    """`n` statements, each on every datasource through the plain broker and the LRU one (cold, warm)."""
    rnd = random.Random(seed)
    outcome = RefOutcome()
    chains = [[("plain", targets["plain"])], [("lru", targets["lru"]), ("lru-warm", targets["lru"])]]
    with Fanout(chains) as fanout:
        for i in range(n):
            template = generate_reference(rnd, datasources[0], i)
            try:
                want = oracle.answer(template.duck, template.names, template.types, template.zone)
            except Exception as exc:  # an oracle bug: counted apart, never blamed on the broker
                outcome.add(Verdict(template, "oracle-error", repr(exc)[:400]), examples)
                continue
            answers = []
            for ds in datasources:
                body = template.body()
                body["query"] = body["query"].replace(datasources[0], ds)
                answers += [(f"{label} {ds}", r) for label, r in fanout.post("/druid/v2/sql", body)]
            outcome.add(judge(template, want, answers), examples)
    return outcome
