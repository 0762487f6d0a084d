"""Druid's QA SQL files (quidem-ut `qaAggFuncs`, `qaArray`, `qaUnnest`): all of them are here, every
dataset they read loads through Strata's ingestion of Druid's own spec, and their statements run
against real clusters with the recorded pass rates as a floor.

The datasets are checked against Druid's published answers: most files start with a statement
(`SEL_DATASOURCE`) that counts or lists the dataset's rows. Against real clusters the default run
asks the counting ones (`SELECT count(*) cnt FROM <table>`; for the two `qaUnnest` datasets,
whose files list their rows instead, that count with Druid's row count: 90 statements over all 12
datasets, a cluster each), which must all pass; with `STRATA_QA_CORPUS=all` it runs all 19,991
statements (what `python -m tests.sql_corpus --qa` runs to record `qa_pass_rates.json`; too long
for every CI run), and then no folder, nor either variant group (the native engine's `.all` /
`.std` files, Druid's MSQ and Dart engines' `.msq` / `.dart`), may pass fewer statements than
recorded.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from tests.sql_corpus.qa import (
    QA_FOLDERS,
    QA_RATES,
    QA_ROOT,
    VARIANT_GROUPS,
    dataset_of,
    folder_table,
    ingest_dataset,
    qa_cases,
    rates,
    run_qa,
    variant_group,
)
from tests.sql_corpus.quidem import Case, Table

COMMIT = "a4d4921157348d2c344ab723a072a52d42260fec"
FILES = {"qaAggFuncs": 78, "qaArray": 185, "qaUnnest": 221}
STATEMENTS = {"qaAggFuncs": 2273, "qaArray": 8640, "qaUnnest": 9078}


@pytest.fixture(scope="module")
def cases() -> list[Case]:
    return qa_cases()


def test_every_file_of_the_three_folders_is_here(cases: list[Case]) -> None:
    for folder in QA_FOLDERS:
        files = sorted((QA_ROOT / folder).glob("*.iq"))
        assert len(files) == FILES[folder], folder
        for path in files:
            first = path.read_text(encoding="utf-8").splitlines()[0]
            upstream = f"quidem-ut/src/test/quidem/org.apache.druid.quidem.QTest/{folder}/{path.name}"
            assert first == f"# Source: apache/druid {upstream} @ {COMMIT}", path
    assert Counter(c.file.split("/")[0] for c in cases) == STATEMENTS
    # the native engine's files (issue 37's scope) and Druid's MSQ and Dart engines' files
    assert Counter(variant_group(c) for c in cases) == {".all/.std": 16105, ".msq/.dart": 3886}
    assert {dataset_of(c) for c in cases} == {
        "qatests/qaAggFuncs",
        "qatests/qaArray/sql",
        "qatests/qaArray/ops_funcs",
        *(f"qatests/qaArray/ingest/{v}" for v in ("dynamic_rollup_false", "hashed_rollup_true", "range_rollup_true",
                                                  "schmdisc_and_transform", "schmdisc_dynamic_rollup_true",
                                                  "schmdisc_hashed_rollup_false", "schmdisc_range_rollup_false")),
        "qatests/qaUnnest/array",
        "qatests/qaUnnest/mv",
    }  # fmt: skip


def _counts_the_dataset(case: Case) -> bool:
    """The file's `SEL_DATASOURCE` statement: `SELECT count(*) cnt FROM <table>`."""
    return (
        case.ordinal == 1
        and re.fullmatch(r"select count\(\*\) cnt\s+from \w+", case.sql.strip(), re.IGNORECASE) is not None
    )


def _counting(cases: list[Case]) -> list[Case]:
    """Every file's `SELECT count(*) cnt FROM <table>` statement; for a dataset whose files list
    their rows instead (`SELECT * FROM test_unnest`), that count asked with Druid's row count."""
    chosen = [c for c in cases if _counts_the_dataset(c)]
    for c in cases:
        listing = re.fullmatch(r"select \*\s+from (\w+)", c.sql.strip(), re.IGNORECASE)
        if c.ordinal != 1 or listing is None or c.expected is None:
            continue
        if any(dataset_of(x) == dataset_of(c) for x in chosen):
            continue
        table = Table(("cnt",), ((str(len(c.expected.rows)),),))
        chosen.append(replace(c, sql=f"SELECT count(*) cnt FROM {listing.group(1)}", expected=table))
    return chosen


def _published_rows(cases: list[Case], dataset: str) -> set[int]:
    """How many rows Druid's files say the dataset's table holds: the answers of their
    `SEL_DATASOURCE` statements (`SELECT count(*) cnt FROM t` or `SELECT * FROM t`)."""
    counts = set()
    for c in cases:
        if dataset_of(c) != dataset or c.expected is None:
            continue
        if _counts_the_dataset(c):
            counts.add(int(c.expected.rows[0][0]))
        elif c.ordinal == 1 and re.fullmatch(r"select \*\s+from \w+", c.sql.strip(), re.IGNORECASE):
            counts.add(len(c.expected.rows))
    return counts


@pytest.fixture(scope="module")
def ingested(cases: list[Case], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """Every dataset ingested once by Strata's ingestion of Druid's specs (where, and the rows each
    ingested): its row count is checked against Druid's, then its statements run on it."""
    work = tmp_path_factory.mktemp("qa-datasets")
    return work, {
        dataset: ingest_dataset(work, dataset) for dataset in sorted({dataset_of(c) for c in cases})
    }


def test_every_dataset_loads_from_druids_spec_as_druid_counts_it(
    cases: list[Case], ingested: tuple[Path, dict[str, int]]
) -> None:
    for dataset, rows in ingested[1].items():
        assert _published_rows(cases, dataset) == {rows}, dataset


@pytest.mark.integration
@pytest.mark.timeout(3600)
def test_statements_against_real_clusters(
    cases: list[Case], ingested: tuple[Path, dict[str, int]], capsys: pytest.CaptureFixture[str]
) -> None:
    everything = os.environ.get("STRATA_QA_CORPUS") == "all"
    chosen = cases if everything else _counting(cases)
    # the counting run asks a few statements per dataset: two clusters at once, one starting while the other answers
    outcomes = run_qa(ingested[0], chosen, clusters=1 if everything else 2, ingested=True)
    with capsys.disabled():  # the pass rates are shown on every run
        print("\n" + folder_table(outcomes))
    assert len(outcomes) == len(chosen)
    assert not [o for o in outcomes if o.category.startswith("dataset not loaded")]
    if everything:
        recorded = json.loads(QA_RATES.read_text(encoding="utf-8"))
        now = rates(outcomes)
        assert set(recorded) == {*QA_FOLDERS, *VARIANT_GROUPS}
        for name in recorded:  # each folder and each variant group (`.all/.std`, `.msq/.dart`)
            assert now[name]["statements"] == recorded[name]["statements"], name
            assert now[name]["passed"] >= recorded[name]["passed"], (name, now[name], recorded[name])
    else:  # each counts its dataset's rows: Druid's published answer is the oracle
        assert {dataset_of(c) for c in chosen} == {dataset_of(c) for c in cases}
        failing = [
            f"{o.case.case_id}: {o.category} {o.detail[:120]}" for o in outcomes if o.status != "passed"
        ]
        assert not failing, "\n".join(failing)
