"""The two generated pages (the flag reference, the benchmark page) are what their generators
write from the code and figures as they are now."""

from __future__ import annotations

import json

from bench.report import render_page
from strata import docgen
from tests.docs.extract import ROOT


def test_the_configuration_reference_is_generated_from_the_parsers() -> None:
    page = ROOT / "docs" / "configuration.md"
    assert page.read_text() == docgen.render(), "docs/configuration.md is stale: run python -m strata.docgen"


def test_the_benchmark_page_is_generated_from_the_figures() -> None:
    results = json.loads((ROOT / "bench" / "results.json").read_text())
    notes = (ROOT / "bench" / "notes.md").read_text()
    page = ROOT / "docs" / "benchmarks.md"
    assert page.read_text() == render_page(results, notes, "../bench"), (
        "docs/benchmarks.md is stale: run python -m bench --report-only"
    )
