"""`strata quickstart` end to end: real child processes, Druid's published tutorial answer, Ctrl-C."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
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


def test_quickstart_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    proc = subprocess.Popen(argv(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 240
        assert proc.stdout is not None
        seen = ""
        while "Ctrl-C to stop" not in seen:
            line = proc.stdout.readline()
            assert line and time.monotonic() < deadline, seen
            seen += line
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
        assert "shutting down" in proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
