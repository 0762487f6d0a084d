"""The `strata` entry point builds only the subcommand a run names: a client command (`strata sql`,
`strata segments`) starts without the servers' imports, and parses as the whole parser does."""

from __future__ import annotations

import subprocess
import sys

import pytest

from strata.cli.main import build_parser, named_subcommand


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["sql", "-e", "SELECT 1"], "sql"),
        (["--log-level", "DEBUG", "segments", "list"], "segments"),
        (["--config=strata.toml", "historical", "--port", "8083"], "historical"),
        (["--log-level", "sql", "ingest"], "ingest"),  # an option's value is not the subcommand
        ([], None),
        (["--help"], None),
        (["-h", "sql"], None),  # the top-level help lists every subcommand
        (["--version"], None),
        (["nope"], None),  # the whole parser says which subcommands there are
        (["--log-level"], None),
    ],
)
def test_the_named_subcommand(argv: list[str], named: str | None) -> None:
    assert named_subcommand(argv) == named


def test_one_subcommand_parses_as_the_whole_parser() -> None:
    argv = ["--log-level", "WARNING", "sql", "--url", "http://127.0.0.1:1", "--format", "csv", "-e", "SELECT 1"]  # fmt: skip
    whole, _ = build_parser()
    alone, children = build_parser(only="sql")
    assert list(children) == ["sql"]
    assert vars(alone.parse_args(argv)) == vars(whole.parse_args(argv))


def test_a_client_subcommand_imports_no_server_module() -> None:
    code = (
        "import sys\n"
        "from strata.cli.main import main\n"
        "try:\n"
        "    main(['sql', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = sorted(m for m in ('duckdb', 'historical_service.cli', 'broker_service.cli') if m in sys.modules)\n"
        "print(heavy, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"
