"""Druid's QA SQL tests (quidem-ut `qaAggFuncs`, `qaArray`, `qaUnnest`) against real clusters.

Every `.iq` file of the three folders is in `druid_qa/<folder>/`; the datasets they read are
Druid's own ingestion specs and data in `druid_qa/qatests/` (see `druid_qa/README.md`). A file
names its dataset in its `!use` line (`datasets=sql/src/test/quidem/qatests/qaArray/sql`); several
datasets define the same table (`test_array`) differently, so each dataset gets a cluster of its
own: its specs are ingested by Strata's ingestion exactly as written (only a local `baseDir` is
pointed at this directory), then one historical and one broker serve them while that dataset's
statements run. Nothing is skipped: a statement Strata cannot answer is a failure.
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from harness.processes import StrataProcess
from strata.ingestion.api import ingest
from tests.sql_corpus.cluster import serving
from tests.sql_corpus.quidem import Case, parse_cases
from tests.sql_corpus.runner import Outcome, run_case

QA_ROOT = Path(__file__).parent / "druid_qa"
QA_FOLDERS = ("qaAggFuncs", "qaArray", "qaUnnest")
UPSTREAM_PREFIX = "sql/src/test/quidem/"  # where Druid's paths to datasets and data start


def qa_cases(root: Path = QA_ROOT) -> list[Case]:
    """Every statement of every QA file, each file named `<folder>/<file>`; `STRATA_QA_FILES`
    (comma-separated globs over `<folder>/<file>`) keeps some files, for a quick partial run."""
    globs = [g for g in os.environ.get("STRATA_QA_FILES", "").split(",") if g]
    return [
        case
        for folder in QA_FOLDERS
        for path in sorted((root / folder).glob("*.iq"))
        if not globs or any(fnmatch.fnmatch(f"{folder}/{path.name}", g) for g in globs)
        for case in parse_cases(path.read_text(encoding="utf-8"), f"{folder}/{path.name}")
    ]


def dataset_of(case: Case) -> str:
    """The dataset directory a case's `!use` names, relative to `druid_qa/`."""
    query = urllib.parse.urlparse(case.use.split(None, 1)[0] if case.use else "").query
    datasets = urllib.parse.parse_qs(query).get("datasets", [""])[0]
    if not datasets.startswith(UPSTREAM_PREFIX):
        raise ValueError(f"{case.case_id}: no dataset in !use {case.use!r}")
    return datasets[len(UPSTREAM_PREFIX) :]


def dataset_specs(dataset: str, root: Path = QA_ROOT) -> list[dict[str, Any]]:
    """The dataset's ingestion specs as Druid wrote them, a local `baseDir` pointed here."""
    specs = []
    for path in sorted((root / dataset).glob("*.json")):
        spec = json.loads(path.read_text(encoding="utf-8"))
        source = spec["spec"]["ioConfig"]["inputSource"]
        if source.get("type") == "local" and str(source.get("baseDir", "")).startswith(UPSTREAM_PREFIX):
            source["baseDir"] = str(root / source["baseDir"][len(UPSTREAM_PREFIX) :])
        specs.append(spec)
    if not specs:
        raise ValueError(f"dataset {dataset} has no ingestion spec under {root}")
    return specs


_INGESTING = threading.Lock()  # one dataset ingested at a time (the clusters overlap the rest)


def dataset_dir(work: Path, dataset: str) -> Path:
    """Where under `work` the dataset's deep storage and metadata store live."""
    return work / dataset.replace("/", "-")


def ingest_dataset(work: Path, dataset: str) -> int:
    """The dataset's specs ingested by `strata.ingestion` into `dataset_dir`; the rows ingested."""
    where = dataset_dir(work, dataset)
    with _INGESTING:
        return sum(
            ingest(
                spec, deep_storage=where / "deep", metadata=where / "meta.db", engine="local"
            ).rows_ingested
            for spec in dataset_specs(dataset)
        )


@contextmanager
def dataset_cluster(
    work: Path, dataset: str, timeout: float = 60, *, ingested: bool = False
) -> Iterator[StrataProcess]:
    """A historical and a broker serving `dataset` (ingested first unless `ingest_dataset` did)."""
    if not ingested:
        ingest_dataset(work, dataset)
    with serving(dataset_dir(work, dataset), timeout) as broker:
        yield broker


