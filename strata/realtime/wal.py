"""A segmented write-ahead log with group commit: a batch is acknowledged only once it is on disk.

Record: `SWAL` | u32 header length | u32 body length | u32 CRC-32 of both | header JSON | body.
The header carries the log sequence number (lsn), the producer's id and sequence number and the
bucket versions; the body is the batch's rows as an Arrow IPC stream. Files are named by the first
lsn they hold (`wal-<lsn>.log`) and roll at `max_file_bytes`.

Group commit: pushers enqueue records; one writer thread takes everything queued, writes it with
one `write`, one `fsync`, then hands the whole group (in lsn order) to `on_commit` on the event
loop. While it syncs, the next group gathers. A write that fails (a full disk) cuts the file back
to the last whole record, so the log never holds garbage before a later good record, and fails
every waiter of the group: nothing unsynced is ever acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

log = logging.getLogger(__name__)

MAGIC = b"SWAL"
_HEAD = struct.Struct(">4sIII")
MAX_FILE_BYTES = 64 * 1024 * 1024


class WalError(RuntimeError):
    """The log could not be written (e.g. the disk is full); the batch was not acknowledged."""


@dataclass
class WalRecord:
    header: dict[str, Any]
    body: bytes
    lsn: int = 0
    future: asyncio.Future[WalRecord] | None = field(default=None, repr=False)

    def encode(self) -> bytes:
        head = orjson.dumps({**self.header, "lsn": self.lsn})
        crc = zlib.crc32(self.body, zlib.crc32(head))
        return _HEAD.pack(MAGIC, len(head), len(self.body), crc) + head + self.body


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_file(path: Path) -> Iterator[tuple[WalRecord, int]]:
    """Whole records of one file with the offset after each; stops at a torn or corrupt record."""
    data = path.read_bytes()
    pos = 0
    while pos + _HEAD.size <= len(data):
        magic, head_len, body_len, crc = _HEAD.unpack_from(data, pos)
        end = pos + _HEAD.size + head_len + body_len
        if magic != MAGIC or end > len(data):
            return
        head = data[pos + _HEAD.size : pos + _HEAD.size + head_len]
        body = data[pos + _HEAD.size + head_len : end]
        if zlib.crc32(body, zlib.crc32(head)) != crc:
            return
        header = orjson.loads(head)
        yield WalRecord(header, body, int(header["lsn"])), end
        pos = end


def wal_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("wal-*.log"))


def first_lsn(path: Path) -> int:
    return int(path.stem.split("-", 1)[1])


class WriteAheadLog:
    """Appends from the event loop; writes and fsyncs in its own thread."""

    def __init__(
        self,
        directory: Path,
        next_lsn: int,
        on_commit: Callable[[list[WalRecord]], None],
        max_file_bytes: int = MAX_FILE_BYTES,
    ):
        self.directory = directory
        self.next_lsn = next_lsn
        self.on_commit = on_commit
        self.max_file_bytes = max_file_bytes
        self.queued_bytes = 0  # enqueued, not yet written (back-pressure reads it)
        self.syncs = 0
        self.sync_seconds = 0.0
        self.records = 0
        self._queue: list[WalRecord] = []
        self._cond = threading.Condition()
        self._stop = False
        self._rotate = False
        self._fd: int | None = None
        self._path: Path | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.file_max_lsn: dict[Path, int] = {}  # files written or found, and the last lsn in each

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, name="wal-writer", daemon=True)
        self._thread.start()

    def append(self, header: dict[str, Any], body: bytes) -> asyncio.Future[WalRecord]:
        """Queue a record; the future resolves (with its lsn) once synced and applied."""
        assert self._loop is not None
        future: asyncio.Future[WalRecord] = self._loop.create_future()
        record = WalRecord(header, body, future=future)
        with self._cond:
            if self._stop:
                raise WalError("the write-ahead log is closed")
            self._queue.append(record)
            self.queued_bytes += len(body)
            self._cond.notify()
        return future

    def rotate(self) -> None:
        """Start a new file with the next group, so every older file can be deleted after a persist."""
        with self._cond:
            self._rotate = True

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete_up_to(self, lsn: int) -> int:
        """Delete the files whose every record is at or below `lsn` (never the file being written)."""
        deleted = 0
        with self._cond:
            for path, last in list(self.file_max_lsn.items()):
                if last <= lsn and path != self._path:
                    path.unlink(missing_ok=True)
                    del self.file_max_lsn[path]
                    deleted += 1
        return deleted

    # -- writer thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if not self._queue and self._stop:
                    return
                group, self._queue = self._queue, []
                rotate, self._rotate = self._rotate, False
            error: BaseException | None = None
            try:
                self._write(group, rotate)
            except Exception as e:
                error = e
            with self._cond:
                self.queued_bytes -= sum(len(r.body) for r in group)
            assert self._loop is not None
            try:
                self._loop.call_soon_threadsafe(self._finish, group, error)
            except RuntimeError:  # the loop is closed: shutting down
                return

    def _open(self, lsn: int) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._path = self.directory / f"wal-{lsn:016d}.log"
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(self.directory)
        self.file_max_lsn.setdefault(self._path, lsn - 1)

    def _write(self, group: list[WalRecord], rotate: bool) -> None:
        import time

        lsn = self.next_lsn
        for record in group:
            record.lsn = lsn
            lsn += 1
        if self._fd is None or rotate or os.lseek(self._fd, 0, os.SEEK_END) >= self.max_file_bytes:
            self._open(group[0].lsn)
        assert self._fd is not None
        payload = memoryview(b"".join(r.encode() for r in group))
        start = os.lseek(self._fd, 0, os.SEEK_END)
        began = time.monotonic()
        try:
            while payload:  # unbuffered: a failed write leaves nothing pending to flush later
                payload = payload[os.write(self._fd, payload) :]
            os.fsync(self._fd)
        except OSError as e:
            self._cut_back(start)
            raise WalError(f"cannot write the write-ahead log in {self.directory}: {e.strerror or e}") from e
        self.sync_seconds += time.monotonic() - began
        self.syncs += 1
        self.records += len(group)
        self.next_lsn = lsn
        assert self._path is not None
        self.file_max_lsn[self._path] = lsn - 1

    def _cut_back(self, offset: int) -> None:
        """Drop a partly written group so the file ends with a whole record; else start a new file."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, offset)
            os.fsync(self._fd)
        except OSError:
            log.error("could not cut the write-ahead log back after a failed write; starting a new file")
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None  # the torn tail is skipped by replay: a reader stops at a bad record

    def _finish(self, group: list[WalRecord], error: BaseException | None) -> None:
        if error is None:
            try:
                self.on_commit(group)
            except Exception as e:  # applying must never leave a pusher waiting
                log.exception("applying committed records failed")
                error = e
        for record in group:
            if record.future is not None and not record.future.done():
                if error is None:
                    record.future.set_result(record)
                else:
                    record.future.set_exception(error)
