"""The write-ahead log alone: records round-trip, a torn or corrupt tail is cut, group commit
shares fsyncs, and a failed write fails its waiters and leaves the log readable."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from strata.realtime.wal import WalError, WalRecord, WriteAheadLog, read_file, wal_files


async def _write(
    directory: Path, bodies: list[bytes], next_lsn: int = 1
) -> tuple[WriteAheadLog, list[WalRecord]]:
    applied: list[WalRecord] = []
    wal = WriteAheadLog(directory, next_lsn, applied.extend)
    wal.start(asyncio.get_running_loop())
    futures = [wal.append({"producer": "p", "seq": i}, body) for i, body in enumerate(bodies)]
    await asyncio.gather(*futures)
    return wal, applied


def test_records_round_trip_in_lsn_order_with_shared_fsyncs(tmp_path: Path) -> None:
    bodies = [os.urandom(i * 10) for i in range(200)]

    async def main() -> WriteAheadLog:
        wal, applied = await _write(tmp_path, bodies)
        assert [r.lsn for r in applied] == list(range(1, 201))
        wal.close()
        return wal

    wal = asyncio.run(main())
    assert wal.syncs < wal.records == 200  # concurrent appends were committed in groups
    read = [r for path in wal_files(tmp_path) for r, _ in read_file(path)]
    assert [r.body for r in read] == bodies
    assert [r.header["seq"] for r in read] == list(range(200))


@pytest.mark.parametrize("damage", ["torn", "garbage", "flipped"])
def test_a_damaged_tail_stops_reading_at_the_last_whole_record(tmp_path: Path, damage: str) -> None:
    async def main() -> None:
        wal, _ = await _write(tmp_path, [b"a" * 100, b"b" * 100, b"c" * 100])
        wal.close()

    asyncio.run(main())
    (path,) = wal_files(tmp_path)
    data = path.read_bytes()
    ends = [end for _, end in read_file(path)]
    if damage == "torn":
        path.write_bytes(data[: ends[1] + 10])
    elif damage == "garbage":
        path.write_bytes(data + b"\x00garbage")
    else:
        path.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    want = 3 if damage == "garbage" else 2
    assert [r.body[:1] for r, _ in read_file(path)] == [b"a", b"b", b"c"][:want]


def test_a_failed_write_fails_its_waiters_and_the_next_write_lands_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    fail = {"on": False}

    def flaky_write(fd: int, data: bytes) -> int:
        if fail["on"]:
            real_write(fd, bytes(data)[:7])  # part of the group reaches the file, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", flaky_write)

    async def main() -> None:
        wal, _ = await _write(tmp_path, [b"first"])
        fail["on"] = True
        with pytest.raises(WalError, match="No space left"):
            await wal.append({}, b"lost")
        fail["on"] = False
        record = await wal.append({}, b"second")
        assert record.lsn == 2  # the failed record took no lsn
        wal.close()

    asyncio.run(main())
    assert [r.body for path in wal_files(tmp_path) for r, _ in read_file(path)] == [b"first", b"second"]
