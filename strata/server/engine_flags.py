"""The flags bounding a server's DuckDB work (the broker's relational stage and merges, a data node's
engine): memory per query and per process, where and how much it may spill, its threads.

Each process spills into a directory of its own, made under `--spill-dir` at start-up and removed
at exit, so servers sharing a disk never read or delete each other's files. Only argparse-level
imports here: `strata --help` builds every subcommand's parser.
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import os
import shutil
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strata.query.duck import EngineLimits

MiB = 1 << 20
GiB = 1 << 30


def size(text: str) -> int:
    """`2GiB`, `512MiB`, `100kb`, `1000` -> bytes (a ValueError names the flag's bad value)."""
    units = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
             "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}  # fmt: skip
    t = text.strip().lower()
    digits = t.rstrip("kmgib")
    try:
        return int(float(digits) * units[t[len(digits) :].strip()])
    except (KeyError, ValueError):
        raise ValueError(f"not a size: {text!r} (e.g. 512MiB, 2GiB)") from None


def add_engine_flags(parser: argparse.ArgumentParser, *, query_memory: int, engine_memory: int) -> None:
    """The engine flags with this server's defaults (a broker's and a data node's differ)."""
    group = parser.add_argument_group("query engine limits (DuckDB)")
    group.add_argument(
        "--query-memory", type=size, default=query_memory, metavar="SIZE",
        help=f"memory one query's DuckDB work may use before it spills, then is refused "
        f"(default {_shown(query_memory)})",
    )  # fmt: skip
    group.add_argument(
        "--engine-memory", type=size, default=engine_memory, metavar="SIZE",
        help=f"memory all queries' DuckDB work may use at once: --engine-memory / --query-memory "
        f"queries run together, the others wait (default {_shown(engine_memory)})",
    )  # fmt: skip
    group.add_argument(
        "--spill-dir", default=None, metavar="DIR",
        help="where DuckDB spills what does not fit in --query-memory (default: the system's temporary "
        "directory); each process uses a directory of its own under it, removed at exit",
    )  # fmt: skip
    group.add_argument(
        "--spill-bytes", type=size, default=GiB, metavar="SIZE",
        help="disk one query may spill to (default 1GiB; 0: never spill, refuse past --query-memory)",
    )  # fmt: skip
    group.add_argument(
        "--engine-threads", type=int, default=None, metavar="N",
        help="DuckDB threads of one query (default: the machine's cores)",
    )  # fmt: skip


def engine_limits(args: argparse.Namespace, *, external_access: bool) -> EngineLimits:
    """The limits the flags set (a ValueError says which is out of range), with this process's own
    directory (spills, scratch files) created."""
    from strata.query.duck import THREADS, EngineLimits

    limits = EngineLimits(
        query_memory=args.query_memory,
        engine_memory=args.engine_memory,
        spill_bytes=args.spill_bytes,
        threads=args.engine_threads or THREADS,
        external_access=external_access,
    )
    work_dir = tempfile.mkdtemp(prefix="strata-engine-", dir=args.spill_dir)
    atexit.register(shutil.rmtree, work_dir, ignore_errors=True)
    limits = dataclasses.replace(limits, work_dir=work_dir)
    assert limits.scratch_dir is not None
    os.mkdir(limits.scratch_dir)
    return limits


def _shown(n: int) -> str:
    return f"{n // GiB}GiB" if n % GiB == 0 else f"{n // MiB}MiB"
