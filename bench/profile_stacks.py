"""Where a process's time goes, from py-spy's collapsed stacks (`py-spy record -f raw`).

Each line of the raw format is `frame;frame;...;frame COUNT`, outermost first, a frame being
`function (file:line)`. The summary is the frames holding the most samples inclusively (anywhere
on the stack, counted once per stack) beside their own (self) share.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections import Counter
from pathlib import Path

_LINE_NUMBER = re.compile(r":\d+\)$")


def _frame(raw: str) -> str:
    """`func (path/to/module.py:123)` -> `func (module.py)`: one entry per function."""
    name, _, where = raw.partition(" (")
    where = _LINE_NUMBER.sub(")", "(" + where) if where else ""
    return f"{name} {where.rsplit('/', 1)[-1] if '/' in where else where}".strip()


def fold(text: str) -> tuple[Counter[str], Counter[str], int]:
    """(inclusive samples, self samples, total samples) per function."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame(f) for f in stack.split(";") if f]
        total += n
        for f in set(frames):
            inclusive[f] += n
        if frames:
            own[frames[-1]] += n
    return inclusive, own, total


def top_frames(text: str, n: int = 15, scaffolding: float = 0.9) -> list[str]:
    """The `n` functions with most samples inclusively, as `incl% self% function` lines, leaving
    out those on more than `scaffolding` of all stacks (the entry point, the event loop)."""
    inclusive, own, total = fold(text)
    if total == 0:
        return ["no samples"]
    ranked = [(name, count) for name, count in inclusive.most_common() if count <= scaffolding * total]
    return [
        f"{100 * count / total:5.1f}% {100 * own[name] / total:5.1f}% {name}" for name, count in ranked[:n]
    ]


def py_spy() -> str:
    """py-spy from the same environment (pip installs it beside the interpreter), else from PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if found is None:
        raise RuntimeError("--profile needs py-spy (pip install py-spy)")
    return found
