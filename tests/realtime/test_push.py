"""A real `strata realtime` process: pushes answered only when durable, exactly-once producers,
recovery after kill -9, clear errors. Expected answers are Python sums over the pushed events."""

from __future__ import annotations

import json
import random
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess, running
from strata.realtime.wal import read_file, wal_files
from tests.realtime.rt_kit import (
    DS,
    by_key,
    events,
    hourly,
    hourly_answer,
    key_answer,
    push,
    realtime,
    status,
    write_spec,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

DRUID_ERROR_KEYS = {
    "error",
    "errorMessage",
    "errorClass",
    "host",
    "errorCode",
    "persona",
    "category",
    "context",
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("rt-push")
    proc = realtime(root, write_spec(root))
    with running([proc]):
        proc.start()
        yield proc


def test_pushed_events_are_answered_at_once(node: StrataProcess) -> None:
    first, second = events(500), events(300, offset=500)
    r1 = push(node, first, "loader", 1)
    assert r1.status_code == 200, r1.text
    assert r1.json() | {"parseErrors": []} == {**r1.json(), "eventCount": 500, "accepted": 500, "received": 500,
                                               "unparseable": 0, "thrownAway": 0, "parseErrors": []}  # fmt: skip
    r2 = push(node, second, "loader", 2, ndjson=True, firehose=True)  # Druid's headers, newline-delimited
    assert r2.json()["accepted"] == 300
    pushed = first + second
    assert hourly_answer(node) == hourly(pushed)
    assert key_answer(node) == by_key(pushed)
    assert status(node)["type"] == "realtime"
    feed = httpx.get(
        f"{node.url}/druid-internal/v1/segments", params={"counter": -1, "timeout": 1000}, timeout=10
    ).json()
    assert {r["interval"].split("/")[0][:13] for r in feed["requests"]} == {
        "2025-01-01T00",
        "2025-01-01T01",
        "2025-01-01T02",
    }


def test_a_retried_batch_counts_once(node: StrataProcess) -> None:
    before = hourly_answer(node)
    batch = events(200, offset=10_000)
    first = push(node, batch, "retrier", 7)
    again = push(node, batch, "retrier", 7)
    assert first.status_code == again.status_code == 200
    assert again.json()["duplicate"] is True and again.json()["accepted"] == 200
    older = push(node, batch, "retrier", 3)  # below the highest applied number: a late retry
    assert older.json()["duplicate"] is True
    # ten concurrent attempts of one new batch: one applies, the others share its outcome
    racing = events(50, offset=20_000)
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: push(node, racing, "racer", 1), range(10)))
    assert all(a.status_code == 200 for a in answers)
    assert sum(not a.json().get("duplicate") for a in answers) == 1
    want = {h: (c, s) for h, c, s in before}
    for h, c, s in hourly(batch + racing):
        old = want.get(h, (0, 0))
        want[h] = (old[0] + c, old[1] + s)
    assert hourly_answer(node) == [(h, c, s) for h, (c, s) in sorted(want.items())]


@pytest.mark.parametrize(
    ("body", "headers", "status_code", "fragment"),
    [
        (b'[{"ts": ', {}, 400, "not valid JSON"),
        (b'"hello"', {}, 400, "JSON array"),
        (b"[1, 2, 3]", {}, 400, "none of the 3 events"),
        (b'[{"ts": "yesterday-ish", "k": "a"}]', {}, 400, "none of the 1 events"),
        (b"[]", {"X-Strata-Producer-Id": "p", "X-Strata-Producer-Seq": "x"}, 400, "must be an integer"),
        (b"[]", {"X-Strata-Producer-Seq": "1"}, 400, "needs a producer id"),
    ],
)
def test_bad_input_gets_a_druid_shaped_error(
    node: StrataProcess, body: bytes, headers: dict[str, str], status_code: int, fragment: str
) -> None:
    resp = httpx.post(f"{node.url}/v1/push/{DS}", content=body, headers=headers, timeout=10)
    assert resp.status_code == status_code, resp.text
    assert resp.json().keys() >= DRUID_ERROR_KEYS
    assert fragment in resp.json()["errorMessage"]


