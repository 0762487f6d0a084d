"""The docs' command blocks are either run (`bash tested`, `python tested`) or say why not.

In README.md and docs/*.md every bash or python block is marked `tested` or `untested: REASON`, the
reason one the test can check against the block (docker commands for "needs docker", a `spark://`
master for "needs a Spark cluster", a `--zk` list of several hosts for "needs a multi-host
ZooKeeper ensemble", a `postgresql://` URL for "needs a PostgreSQL server", `--advertise` for "needs several hosts",
`--deep-storage s3://` for "needs an S3 server", `--authenticator basic` or credentials
for "needs a secured cluster", the set-up scripts for
"installs system packages", thousands of generated queries or the benchmark suite for "runs for
minutes"). Every `strata ...` command line of every
marked block, run or not, is parsed by strata's own argument parser, so a renamed or removed flag
fails here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from strata.cli.main import build_parser
from tests.docs.extract import Block, commands, fenced_blocks, strata_argvs

REASONS: dict[str, Callable[[str], bool]] = {
    "needs docker": lambda body: bool(re.search(r"^docker ", body, re.M)),
    "needs a Spark cluster": lambda body: "--spark-master spark://" in body,
    "needs a multi-host ZooKeeper ensemble": lambda body: bool(re.search(r"--zk \S+,\S+", body)),
    "installs system packages": lambda body: bool(re.search(r"^scripts/(quickstart|test)\.sh\b", body, re.M)),
    "runs for minutes": lambda body: bool(re.search(r"--n \d{4,}|-m bench\b", body)),
    "needs a PostgreSQL server": lambda body: "postgresql://" in body,
    "needs several hosts": lambda body: "--advertise " in body,
    "needs an S3 server": lambda body: "--deep-storage s3://" in body,
    "needs a secured cluster": lambda body: bool(re.search(r"--authenticator basic|curl -u |--user ", body)),
}
COMMAND_LANGUAGES = {"bash", "sh", "shell", "console", "python", "py"}


def command_blocks() -> list[Block]:
    return [b for b in fenced_blocks() if b.language in COMMAND_LANGUAGES]


def marked_blocks() -> list[Block]:
    return [b for b in fenced_blocks() if b.tested or b.untested_reason is not None]


def test_every_command_block_is_tested_or_says_why_not() -> None:
    unmarked = [f"{b.source}: {b.body.splitlines()[0][:80]}" for b in command_blocks() if not b.mark]
    assert not unmarked, "mark these `tested` or `untested: REASON`:\n" + "\n".join(unmarked)


@pytest.mark.parametrize("block", [b for b in marked_blocks() if not b.tested], ids=lambda b: b.source)
def test_an_untested_block_has_a_reason_that_holds(block: Block) -> None:
    reason = block.untested_reason
    assert reason in REASONS, f"{block.source}: unknown reason {reason!r} (known: {', '.join(REASONS)})"
    assert REASONS[reason](block.body), f"{block.source}: the block does not show why it {reason}"
    assert block.language in ("bash", "sh"), f"{block.source}: only shell blocks may go untested"


def _strata_commands() -> list[tuple[str, list[str]]]:
    out = []
    for block in marked_blocks():
        if block.language != "bash":
            continue
        for command in commands(block):
            out.extend(
                (f"{block.source}: {command.text.splitlines()[0][:70]}", argv)
                for argv in strata_argvs(command)
            )
    return out


def test_the_docs_have_strata_commands() -> None:
    assert len(_strata_commands()) >= 20


@pytest.mark.parametrize("item", _strata_commands(), ids=lambda i: i[0])
def test_every_strata_command_is_parsed_by_strata(item: tuple[str, list[str]]) -> None:
    where, argv = item
    parser, _children = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{where}: strata {' '.join(argv)} is refused by strata's parser ({e.code})")
    assert args.command == argv[0], where
