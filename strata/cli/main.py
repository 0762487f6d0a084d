"""The `strata` command line: one entry point, one subcommand per role.

Each subcommand lives in a small module exposing `configure(parser)` and `run(args) -> int`.
Those modules import only argparse-level things at import time so `strata --help` stays fast;
heavy imports happen inside `run`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Protocol, cast

from strata.cli.config import ConfigError, apply_defaults, load_config_file
from strata.server import __version__


class Subcommand(Protocol):
    HELP: str

    def configure(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


# name -> module; the order is the order of `strata --help`.
SUBCOMMANDS: dict[str, str] = {
    "ingest": "strata.ingestion.cli",
    "segments": "strata.storage.cli",
    "historical": "historical_service.cli",
    "realtime": "strata.realtime.cli",
    "broker": "broker_service.cli",
    "coordinator": "strata.coordinator.cli",
    "quickstart": "strata.cli.quickstart",
    "sql": "strata.cli.sql_cli",
    "security": "strata.security.cli",
    "lookups": "strata.cli.lookups_cli",
}


def _load(module: str) -> Subcommand:
    return cast(Subcommand, importlib.import_module(module))


def build_parser(
    only: str | None = None,
) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The whole command line, or with `only` the one subcommand a run names: each subcommand's
    `configure` imports its module (a node's pulls DuckDB and Arrow), so `strata sql` would
    otherwise pay for every server's imports before it sends a statement."""
    parser = argparse.ArgumentParser(
        prog="strata",
        description="Strata: a Druid-compatible query broker, historical and real-time nodes.",
        epilog="Every --flag can also be set as STRATA_<FLAG> in the environment or in a --config file.",
    )
    parser.add_argument("--version", action="version", version=f"strata {__version__}")
    parser.add_argument("--config", help="TOML or JSON settings file (also STRATA_CONFIG)")
    parser.add_argument(
        "--log-level",
        default=os.environ.get("STRATA_LOG_LEVEL", "INFO"),
        help="DEBUG, INFO, WARNING or ERROR",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    children: dict[str, argparse.ArgumentParser] = {}
    for name, module in SUBCOMMANDS.items():
        if only is not None and name != only:
            continue
        command = _load(module)
        child = sub.add_parser(name, help=command.HELP, description=command.HELP)
        command.configure(child)
        child.set_defaults(_module=module)
        children[name] = child
    return parser, children


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if level.upper() != "DEBUG":
        # httpx logs every request at INFO: a broker's log would be little but its scatter calls
        for chatty in ("httpx", "httpcore"):
            logging.getLogger(chatty).setLevel(logging.WARNING)


def named_subcommand(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names, read past the top-level options, or None (`strata --help`)."""
    top = argparse.ArgumentParser(add_help=False)
    top.add_argument("--config")
    top.add_argument("--log-level")
    top.add_argument("command", nargs="?")
    try:
        known, _ = top.parse_known_args(argv)
    except SystemExit:  # a top-level option without its value: the whole parser says so
        return None
    if known.command not in SUBCOMMANDS:
        return None
    before = argv[: list(argv).index(known.command)]
    return None if {"-h", "--help", "--version"} & set(before) else known.command


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, children = build_parser(only=named_subcommand(argv))
    first, _ = parser.parse_known_args(argv)
    if first.command is None:
        parser.print_help()
        return 0
    try:
        config_path = first.config or os.environ.get("STRATA_CONFIG")
        config = load_config_file(config_path) if config_path else {}
        apply_defaults(children[first.command], os.environ, config, section=first.command)
    except ConfigError as e:
        parser.error(str(e))
    args = parser.parse_args(argv)
    args._config = config  # secrets (passwords) are read from here, never from flags
    configure_logging(args.log_level)
    try:
        return _load(args._module).run(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