def test_unknown_data_source_and_oversized_body(node: StrataProcess) -> None:
    resp = httpx.post(f"{node.url}/v1/push/other", content=b"[]", timeout=10)
    assert resp.status_code == 404 and resp.json().keys() >= DRUID_ERROR_KEYS
    big = b"[" + b",".join([b'{"ts": "2025-01-01T00:00:00Z", "k": "' + b"x" * 1000 + b'"}'] * 17_000) + b"]"
    resp = httpx.post(f"{node.url}/v1/push/{DS}", content=big, timeout=30)
    assert resp.status_code == 413 and "split it" in resp.json()["errorMessage"]


def test_partly_bad_batch_reports_each_bad_event(node: StrataProcess) -> None:
    good = events(3, offset=30_000)
    rows: list[Any] = [
        good[0],
        {"ts": "not a time", "k": "a"},
        good[1],
        42,
        {"ts": good[2]["ts"], "n": "many"},
    ]
    resp = push(node, rows)
    body = resp.json()
    assert resp.status_code == 200
    assert (body["accepted"], body["unparseable"], body["received"]) == (2, 3, 5)
    reasons = " ".join(body["parseErrors"])
    assert "event 2" in reasons and "event 4" in reasons and "event 5" in reasons and "'n'" in reasons


def _log_records(wal: Path) -> list[tuple[dict[str, Any], bytes]]:
    return [(r.header, r.body) for path in wal_files(wal) for r, _ in read_file(path)]


LONG_MAX = 2**63 - 1  # Druid's producer sequence number is a Java long


HOSTILE_PRODUCER_HEADERS = [
    (
        {"X-Strata-Producer-Id": "p", "X-Strata-Producer-Seq": "99999999999999999999999999"},
        f"must be at most {LONG_MAX}",
    ),
    (
        {"X-Firehose-Producer-Id": "p", "X-Firehose-Producer-Seq": str(LONG_MAX + 1)},
        f"must be at most {LONG_MAX}",
    ),
    ({"X-Strata-Producer-Id": "p", "X-Strata-Producer-Seq": "9" * 5000}, "must be an integer"),
    ({"X-Strata-Producer-Id": "x" * 257, "X-Strata-Producer-Seq": "1"}, "1 to 256 characters, got 257"),
    ({"X-Strata-Producer-Id": "x" * 10_000, "X-Strata-Producer-Seq": "1"}, "1 to 256 characters, got 10000"),
    ({"X-Strata-Producer-Id": "x" * 10_000}, "1 to 256 characters, got 10000"),
    ({"X-Strata-Producer-Id": "", "X-Strata-Producer-Seq": "1"}, "1 to 256 characters, got 0"),
]


def test_hostile_producer_headers_are_refused_before_the_log(tmp_path: Path) -> None:
    """Each a 400 in Druid's error body, and the write-ahead log holds the same records as before."""
    proc = realtime(tmp_path, write_spec(tmp_path))
    wal = tmp_path / "rt-base" / "wal"
    first, refused, last = events(20), events(10, offset=100), events(5, offset=200)
    with running([proc]):
        proc.start()
        assert push(proc, first, "loader", 1).status_code == 200
        logged = _log_records(wal)
        assert len(logged) == 1
        for headers, fragment in HOSTILE_PRODUCER_HEADERS:
            resp = httpx.post(
                f"{proc.url}/v1/push/{DS}", content=json.dumps(refused).encode(), headers=headers, timeout=10
            )
            assert resp.status_code == 400, (fragment, resp.text)
            body = resp.json()
            assert body.keys() >= DRUID_ERROR_KEYS and body["errorCode"] == "invalidInput"
            assert fragment in body["errorMessage"] and len(body["errorMessage"]) < 200, body
            assert _log_records(wal) == logged, fragment
        # the largest id and number are taken (and kept exactly once)
        assert push(proc, last, "x" * 256, LONG_MAX).status_code == 200
        again = push(proc, last, "x" * 256, LONG_MAX).json()
        assert again["duplicate"] is True and again["producerSeq"] == LONG_MAX
        records = _log_records(wal)
        assert records[:1] == logged and len(records) == 2
        assert (records[1][0]["producer"], records[1][0]["seq"]) == ("x" * 256, LONG_MAX)
        assert hourly_answer(proc) == hourly(first + last)


