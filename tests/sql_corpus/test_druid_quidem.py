"""Druid's own SQL tests (its quidem files) against a real broker and historical, as a ratchet.

Every case that fails must be listed in known_failures.txt, and every listed case must still fail:
a new failure is a regression, a fixed one must leave the list (so the list only shrinks). The
total and the failure categories are printed on every run (`python -m tests.sql_corpus` prints
the per-file table).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.sql_corpus.cluster import corpus_cluster
from tests.sql_corpus.ratchet import ratchet_problems, read_known
from tests.sql_corpus.runner import corpus_cases, failure_categories, run_cases, summary_table

pytestmark = pytest.mark.integration


def test_druid_quidem_corpus_fails_only_the_listed_cases(
    tmp_path_factory: pytest.TempPathFactory, record_property: Callable[[str, object], None]
) -> None:
    cases = corpus_cases()
    assert len(cases) > 50, "the corpus files are missing"
    with corpus_cluster(tmp_path_factory.mktemp("sql-corpus")) as broker:
        outcomes = run_cases(broker.url, cases, time_bound=150)
    # the pass rate is shown on every run, not only on failure (tests/conftest.py prints it)
    table = summary_table(outcomes).splitlines()
    categories = [f"{n:5}  {category}" for category, n in failure_categories(outcomes)]
    record_property("shown", "\n".join([table[0], table[-1], *categories]))
    problems = ratchet_problems(outcomes, read_known())
    assert not problems, (
        "the corpus moved (regenerate the list with `python -m tests.sql_corpus --write-known-failures` "
        "once every change is intended):\n" + "\n".join(problems)
    )
