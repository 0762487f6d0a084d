"""`strata quickstart` end to end: real child processes, Druid's published tutorial answer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from strata.local_servers import free_port

pytestmark = pytest.mark.integration

# Druid's tutorial "top 10 pages by edits" on the wikipedia sample (docs/tutorials/tutorial-query.md)
PUBLISHED = [
    ("Wikipedia:Vandalismusmeldung", 33),
    ("User:Cyde/List of candidates for speedy deletion/Subpage", 28),
    ("Jeremy Corbyn", 27),
    ("Wikipedia:Administrators' noticeboard/Incidents", 21),
    ("Flavia Pennetta", 20),
]


def argv(work: Path, *extra: str) -> list[str]:
    return [sys.executable, "-P", "-m", "strata.cli", "quickstart", "--dir", str(work), "--port", str(free_port()),
            "--historical-ports", f"{free_port()},{free_port()}", *extra]  # fmt: skip


def test_quickstart_prints_the_tutorial_answer_and_reuses_data(tmp_path: Path) -> None:
    first = subprocess.run(argv(tmp_path, "--exit-after-query"), capture_output=True, text=True, timeout=240)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "ingested 39,244 rows" in first.stdout
    lines = first.stdout.splitlines()
    for page, edits in PUBLISHED:
        assert any(page in line and f" {edits} " in line for line in lines), (page, first.stdout)
    second = subprocess.run(argv(tmp_path, "--exit-after-query"), capture_output=True, text=True, timeout=240)
    assert second.returncode == 0 and "reusing it" in second.stdout
    assert (tmp_path / "broker.log").exists() and (tmp_path / "historical-0.log").exists()


# Stopping (SIGINT, SIGTERM, kill -9, a second quickstart): tests/lifecycle/test_quickstart_lifecycle.py
