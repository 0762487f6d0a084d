"""CI's share of the reference-generated SQL (tests.differential.sql_reference_generator): a fixed-seed
sample through a broker without cache and one with the LRU cache (cold, then warm), each result
table compared with DuckDB over the raw rows.

The SQL layer is being rewritten, so this is a ratchet: sql_reference_known_failures.json lists the
categories that fail today, each with its reason. A failure in a category outside the list fails
the test, and so does a listed category whose every statement now passes (take it off the list).
`python -m tests.differential sql-reference --n 2000` runs thousands and prints examples.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from tests.differential.runner import ingest_all, nodes
from tests.differential.sql_reference_generator import generate_reference
from tests.differential.sql_reference_oracle import ReferenceOracle, Table, difference, render
from tests.differential.sql_reference_runner import RefOutcome, run_reference

CI_STATEMENTS = 200
SEED = 5  # with CI_STATEMENTS, a sample holding every category (test_the_ci_sample_covers_every_category)
KNOWN = Path(__file__).with_name("sql_reference_known_failures.json")
DATASOURCE = "diff_hour"


def known_failures() -> dict[str, str]:
    known: dict[str, str] = json.loads(KNOWN.read_text())
    return known


@pytest.fixture(scope="module")
def outcome(
    tmp_path_factory: pytest.TempPathFactory, wikipedia_sample: Path, wikipedia_index_spec: Path
) -> RefOutcome:
    root = tmp_path_factory.mktemp("sql-reference")
    ingest_all(root, wikipedia_sample, wikipedia_index_spec, [DATASOURCE])
    with nodes(root, None, [DATASOURCE]) as targets:
        oracle = ReferenceOracle(wikipedia_sample, [DATASOURCE])
        return run_reference(CI_STATEMENTS, SEED, targets, oracle, [DATASOURCE], examples=1)


@pytest.mark.integration
def test_no_failure_outside_the_known_list(outcome: RefOutcome) -> None:
    new = outcome.failing() - set(known_failures())
    assert not new, f"new failing categories {sorted(new)}\n{outcome.report()}"


@pytest.mark.integration
def test_every_listed_category_still_fails(outcome: RefOutcome) -> None:
    fixed = {cat for cat in known_failures() if cat in outcome.counts and cat not in outcome.failing()}
    assert not fixed, (
        f"these now pass every sampled statement: remove them from {KNOWN.name}: {sorted(fixed)}"
    )


@pytest.mark.integration
def test_the_oracle_answers_every_statement(outcome: RefOutcome) -> None:
    errors = [v for v in outcome.verdicts if v.outcome == "oracle-error"]
    assert not errors, "\n".join(f"{v.case.druid}\n  {v.detail}" for v in errors[:5])


def test_the_known_list_names_generated_categories_with_reasons() -> None:
    import random

    rnd = random.Random(SEED)
    categories = {generate_reference(rnd, DATASOURCE, i).category for i in range(3000)}
    known = known_failures()
    assert set(known) <= categories, set(known) - categories
    assert all(reason.strip() for reason in known.values())


def test_the_ci_sample_covers_every_category() -> None:
    import random

    rnd = random.Random(SEED)
    sampled = {generate_reference(rnd, DATASOURCE, i).category for i in range(CI_STATEMENTS)}
    rnd = random.Random(1)
    every = {generate_reference(rnd, DATASOURCE, i).category for i in range(3000)}
    assert sampled == every, every - sampled


def test_printing_follows_the_session_zone() -> None:
    """Worked out by hand: 05:00 UTC is 22:00 the day before in Los Angeles (PDT, -07:00)."""
    moment = datetime(2015, 9, 12, 5, 0, 0, 123000)
    assert render(moment, "TIMESTAMP", "UTC") == "2015-09-12T05:00:00.123Z"
    assert render(moment, "TIMESTAMP", "America/Los_Angeles") == "2015-09-11T22:00:00.123-07:00"
    assert render(moment, "TIMESTAMP", "Asia/Kolkata") == "2015-09-12T10:30:00.123+05:30"
    assert render(moment.date(), "DATE", "Asia/Tokyo") == "2015-09-12T00:00:00.000+09:00"
    assert render(1, "BOOLEAN", "UTC") is True


def test_the_oracle_on_hand_computed_cases(wikipedia_sample: Path) -> None:
    oracle = ReferenceOracle(wikipedia_sample, ["w"])
    # the sample starts at 00:46:58.771 UTC: in Los Angeles every row before 07:00 UTC is on the 11th
    early = oracle.conn.execute("SELECT count(*) FROM raw WHERE ms < 1442041200000").fetchone()
    from tests.differential import sql_reference_oracle as o

    day = o.floor_to('"__time"', "DAY", "America/Los_Angeles")
    got = oracle.answer(f"SELECT {day} AS d, count(*) FROM w GROUP BY 1 ORDER BY 1", ["d", "c"],
                        ["TIMESTAMP", "BIGINT"], "America/Los_Angeles")  # fmt: skip
    assert early is not None
    assert got.rows[0] == ["2015-09-11T00:00:00.000-07:00", early[0]]
    assert got.rows[1][0] == "2015-09-12T00:00:00.000-07:00"
    # Druid's BIGINT division truncates toward zero (Java long division)
    assert oracle.conn.execute("SELECT (-7) // 2, 7 // 2").fetchone() == (-3, 3)


def test_tables_compare_by_name_value_and_order_when_determined() -> None:
    want = Table(["a", "b"], [[1, 0.1 + 0.2], [2, None]])
    assert difference(want, Table(["a", "b"], [[2, None], [1, 0.3]]), ["BIGINT", "DOUBLE"], False) is None
    assert difference(want, Table(["a", "b"], [[2, None], [1, 0.3]]), ["BIGINT", "DOUBLE"], True) is not None
    assert difference(want, Table(["a", "EXPR$1"], want.rows), ["BIGINT", "DOUBLE"], False) is not None
    assert difference(Table(["x"], [[True]]), Table(["x"], [[1]]), ["BOOLEAN"], False) is not None
