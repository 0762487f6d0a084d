"""`strata sql` in a pseudo-terminal: prompts, multi-line statements, backslash commands, history,
Ctrl-C cancelling the running statement on the server while the client stays."""

from __future__ import annotations

import shlex
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from pexpect.popen_spawn import PopenSpawn

from tests.sql_cli.fake_sql_server import FakeSqlServer, fake_sql_server

PROMPT = "strata> "


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeSqlServer]:
    with fake_sql_server() as server:
        yield server


class Terminal:
    """`strata sql` on a real pseudo-terminal made by script(1), driven over pipes.

    pexpect's own pty spawn forks the test process and runs Python before exec, which is unsafe
    once the test process has threads (DuckDB's, servers'); script(1) is a plain fork+exec.
    Keys are what a terminal sends: Enter is CR, Ctrl-C is ETX (the line discipline turns it into
    SIGINT for the client), Ctrl-D is EOT.
    """

    def __init__(self, fake: FakeSqlServer, history: Path, *, sigint_ignored: bool = False) -> None:
        argv = [sys.executable, "-m", "strata.cli.main", "sql", "--url", fake.url, "--history", str(history)]
        command = f"stty cols 160 rows 40; exec {shlex.join(argv)}"
        # the disposition the client inherits (SIG_IGN survives exec; a handler does not)
        previous = signal.signal(
            signal.SIGINT, signal.SIG_IGN if sigint_ignored else signal.default_int_handler
        )
        try:
            self.child = PopenSpawn(["script", "-qfec", command, "/dev/null"], encoding="utf-8", timeout=30)
        finally:
            signal.signal(signal.SIGINT, previous)
        self.child.expect_exact(PROMPT)

    def sendline(self, text: str) -> None:
        self.child.send(text + "\r")

    def interrupt(self) -> None:
        self.child.send("\x03")

    def eof(self) -> None:
        self.child.send("\x04")

    def expect_exact(self, text: str) -> None:
        self.child.expect_exact(text)

    def expect(self, pattern: str) -> None:
        self.child.expect(pattern)

    def finish(self) -> int:
        self.child.expect(pexpect.EOF)
        return int(self.child.wait())

    def kill(self) -> None:
        if self.child.proc.poll() is None:
            self.child.kill(signal.SIGKILL)


def test_multiline_statement_table_and_quit(fake: FakeSqlServer, tmp_path: Path) -> None:
    child = Terminal(fake, tmp_path / "history")
    try:
        child.sendline("SELECT *")
        child.expect_exact("     -> ")
        child.sendline("FROM wikipedia;")
        child.expect_exact("#fr.wikipedia")
        child.expect(r"Retrieved 3 rows in \d+\.\d\ds\.")
        child.expect_exact(PROMPT)
        assert fake.requests[-1]["query"] == "SELECT *\nFROM wikipedia"
        child.sendline("\\q")
        assert child.finish() == 0
    finally:
        child.kill()


def test_backslash_commands(fake: FakeSqlServer, tmp_path: Path) -> None:
    child = Terminal(fake, tmp_path / "history")
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
        child.eof()
        assert child.finish() == 0
    finally:
        child.kill()


def test_ctrl_c_cancels_the_running_statement_and_keeps_the_client(
    fake: FakeSqlServer, tmp_path: Path
) -> None:
    child = Terminal(fake, tmp_path / "history")
    try:
        child.sendline("SELECT sleep;")
        deadline = time.monotonic() + 10
        while not any("SELECT sleep" in r["query"] for r in fake.requests) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        child.interrupt()
        child.expect_exact("Query cancelled.")
        child.expect_exact(PROMPT)
        assert fake.cancelled and fake.cancelled[-1] == fake.requests[-1]["context"]["sqlQueryId"]
        child.sendline("SELECT * FROM wikipedia;")
        child.expect_exact("#en.wikipedia")
        child.sendline("\\q")
        assert child.finish() == 0
    finally:
        child.kill()


@pytest.mark.parametrize(
    "sigint_ignored", [False, True], ids=["sigint-default", "started-with-sigint-ignored"]
)
def test_ctrl_c_at_the_prompt_drops_the_unfinished_statement(
    fake: FakeSqlServer, tmp_path: Path, sigint_ignored: bool
) -> None:
    child = Terminal(fake, tmp_path / "history", sigint_ignored=sigint_ignored)
    try:
        child.sendline("SELECT broken")
        child.expect_exact("     -> ")
        child.interrupt()
        child.expect_exact(PROMPT)
        child.sendline("\\q")
        assert child.finish() == 0
    finally:
        child.kill()


def test_history_persists_between_sessions(fake: FakeSqlServer, tmp_path: Path) -> None:
    history = tmp_path / "history"
    child = Terminal(fake, history)
    try:
        child.sendline("SELECT * FROM wikipedia LIMIT 0;")
        child.expect_exact("Retrieved 0 rows")
        child.sendline("\\q")
        child.finish()
    finally:
        child.kill()
    assert "SELECT * FROM wikipedia LIMIT 0;" in history.read_text()
    child = Terminal(fake, history)
    try:
        before = len(fake.requests)
        child.child.send("\x1b[A\x1b[A\r")  # up twice: past "\\q" to the statement, then Enter
        child.expect_exact("Retrieved 0 rows")
        assert fake.requests[before]["query"] == "SELECT * FROM wikipedia LIMIT 0"
        child.sendline("\\q")
        assert child.finish() == 0
    finally:
        child.kill()
