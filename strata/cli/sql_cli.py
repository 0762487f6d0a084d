"""`strata sql`: Druid SQL from a terminal, in the spirit of psql and Druid's dsql.

One-shot (`-e SQL` or statements on standard input) prints the result and exits non-zero with the
server's message on error. INSERT and REPLACE go to Druid's SQL task API and are followed to their
end (`strata.cli.sql_tasks`). Interactive mode has line editing and a persistent history (stdlib
readline), statements ended by `;` over several lines, backslash commands, and Ctrl-C cancels the
running statement on the broker (DELETE /druid/v2/sql/{id}) while the client stays.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import TextIO

HELP = "Druid SQL client: interactive, or one statement with -e / from standard input"

BACKSLASH_HELP = """\
\\d          list datasources
\\d NAME     describe a datasource (columns and types)
\\dS         list system tables (INFORMATION_SCHEMA, sys)
\\timing     show or hide how long each statement took
\\h          this help
\\q          quit (also Ctrl-D)
Statements end with ';' and may span lines. Ctrl-C cancels a running statement."""

LIST_TABLES = "SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid' ORDER BY 1"
LIST_SYSTEM = (
    "SELECT TABLE_SCHEMA, TABLE_NAME FROM INFORMATION_SCHEMA.TABLES "
    "WHERE TABLE_SCHEMA IN ('INFORMATION_SCHEMA', 'sys') ORDER BY 1, 2"
)
DESCRIBE = (
    "SELECT COLUMN_NAME, DATA_TYPE, IS_NULLABLE FROM INFORMATION_SCHEMA.COLUMNS "
    "WHERE TABLE_NAME = {name} ORDER BY ORDINAL_POSITION"
)


def configure(parser: argparse.ArgumentParser) -> None:
    from strata.cli.sql_output import FORMATS

    parser.add_argument("--url", default="http://127.0.0.1:8082", help="the broker's address")
    parser.add_argument(
        "--user", help="user for a secured broker (password: $STRATA_PASSWORD, ~/.netrc or a prompt)"
    )
    parser.add_argument(
        "--tls-ca", help="CA certificate file that the broker's https:// certificate must chain to"
    )
    parser.add_argument("-e", "--execute", metavar="SQL", help="run these statements and exit")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="output format (default: table on a terminal, csv otherwise)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=None, help="seconds to wait for an answer")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=True,
                        help="print column names (table, csv, tsv)")  # fmt: skip
    parser.add_argument("--time-zone", help="sqlTimeZone for timestamps (default UTC)")
    parser.add_argument("--wait", action=argparse.BooleanOptionalAction, default=True,
                        help="INSERT and REPLACE run as tasks: wait for the task and print how it ended "
                             "(--no-wait: print its id at once)")  # fmt: skip
    parser.add_argument("--history", default=os.environ.get("STRATA_SQL_HISTORY", "~/.strata_sql_history"),
                        help="history file of the interactive mode")  # fmt: skip


_SET = re.compile(r"\s*(?:--[^\n]*\n\s*)*SET\s", re.IGNORECASE)


def split_statements(text: str) -> tuple[list[str], str]:
    """Complete `;`-ended statements in `text`, and the unfinished rest.

    Semicolons inside quotes, double-quoted identifiers and `--` comments do not end a statement;
    `SET key = value;` statements stay with the statement after them (Druid takes them in the same
    request, as that statement's context).
    """
    done: list[str] = []
    start = part = 0
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in ("'", '"'):
            quote = ch
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            i = len(text) if newline < 0 else newline
            continue
        elif ch == ";":
            if _SET.match(text, part):
                part = i + 1  # a SET statement: it goes with the next one
            else:
                statement = text[start:i].strip()
                if statement:
                    done.append(statement)
                start = part = i + 1
        i += 1
    return done, text[start:]


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class Session:
    """What a run of `strata sql` remembers: where to send statements and how to print them."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        from strata.cli.credentials import client_credentials
        from strata.cli.sql_client import SqlClient

        auth = client_credentials(args.url, args.user)
        self.client = SqlClient(args.url, timeout=args.timeout, auth=auth, verify=args.tls_ca or True)
        self.fmt: str = args.format or ("table" if out.isatty() else "csv")
        self.header: bool = args.header
        self.context = {"sqlTimeZone": args.time_zone} if args.time_zone else {}
        self.timing = True
        self.wait: bool = args.wait
        self.out = out
        self.err = err
        self.running: str | None = None  # the sqlQueryId Ctrl-C cancels

    def run(self, sql: str) -> bool:
        """Run one statement and print it; False (and one line on stderr) when it failed."""
        from strata.cli.sql_client import SqlError
        from strata.cli.sql_output import write_rows
        from strata.cli.sql_tasks import is_task_statement, run_task

        if is_task_statement(sql):
            return run_task(self, sql)
        started = time.monotonic()
        try:
            with self.client.execute(sql, self.context) as result:
                self.running = result.query_id
                count = write_rows(self.out, self.fmt, result.columns, result.rows, header=self.header)
        except SqlError as exc:
            self.err.write(f"Error: {exc}\n")
            return False
        except KeyboardInterrupt:
            if self.running is not None:
                self.client.cancel(self.running)
            raise
        finally:
            self.running = None
        self.out.flush()
        if self.fmt == "table":
            took = f" in {time.monotonic() - started:.2f}s" if self.timing else ""
            self.err.write(f"Retrieved {count:,} row{'' if count == 1 else 's'}{took}.\n")
        return True

    def cancelled(self) -> None:
        self.out.flush()
        self.err.write("\nQuery cancelled.\n")

    def backslash(self, command: str) -> bool:
        """Run a backslash command; False means quit."""
        name, _, arg = command.strip().partition(" ")
        arg = arg.strip().rstrip(";").strip()
        if name in ("\\q", "\\quit"):
            return False
        if name in ("\\h", "\\?", "\\help"):
            self.err.write(BACKSLASH_HELP + "\n")
        elif name == "\\timing":
            self.timing = not self.timing
            self.err.write(f"Timing is {'on' if self.timing else 'off'}.\n")
        elif name == "\\dS":
            self.run(LIST_SYSTEM)
        elif name == "\\d":
            self.run(DESCRIBE.format(name=sql_string(arg.strip('"'))) if arg else LIST_TABLES)
        else:
            self.err.write(f"Unknown command {name}; \\h lists the commands.\n")
        return True


def _interactive(session: Session, history: Path) -> int:
    import readline  # line editing and history for input(); Linux always has it

    # Ctrl-C cancels the running statement or the unfinished one, also in a client started with
    # SIGINT ignored (a parent's disposition survives exec; Python then leaves it ignored), as
    # psql installs its own handler whatever it inherited
    signal.signal(signal.SIGINT, signal.default_int_handler)

    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    readline.set_history_length(1000)
    session.err.write(f"strata sql, connected to {session.client.url}. \\h for help, \\q to quit.\n")
    pending = ""
    try:
        while True:
            try:
                line = input("strata> " if not pending.strip() else "     -> ")
            except KeyboardInterrupt:
                session.err.write("\n")
                pending = ""
                continue
            except EOFError:
                session.err.write("\n")
                return 0
            if not pending.strip() and line.lstrip().startswith("\\"):
                if not session.backslash(line.lstrip()):
                    return 0
                continue
            statements, pending = split_statements(pending + line + "\n")
            for statement in statements:
                try:
                    session.run(statement)
                except KeyboardInterrupt:
                    session.cancelled()
    finally:
        with contextlib.suppress(OSError):
            history.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(history)


def run(args: argparse.Namespace) -> int:
    from strata.cli.credentials import CredentialsError

    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise in a client
    try:
        session = Session(args, sys.stdout, sys.stderr)
    except CredentialsError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 2
    try:
        if args.execute is None and sys.stdin.isatty():
            return _interactive(session, Path(os.path.expanduser(args.history)))
        text = args.execute if args.execute is not None else sys.stdin.read()
        statements, rest = split_statements(text)
        if rest.strip():
            statements.append(rest.strip())
        if not statements:
            sys.stderr.write("Error: no SQL statement given\n")
            return 2
        for statement in statements:
            try:
                ok = session.run(statement)
            except KeyboardInterrupt:
                session.cancelled()
                return 130
            if not ok:
                return 1
        return 0
    finally:
        session.client.close()