def test_server_time_window_throws_away_old_events(tmp_path: Path) -> None:
    proc = realtime(tmp_path, write_spec(tmp_path, policy="serverTime", window="PT10M"))
    now = datetime.now(UTC)
    fresh = [{"ts": now.strftime("%Y-%m-%dT%H:%M:%S.000Z"), "k": "a", "n": 5}]
    stale = [{"ts": (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z"), "k": "b", "n": 7}] * 3
    ahead = [{"ts": (now + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.000Z"), "k": "c", "n": 9}] * 2
    with running([proc]):
        proc.start()
        body = push(proc, fresh + stale + ahead).json()
        # Druid's serverTime policy: only [now - windowPeriod, now + windowPeriod] is taken
        assert (body["accepted"], body["thrownAway"]) == (1, 5)
        assert any("before the window start" in r for r in body["parseErrors"])
        assert any("2 events after the window end" in r for r in body["parseErrors"])
        day = f"{(now - timedelta(days=2)).date()}/{(now + timedelta(days=1)).date()}"
        assert [(c, s) for _, c, s in hourly_answer(proc, day)] == [(1, 5)]


def test_kill_9_loses_no_acknowledged_event_and_applies_none_twice(tmp_path: Path) -> None:
    """Four producers push numbered batches, retrying each until acknowledged; the node is killed
    (SIGKILL) twice mid-stream and restarted on the same port. Rollup and a small memory limit make
    persists and log replay meet."""
    spec = write_spec(tmp_path, rollup=True, max_rows=700, query_granularity="minute")
    proc = realtime(tmp_path, spec)
    port = proc.port
    acked: dict[tuple[str, int], list[dict[str, Any]]] = {}
    lock = threading.Lock()
    stop = threading.Event()

    def producer(name: str) -> None:
        rnd = random.Random(name)
        for seq in range(1, 41):
            batch = events(rnd.randint(20, 120), offset=rnd.randint(0, 10**6))
            while not stop.is_set():
                try:
                    resp = push(proc_box[0], batch, name, seq, timeout=10)
                except httpx.HTTPError:
                    resp = None
                if resp is not None and resp.status_code == 200:
                    with lock:
                        acked[(name, seq)] = batch
                    break
                threading.Event().wait(0.05)

    proc_box = [proc]
    procs = [proc]
    with running(procs):
        proc.start()
        threads = [threading.Thread(target=producer, args=(f"p{i}",)) for i in range(4)]
        for t in threads:
            t.start()
        for _ in range(2):
            deadline = len(acked) + 25
            while len(acked) < deadline and any(t.is_alive() for t in threads):
                threading.Event().wait(0.05)
            proc_box[0].kill()  # SIGKILL: no clean shutdown, no final persist
            restarted = StrataProcess(proc.subcommand, proc.args, proc.log_path, port=port)
            procs.append(restarted)
            restarted.start()
            proc_box[0] = restarted
        for t in threads:
            t.join(timeout=200)
        stop.set()
        assert len(acked) == 160
        pushed = [e for batch in acked.values() for e in batch]
        assert hourly_answer(proc_box[0]) == hourly(pushed)
        assert key_answer(proc_box[0]) == by_key(pushed)
        assert status(proc_box[0])["ingestion"]["producers"] == 4


def _retry_until_acked(node: StrataProcess, batch: list[dict[str, Any]], producer: str, seq: int,
                       seen: dict[int, int]) -> None:  # fmt: skip
    for _ in range(600):
        resp = push(node, batch, producer, seq)
        seen[resp.status_code] = seen.get(resp.status_code, 0) + 1
        if resp.status_code == 200:
            return
        assert resp.status_code in (429, 503), resp.text
        assert int(resp.headers["Retry-After"]) >= 1
        assert {"error", "errorMessage", "category"} <= resp.json().keys()
        threading.Event().wait(0.05)
    raise AssertionError("never acknowledged")


class SlowPersists(StrataProcess):
    """A node whose first persist takes a second more: memory fills while it runs, for certain."""

    _slowed = (
        "import sys, time\n"
        "import strata.realtime.node as node\n"
        "from strata.cli.main import main\n"
        "write, slowed = node.write_part, []\n"
        "def slow(*args, **kwargs):\n"
        "    if not slowed:\n"
        "        slowed.append(time.sleep(1.0))\n"
        "    return write(*args, **kwargs)\n"
        "node.write_part = slow\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )

    def argv(self) -> list[str]:
        return [sys.executable, "-c", self._slowed, *super().argv()[3:]]


def test_back_pressure_answers_429_and_every_retried_event_counts_once(tmp_path: Path) -> None:
    plain = realtime(tmp_path, write_spec(tmp_path, max_rows=300))
    proc = SlowPersists(plain.subcommand, plain.args, plain.log_path, port=plain.port)
    seen: dict[int, int] = {}
    batches = [events(250, offset=i * 250) for i in range(24)]
    with running([proc]):
        proc.start()

        def producer(p: int) -> None:  # a producer sends its batches in order, each until acknowledged
            for i in range(p, 24, 4):
                _retry_until_acked(proc, batches[i], f"bp{p}", i, seen)

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(producer, range(4)))
        pushed = [e for b in batches for e in b]
        assert hourly_answer(proc) == hourly(pushed)
        assert status(proc)["ingestion"]["persists"] >= 1
    assert seen.get(429, 0) >= 1, seen  # memory filled while a persist ran


class LimitedFileSize(StrataProcess):
    """A node whose files cannot grow past `fsize` bytes (RLIMIT_FSIZE): writes fail as on a full disk."""

    fsize: int = 64 * 1024

    def argv(self) -> list[str]:
        return ["prlimit", f"--fsize={self.fsize}", *super().argv()]


def test_a_full_disk_is_a_clear_503_and_loses_no_acknowledged_event(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    plain = realtime(tmp_path, spec)
    limited = LimitedFileSize(plain.subcommand, plain.args, plain.log_path, port=plain.port)
    seen: dict[int, int] = {}
    acked: list[dict[str, Any]] = []
    with running([limited]):
        limited.start()
        for seq in range(1, 31):
            batch = events(100, offset=seq * 100)
            _retry_until_acked(limited, batch, "disk", seq, seen)
            acked += batch
        assert seen.get(503, 0) >= 1, seen
        full = push(limited, events(100), "disk", 99)
        assert full.status_code in (200, 503)
        if full.status_code == 503:
            assert "write-ahead log" in full.json()["errorMessage"]
        else:
            acked += events(100)
        limited.kill()
    restarted = realtime(tmp_path, spec)  # the disk has room again; same base dir
    with running([restarted]):
        restarted.start()
        assert hourly_answer(restarted) == hourly(acked)


def test_sigterm_stops_cleanly_and_a_restart_serves_the_same_rows(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    first = realtime(tmp_path, spec)
    pushed = events(700)
    with running([first]):
        first.start()
        assert push(first, pushed, "term", 1).status_code == 200
        assert first.stop() == 0  # SIGTERM: drain, leave, close the log, exit 0
    again = realtime(tmp_path, spec)
    with running([again]):
        again.start()
        assert hourly_answer(again) == hourly(pushed)
        assert push(again, pushed, "term", 1).json()["duplicate"] is True  # the producer's state survived
