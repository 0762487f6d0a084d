"""When a node of the quickstart stops, its failure names the node, its exit code and the last
line of its log: a CI run or an operator sees why without the working directory."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from strata.cli.quickstart import _exit_report


def test_the_report_names_the_node_its_code_and_its_last_log_line(tmp_path: Path) -> None:
    log = tmp_path / "historical-1.log"
    code = "import sys; print('starting'); print('ERROR: [Errno 98] address already in use'); print(); sys.exit(3)"
    with log.open("wb") as out:
        child = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=subprocess.STDOUT)
        child.wait(timeout=30)
    assert _exit_report(child, log) == (
        "historical-1 exited (code 3); its last log line: ERROR: [Errno 98] address already in use"
    )


def test_a_node_without_a_log_is_still_named(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    child.wait(timeout=30)
    assert _exit_report(child, tmp_path / "broker.log") == "broker exited (code 2)"
