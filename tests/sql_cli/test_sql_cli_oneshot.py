"""`strata sql` one-shot runs as a child process: formats read back, exit codes, errors in one line."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from strata.cli.sql_cli import split_statements
from strata.cli.sql_client import error_line
from tests.sql_cli.fake_sql_server import COLUMNS, ROWS, FakeSqlServer, fake_sql_server


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeSqlServer]:
    with fake_sql_server() as server:
        yield server


def strata_sql(fake: FakeSqlServer, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "strata.cli.main", "sql", "--url", fake.url, *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)


def test_csv_reads_back_with_nulls_quotes_and_tabs(fake: FakeSqlServer) -> None:
    done = strata_sql(fake, "-e", "SELECT * FROM wikipedia", "--format", "csv")
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout)))
    assert rows[0] == COLUMNS
    expected = [["" if v is None else str(v) for v in row] for row in ROWS]
    assert rows[1:] == expected


def test_tsv_reads_back(fake: FakeSqlServer) -> None:
    done = strata_sql(fake, "-e", "SELECT * FROM wikipedia", "--format", "tsv", "--no-header")
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(io.StringIO(done.stdout), delimiter="\t"))
    assert rows == [["" if v is None else str(v) for v in row] for row in ROWS]


def test_json_and_jsonl_read_back(fake: FakeSqlServer) -> None:
    expected = [dict(zip(COLUMNS, row, strict=True)) for row in ROWS]
    as_json = strata_sql(fake, "-e", "SELECT * FROM wikipedia", "--format", "json")
    assert json.loads(as_json.stdout) == expected
    as_lines = strata_sql(fake, "-e", "SELECT * FROM wikipedia", "--format", "jsonl")
    assert [json.loads(line) for line in as_lines.stdout.splitlines()] == expected


def test_empty_result_keeps_the_column_names(fake: FakeSqlServer) -> None:
    done = strata_sql(fake, "-e", "SELECT * FROM wikipedia LIMIT 0", "--format", "csv")
    assert done.returncode == 0 and done.stdout.splitlines() == [",".join(COLUMNS)]
    assert (
        json.loads(strata_sql(fake, "-e", "SELECT * FROM wikipedia LIMIT 0", "--format", "json").stdout) == []
    )


def test_table_format_and_row_count_line(fake: FakeSqlServer) -> None:
    done = strata_sql(fake, "-e", "SELECT * FROM wikipedia", "--format", "table")
    assert done.returncode == 0
    assert "#en.wikipedia" in done.stdout and "┌" in done.stdout
    assert done.stderr.startswith("Retrieved 3 rows in ") and done.stderr.rstrip().endswith("s.")


def test_statements_from_standard_input_run_in_order(fake: FakeSqlServer) -> None:
    before = len(fake.requests)
    done = strata_sql(
        fake, "--format", "csv", stdin="SELECT * FROM wikipedia;\nSELECT 'a;b' FROM wikipedia\n"
    )
    assert done.returncode == 0, done.stderr
    assert [r["query"] for r in fake.requests[before:]] == [
        "SELECT * FROM wikipedia",
        "SELECT 'a;b' FROM wikipedia",
    ]
    assert all(r["resultFormat"] == "arrayLines" and r["header"] for r in fake.requests[before:])


def test_server_error_is_one_line_and_exit_code_1(fake: FakeSqlServer) -> None:
    done = strata_sql(fake, "-e", "SELECT bad FROM wikipedia; SELECT * FROM wikipedia")
    assert done.returncode == 1
    assert done.stderr == "Error: INVALID_INPUT: Column 'bad' not found in any table (line [1], column [8])\n"
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_truncated_answer_is_an_error(fake: FakeSqlServer) -> None:
    done = strata_sql(fake, "-e", "SELECT truncated", "--format", "csv")
    assert done.returncode == 1 and "cut off" in done.stderr


def test_unreachable_broker_is_one_line() -> None:
    argv = [sys.executable, "-m", "strata.cli.main", "sql", "--url", "http://127.0.0.1:9", "-e", "SELECT 1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr.startswith("Error: cannot reach http://127.0.0.1:9")
    assert len(done.stderr.splitlines()) == 1


def test_no_statement_is_a_usage_error(fake: FakeSqlServer) -> None:
    assert strata_sql(fake, "-e", "  ;  ").returncode == 2


@pytest.mark.parametrize(
    ("text", "done", "rest"),
    [
        ("SELECT 1;", ["SELECT 1"], ""),
        ("SELECT ';' ; SELECT 2", ["SELECT ';'"], " SELECT 2"),
        ('SELECT "a;b" FROM t;\n', ['SELECT "a;b" FROM t'], "\n"),
        ("SELECT 1 -- no; end\n;", ["SELECT 1 -- no; end"], ""),
        ("SELECT 'it''s;' ;;", ["SELECT 'it''s;'"], ""),
        ("SELECT\n1", [], "SELECT\n1"),
        # SET statements go with the statement after them, in one request
        (
            "SET a = 1; set b = 'x;y';\nSELECT 1; SELECT 2;",
            ["SET a = 1; set b = 'x;y';\nSELECT 1", "SELECT 2"],
            "",
        ),
        ("-- timeouts\nSET timeout = 5;", [], "-- timeouts\nSET timeout = 5;"),
        ("SETTLE;", ["SETTLE"], ""),
    ],
)
def test_split_statements(text: str, done: list[str], rest: str) -> None:
    assert split_statements(text) == (done, rest)


def test_error_line_shapes() -> None:
    legacy = b'{"error":"Query timeout","errorMessage":"took\\n too long","errorClass":"x","host":null}'
    assert error_line(504, legacy) == "Query timeout: took too long"
    assert error_line(502, b"<html>Bad gateway</html>\n") == "HTTP 502: <html>Bad gateway</html>"
    assert error_line(500, b'{"error":"Unknown exception"}') == "Unknown exception"
