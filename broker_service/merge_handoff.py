"""Large partials and answers between the broker and its merge workers as files in shared memory
(tmpfs), not through the process pool's pipe.

A `ProcessPoolExecutor` pickles a task's arguments and its result into a pipe in 64 KiB writes,
each a wake-up of the other side: a groupBy of ~3M whole arrays sent a 120 MB partial one way and
a 320 MB answer back, which cost seconds of wall time on a busy host (a 320 MB result took 7.9 s,
one of them the broker's CPU, at a load average of 15) for what one write and one read of a file
in `/dev/shm` do in a tenth of a second. Past `HANDOFF_BYTES` the sender writes the file (a
partial as an Arrow IPC stream, which the worker maps without copying; an answer as its bytes)
and only its path crosses the pipe; the broker removes every file it was handed once read. Small
ones, and every one where there is no tmpfs or it is full (a container's 64 MB `/dev/shm`), go
through the pipe as before. A broker killed outright cannot remove its directory, and tmpfs keeps
its files in memory until someone does: each directory is named for its broker's process id, and a
broker starting up removes those of brokers no longer running.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

HANDOFF_BYTES = 8 << 20  # smaller pieces cross the pipe: a file costs two system calls more
SHARED_MEMORY = Path("/dev/shm")
PREFIX = "strata-merge-"


@dataclass(frozen=True)
class FileHandoff:
    """Where a partial or an answer was written (pickled across instead of its bytes)."""

    path: str


def handoff_directory() -> str | None:
    """A directory of the broker's own in shared memory; None where there is none (the pipe then)."""
    if not SHARED_MEMORY.is_dir() or not os.access(SHARED_MEMORY, os.W_OK):
        return None
    remove_orphans(SHARED_MEMORY)
    try:
        return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=SHARED_MEMORY)
    except OSError:
        return None


def remove_orphans(parent: Path) -> list[str]:
    """Remove the handoff directories under `parent` whose broker is gone (what was removed).

    A directory whose process id is running again, under another program, is left: better a stale
    directory than one a live broker still writes to.
    """
    removed = []
    for entry in parent.glob(f"{PREFIX}*"):
        pid = _owner(entry.name)
        if pid is None or not entry.is_dir() or _running(pid):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(str(entry))
    return removed


def _owner(name: str) -> int | None:
    """The process id in a directory's name (None: an older name without one, or not ours)."""
    pid, sep, _ = name.removeprefix(PREFIX).partition("-")
    return int(pid) if sep and pid.isdigit() else None


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True


def remove_directory(directory: str | None) -> None:
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)


def answer_out(answer: bytes, directory: str | None) -> bytes | FileHandoff:
    """In a worker: a large answer written to a file (its bytes when small, or when writing fails)."""
    if directory is None or len(answer) < HANDOFF_BYTES:
        return answer
    return _written(directory, "answer-", lambda path: Path(path).write_bytes(answer)) or answer


def answer_in(answer: bytes | FileHandoff) -> bytes:
    """In the broker (off its event loop): the answer's bytes, its file removed."""
    if isinstance(answer, bytes):
        return answer
    try:
        return Path(answer.path).read_bytes()
    finally:
        _remove(answer.path)


def partial_out(table: pa.Table, directory: str | None) -> pa.Table | FileHandoff:
    """In the broker (off its event loop): a large partial written as an Arrow IPC stream."""
    if directory is None or table.nbytes < HANDOFF_BYTES:
        return table

    def write(path: str) -> None:
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)

    return _written(directory, "partial-", write) or table


def partial_in(partial: pa.Table | FileHandoff) -> pa.Table:
    """In a worker: the partial, its columns mapped from the file (no copy)."""
    if isinstance(partial, pa.Table):
        return partial
    with pa.memory_map(partial.path) as source:  # the table's buffers keep the mapping alive
        return pa.ipc.open_stream(source).read_all()


def release(pieces: Sequence[pa.Table | bytes | FileHandoff]) -> None:
    """In the broker: the files of partials the worker is done with (or of an answer unread) removed."""
    for p in pieces:
        if isinstance(p, FileHandoff):
            _remove(p.path)


def _written(directory: str, prefix: str, write: Callable[[str], object]) -> FileHandoff | None:
    path = None
    try:
        fd, path = tempfile.mkstemp(dir=directory, prefix=prefix)
        os.close(fd)
        write(path)
    except OSError:  # no space left (tmpfs full), the directory gone: the pipe instead
        if path is not None:
            _remove(path)
        return None
    return FileHandoff(path)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
