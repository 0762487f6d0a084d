"""Run the corpus's cases through a broker's SQL API and tally them per file.

Each `!ok` statement is sent to `POST /druid/v2/sql/` with its file's `!set` values as the query
context (all but quidem's own `outputformat`) and compared with its expected table; each `!error`
statement must be refused with a client error (a 500 is a failure). A failure gets a short
category (an error's kind, or which part of the answer differs) so the ratchet list and the report
can group them.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from tests.sql_corpus.compare import compare
from tests.sql_corpus.quidem import Case, read_cases
from tests.sql_corpus.skips import skip_reason

CORPUS = Path(__file__).parent / "druid_quidem"
QUIDEM_ONLY_SETTINGS = frozenset({"outputformat"})


@dataclass(frozen=True)
class Outcome:
    case: Case
    status: Literal["passed", "failed", "skipped"]
    category: str = ""  # failed: kind of failure; skipped: the reason
    detail: str = ""


def corpus_cases(directory: Path = CORPUS) -> list[Case]:
    return [c for path in sorted(directory.glob("*.iq")) for c in read_cases(path)]


def query_context(settings: dict[str, str] | Any) -> dict[str, Any]:
    def typed(value: str) -> Any:
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        if re.fullmatch(r"-?\d+", value):
            return int(value)
        return value

    return {k: typed(v) for k, v in settings.items() if k not in QUIDEM_ONLY_SETTINGS}


def _error_category(status: int, body: Any) -> str:
    """`HTTP 400 <errorCode>: <message with literals and numbers blanked>`, cut short."""
    if not isinstance(body, dict):
        return f"HTTP {status}"
    code = body.get("errorCode") or body.get("error") or ""
    message = str(body.get("errorMessage") or body.get("error") or "")
    message = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "[..]", message.splitlines()[0] if message else "")
    # a bracketed name stays (`Function [TIME_FLOOR]`), a bracketed statement fragment keeps its head
    message = re.sub(
        r"\[(\(?[\w$]+(?: [A-Z]+)*)([^\]]*)\]",
        lambda m: f"[{m.group(1)}..]" if m.group(2) else m.group(0),
        message,
    )
    message = re.sub(r"\d+", "N", message)
    return f"HTTP {status} {code}: {message[:90]}".rstrip(": ")


def run_case(client: httpx.Client, broker_url: str, case: Case, *, skips: bool = True) -> Outcome:
    """One case's outcome; `skips=False` runs every case (Druid's QA files: nothing is skipped)."""
    reason = skip_reason(case) if skips else None
    if reason is not None:
        return Outcome(case, "skipped", reason)
    body = {
        "query": case.sql,
        "context": query_context(case.settings),
        "resultFormat": "array",
        "header": True,
        "typesHeader": True,
    }
    try:
        resp = client.post(f"{broker_url}/druid/v2/sql/", json=body)
    except httpx.HTTPError as e:
        return Outcome(case, "failed", f"no answer: {type(e).__name__}", str(e)[:300])
    try:
        payload = resp.json()
    except ValueError:
        payload = None
    if case.kind == "error":
        if resp.status_code == 500:  # Druid refuses with a client error; a server error is a failure
            return Outcome(case, "failed", _error_category(500, payload), resp.text[:300])
        if resp.status_code != 200 or (isinstance(payload, dict) and "error" in payload):
            return Outcome(case, "passed")
        return Outcome(case, "failed", "answered where Druid refuses", resp.text[:300])
    if resp.status_code != 200 or not isinstance(payload, list) or len(payload) < 2:
        return Outcome(case, "failed", _error_category(resp.status_code, payload), resp.text[:300])
    assert case.expected is not None
    columns, rows = [str(c) for c in payload[0]], [_as_printed(payload[1], row) for row in payload[2:]]
    diff = compare(case.sql, case.expected, columns, rows)
    if diff is None:
        return Outcome(case, "passed")
    return Outcome(case, "failed", f"wrong answer: {diff.split(':')[0]}", diff[:300])


def _as_printed(types: list[Any], row: list[Any]) -> list[Any]:
    """A row as quidem holds it: a COMPLEX<json> value that is a JSON string is printed as JSON,
    in quotes (`"S1"`), where the SQL API's JSON answer holds the string itself."""
    return [
        json.dumps(v) if t == "COMPLEX<json>" and isinstance(v, str) else v
        for t, v in zip(types, row, strict=True)
    ]


def run_cases(broker_url: str, cases: Iterable[Case], *, time_bound: float = 240.0) -> list[Outcome]:
    """Every case in order; once `time_bound` seconds are spent, the rest fail as not run."""
    deadline = time.monotonic() + time_bound
    out = []
    with httpx.Client(timeout=30.0) as client:
        for case in cases:
            if time.monotonic() > deadline:
                out.append(Outcome(case, "failed", "not run: the runner's time bound was reached"))
            else:
                out.append(run_case(client, broker_url, case))
    return out


def summary_table(outcomes: Sequence[Outcome]) -> str:
    """Per file: statements run, passed, failed, pass rate, and skips by reason; then the total."""
    by_file: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        by_file[o.case.file].append(o)
    width = max([len(f) for f in by_file] + [5])
    lines = [f"{'file':<{width}}  {'run':>4} {'passed':>6} {'failed':>6} {'rate':>6}  skipped"]

    def row(name: str, group: Sequence[Outcome]) -> str:
        tally = Counter(o.status for o in group)
        run = tally["passed"] + tally["failed"]
        rate = f"{100 * tally['passed'] / run:.0f}%" if run else "-"
        skips = Counter(o.category for o in group if o.status == "skipped")
        skipped = "; ".join(f"{n} {why}" for why, n in sorted(skips.items())) or "0"
        return f"{name:<{width}}  {run:>4} {tally['passed']:>6} {tally['failed']:>6} {rate:>6}  {skipped}"

    lines += [row(name, group) for name, group in sorted(by_file.items())]
    lines.append(row("TOTAL", outcomes))
    return "\n".join(lines)


def failure_categories(outcomes: Sequence[Outcome]) -> list[tuple[str, int]]:
    return Counter(o.category for o in outcomes if o.status == "failed").most_common()
