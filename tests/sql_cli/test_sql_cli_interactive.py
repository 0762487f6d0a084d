"""`strata sql` in a pseudo-terminal: prompts, multi-line statements, backslash commands, history,
Ctrl-C cancelling the running statement on the server while the client stays."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.sql_cli.fake_sql_server import FakeSqlServer, fake_sql_server

PROMPT = "strata> "


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeSqlServer]:
    with fake_sql_server() as server:
        yield server


def spawn(fake: FakeSqlServer, history: Path) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable, ["-m", "strata.cli", "sql", "--url", fake.url, "--history", str(history)],
        encoding="utf-8", timeout=30, dimensions=(40, 160),
    )  # fmt: skip
    child.expect_exact(PROMPT)
    return child


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus is not None
    return child.exitstatus


def test_multiline_statement_table_and_quit(fake: FakeSqlServer, tmp_path: Path) -> None:
    child = spawn(fake, tmp_path / "history")
    try:
        child.sendline("SELECT *")
        child.expect_exact("     -> ")
        child.sendline("FROM wikipedia;")
        child.expect_exact("#fr.wikipedia")
        child.expect(r"Retrieved 3 rows in \d+\.\d\ds\.")
        child.expect_exact(PROMPT)
        assert fake.requests[-1]["query"] == "SELECT *\nFROM wikipedia"
        child.sendline("\\q")
        assert finish(child) == 0
    finally:
        child.terminate(force=True)


def test_backslash_commands(fake: FakeSqlServer, tmp_path: Path) -> None:
    child = spawn(fake, tmp_path / "history")
    try:
        child.sendline("\\d")
        child.expect_exact("wikipedia")
        child.expect_exact(PROMPT)
        assert "TABLE_SCHEMA = 'druid'" in fake.requests[-1]["query"]
        child.sendline("\\d wikipedia")
        child.expect_exact("channel")
        child.expect_exact(PROMPT)
        assert "TABLE_NAME = 'wikipedia'" in fake.requests[-1]["query"]
        child.sendline("\\dS")
        child.expect_exact(PROMPT)
        assert "INFORMATION_SCHEMA" in fake.requests[-1]["query"]
        child.sendline("\\timing")
        child.expect_exact("Timing is off.")
        child.sendline("SELECT * FROM wikipedia;")
        child.expect(r"Retrieved 3 rows\.")
        child.sendline("\\h")
        child.expect_exact("describe a datasource")
        child.sendline("\\nope")
        child.expect_exact("Unknown command \\nope")
        child.sendline("SELECT bad FROM wikipedia;")
        child.expect_exact("Error: INVALID_INPUT: Column 'bad' not found")
        child.expect_exact(PROMPT)
        child.sendeof()
        assert finish(child) == 0
    finally:
        child.terminate(force=True)


def test_ctrl_c_cancels_the_running_statement_and_keeps_the_client(
    fake: FakeSqlServer, tmp_path: Path
) -> None:
    child = spawn(fake, tmp_path / "history")
    try:
        child.sendline("SELECT sleep;")
        deadline = time.monotonic() + 10
        while not any("SELECT sleep" in r["query"] for r in fake.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        child.sendintr()
        child.expect_exact("Query cancelled.")
        child.expect_exact(PROMPT)
        assert fake.cancelled and fake.cancelled[-1] == fake.requests[-1]["context"]["sqlQueryId"]
        child.sendline("SELECT * FROM wikipedia;")
        child.expect_exact("#en.wikipedia")
        child.sendline("\\q")
        assert finish(child) == 0
    finally:
        child.terminate(force=True)


def test_ctrl_c_at_the_prompt_drops_the_unfinished_statement(fake: FakeSqlServer, tmp_path: Path) -> None:
    child = spawn(fake, tmp_path / "history")
    try:
        child.sendline("SELECT broken")
        child.expect_exact("     -> ")
        child.sendintr()
        child.expect_exact(PROMPT)
        child.sendline("\\q")
        assert finish(child) == 0
    finally:
        child.terminate(force=True)


def test_history_persists_between_sessions(fake: FakeSqlServer, tmp_path: Path) -> None:
    history = tmp_path / "history"
    child = spawn(fake, history)
    try:
        child.sendline("SELECT * FROM wikipedia LIMIT 0;")
        child.expect_exact("Retrieved 0 rows")
        child.sendline("\\q")
        finish(child)
    finally:
        child.terminate(force=True)
    assert "SELECT * FROM wikipedia LIMIT 0;" in history.read_text()
    child = spawn(fake, history)
    try:
        before = len(fake.requests)
        child.send("\x1b[A\x1b[A")  # up twice: past "\q" to the statement
        child.send("\r")
        child.expect_exact("Retrieved 0 rows")
        assert fake.requests[before]["query"] == "SELECT * FROM wikipedia LIMIT 0"
        child.sendline("\\q")
        assert finish(child) == 0
    finally:
        child.terminate(force=True)