def run_qa(work: Path, cases: Sequence[Case], *, workers: int = 4, clusters: int = 1,
           ingested: bool = False) -> list[Outcome]:  # fmt: skip
    """Every case against its dataset's cluster, `workers` statements at a time per cluster and
    `clusters` datasets at a time (their nodes start, settle and stop while others answer); with
    `ingested`, `ingest_dataset` already loaded each into `work`. A dataset that cannot be loaded
    fails all its cases with the reason."""
    by_dataset: dict[str, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        by_dataset[dataset_of(case)].append(i)
    outcomes: list[Outcome | None] = [None] * len(cases)

    def run_dataset(dataset: str, positions: list[int]) -> None:
        try:
            with (
                dataset_cluster(work, dataset, ingested=ingested) as broker,
                httpx.Client(timeout=30.0) as client,
                ThreadPoolExecutor(workers) as pool,
            ):
                answers = pool.map(lambda i: run_case(client, broker.url, cases[i], skips=False), positions)
                for i, outcome in zip(positions, answers, strict=True):
                    outcomes[i] = outcome
        except Exception as e:  # the dataset did not load or the cluster did not start
            reason = f"dataset not loaded: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            for i in positions:
                outcomes[i] = Outcome(cases[i], "failed", reason)

    with ThreadPoolExecutor(clusters, thread_name_prefix="qa-dataset") as datasets:
        done = [datasets.submit(run_dataset, *item) for item in sorted(by_dataset.items())]
        for future in done:
            future.result()
    return [o for o in outcomes if o is not None]


def folder_of(case: Case) -> str:
    return case.file.split("/", 1)[0]


# A file's variant is the engine Druid runs it on (`name.NN.all.iq`, `name.std.iq`, ...): `.all` and
# `.std` are the native engine's (issue 37's scope); `.msq` and `.dart` are Druid's MSQ and Dart
# engines, which refuse statements the native engine answers, so Strata's one engine cannot meet
# both: their rate is shown apart.
VARIANT_GROUPS: dict[str, frozenset[str]] = {
    ".all/.std": frozenset({"all", "std"}),
    ".msq/.dart": frozenset({"msq", "dart"}),
}


def variant_group(case: Case) -> str:
    """The variant group (a key of `VARIANT_GROUPS`) of the case's file."""
    variant = case.file.removesuffix(".iq").rsplit(".", 1)[-1]
    for name, members in VARIANT_GROUPS.items():
        if variant in members:
            return name
    raise ValueError(f"{case.file}: not a .all, .std, .msq or .dart file")


def folder_table(outcomes: Sequence[Outcome]) -> str:
    """Per folder, then in total: statements, passed, failed and the pass rate of each variant
    group and of all files."""
    groups: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        for folder in (folder_of(o.case), "TOTAL"):
            groups[folder, variant_group(o.case)].append(o)
            groups[folder, "(all)"].append(o)
    lines = [f"{'folder':<12} {'variant':<10} {'statements':>10} {'passed':>7} {'failed':>7} {'rate':>6}"]

    def row(folder: str, variant: str, group: Sequence[Outcome]) -> str:
        tally = Counter(o.status for o in group)
        rate = f"{100 * tally['passed'] / len(group):.1f}%" if group else "-"
        return (
            f"{folder:<12} {variant:<10} {len(group):>10} {tally['passed']:>7} {tally['failed']:>7} {rate:>6}"
        )

    for folder in (*QA_FOLDERS, "TOTAL"):
        lines += [
            row(folder, variant, groups[folder, variant])
            for variant in (*VARIANT_GROUPS, "(all)")
            if groups[folder, variant]
        ]
    return "\n".join(lines)


def variant_categories(outcomes: Sequence[Outcome]) -> list[tuple[str, Counter[str]]]:
    """Each failure category with its count per variant group, commonest first."""
    by_category: dict[str, Counter[str]] = defaultdict(Counter)
    for o in outcomes:
        if o.status == "failed":
            by_category[o.category][variant_group(o.case)] += 1
    return sorted(by_category.items(), key=lambda item: (-item[1].total(), item[0]))


QA_RATES = Path(__file__).parent / "qa_pass_rates.json"


def rates(outcomes: Sequence[Outcome]) -> dict[str, dict[str, int]]:
    """Per folder and per variant group (`.all/.std`, `.msq/.dart`): statements and how many passed."""
    keyed = [(o, (folder_of(o.case), variant_group(o.case))) for o in outcomes]
    out: dict[str, dict[str, int]] = {}
    for name in (*QA_FOLDERS, *VARIANT_GROUPS):
        mine = [o for o, keys in keyed if name in keys]
        out[name] = {"statements": len(mine), "passed": sum(o.status == "passed" for o in mine)}
    return out


def write_rates(outcomes: Sequence[Outcome], path: Path = QA_RATES) -> None:
    path.write_text(json.dumps(rates(outcomes), indent=2) + "\n", encoding="utf-8")
