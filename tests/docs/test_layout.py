"""The README is a front door and docs/ the manual: the README stays short, every link between
them resolves (file and heading), the architecture picture is the one in docs/architecture.mmd,
and the two generated pages (the flag reference, the benchmark page) are what their generators
write from the code and figures as they are now."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest

from bench.report import render_page
from strata.cli import docgen
from strata.cli.config import env_name
from strata.cli.main import build_parser
from tests.docs.extract import DOCUMENTS, README, ROOT

README_MAX_LINES = 300
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text outside fenced blocks and inline code, where links live."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def links() -> list[tuple[str, str]]:
    out = []
    for doc in DOCUMENTS:
        prose = _prose(doc.read_text())
        out += [(doc.name, target) for target in LINK.findall(prose) + IMAGE.findall(prose)]
    return out


def test_the_readme_is_a_front_door() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move it to docs/"
    )


@pytest.mark.parametrize("item", links(), ids=lambda i: f"{i[0]}->{i[1]}")
def test_every_link_resolves(item: tuple[str, str]) -> None:
    doc_name, target = item
    if re.match(r"^[a-z]+:", target):
        return  # http(s), mailto: outside the repository
    doc = README if doc_name == "README.md" else ROOT / "docs" / doc_name
    path, _, anchor = target.partition("#")
    where = (doc.parent / path).resolve() if path else doc
    assert where.exists(), f"{doc_name}: {target} names a file that does not exist"
    if anchor and where.suffix == ".md":
        assert anchor in anchors(where), f"{doc_name}: {target}: no heading with that anchor in {where.name}"


def test_the_readme_has_links_to_the_docs() -> None:
    targets = {t.partition("#")[0] for d, t in links() if d == "README.md"}
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f"docs/{p.name}" not in targets]
    assert not missing, f"README.md links to no {missing}: add them to its table of the docs"


def test_the_readme_picture_is_the_architecture_file() -> None:
    blocks = re.findall(r"^```mermaid\n(.*?)^```", README.read_text(), re.S | re.M)
    assert blocks, "README.md has no architecture picture"
    assert blocks[0] == (ROOT / "docs" / "architecture.mmd").read_text()


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


def test_the_configuration_reference_names_every_flag_and_its_environment_variable() -> None:
    """Each subcommand's visible flags are in its section with STRATA_<FLAG>; hidden ones are not."""
    page = docgen.render()
    _parser, children = build_parser()
    for name, child in children.items():
        section = page.split(f"## `strata {name}`", 1)[1].split("\n## ", 1)[0]
        for action in child._actions:
            longs = [o for o in action.option_strings if o.startswith("--") and o != "--help"]
            if not longs:
                continue
            shown = f"`{longs[0]}`" in section and f"`{env_name(longs[0])}`" in section
            assert shown == (action.help != argparse.SUPPRESS), f"strata {name} {longs[0]}"
