"""The ratchet: the checked-in list of corpus cases that fail today, which may only shrink.

One line per case, `<case id>  <failure category>`; `#` lines are comments. A case that fails
and is not listed is a regression; a listed case that no longer fails must leave the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tests.sql_corpus.runner import Outcome

KNOWN_FAILURES = Path(__file__).parent / "known_failures.txt"
HEADER = (
    "# Druid quidem corpus cases that Strata fails today: `<case id>  <failure category>`.\n"
    "# The list may only shrink. Regenerate: python -m tests.sql_corpus --write-known-failures\n"
)


def read_known(path: Path = KNOWN_FAILURES) -> dict[str, str]:
    if not path.exists():
        return {}
    known = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            case_id, _, category = line.strip().partition("  ")
            known[case_id] = category.strip()
    return known


def write_known(outcomes: Sequence[Outcome], path: Path = KNOWN_FAILURES) -> None:
    lines = [f"{o.case.case_id}  {o.category}\n" for o in outcomes if o.status == "failed"]
    path.write_text(HEADER + "".join(lines), encoding="utf-8")


def ratchet_problems(outcomes: Sequence[Outcome], known: dict[str, str]) -> list[str]:
    """Regressions (failing, not listed) and stale entries (listed, not failing); empty when the list is right."""
    failing = {o.case.case_id: o for o in outcomes if o.status == "failed"}
    problems = [
        f"new failure {cid}: {o.category} - {o.detail[:200]}"
        for cid, o in failing.items()
        if cid not in known
    ]
    problems += [
        f"listed in known_failures.txt but does not fail now (remove it): {cid}"
        for cid in known
        if cid not in failing
    ]
    return problems
