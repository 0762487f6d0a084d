"""`strata quickstart`: a whole cluster on one machine over Druid's wikipedia sample.

Ingests the sample into day segments (once; later runs reuse the data), starts ZooKeeper from
Debian's package when it is installed (otherwise the broker follows the historicals' HTTP change
feeds and says so), two historicals, a real-time node (`wikipedia_live`, pushed to on port 8100),
a coordinator-overlord (Druid's task and data-management APIs on 8081, as Druid's quickstart) and
a broker as child processes logging into the working
directory, waits until the broker sees every segment, runs Druid's tutorial "top 10 pages by
edits" query, prints the table, and serves on 127.0.0.1:8082 until SIGINT or SIGTERM.

The broker caches (`--cache lru`: per-segment partials and whole answers in its process), so a
new user sees the cache the product is built around; `--cache none` runs it without, which is
`strata broker`'s own default (as Druid's).

Stopping (either signal, see strata.server.lifecycle) stops the broker, the coordinator, the data
nodes and ZooKeeper in that order and exits 0; the children also exit by themselves if this process
dies, even by `kill -9`. One quickstart per working directory and ports: a second one says so and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from strata.server.lifecycle import Shutdown, add_drain_flag, child_popen_kwargs, raise_on_signals

HELP = (
    "Run a local cluster (ZooKeeper, two historicals, a real-time node, a coordinator-overlord, a broker) "
    "on the wikipedia sample"
)

TOP_PAGES = {
    "queryType": "topN",
    "dataSource": "wikipedia",
    "intervals": ["2015-09-12/2015-09-13"],
    "granularity": "all",
    "dimension": "page",
    "metric": "count",
    "threshold": 10,
    "aggregations": [{"type": "count", "name": "count"}],
}

# the real-time node's data source: wikipedia-like edits pushed as they happen
LIVE_SPEC = {
    "dataSchema": {
        "dataSource": "wikipedia_live",
        "timestampSpec": {"column": "time", "format": "iso"},
        "dimensionsSpec": {"dimensions": ["channel", "page", "user"]},
        "metricsSpec": [
            {"type": "count", "name": "count"},
            {"type": "longSum", "name": "added", "fieldName": "added"},
        ],
        "granularitySpec": {"segmentGranularity": "hour", "queryGranularity": "minute", "rollup": True},
    },
    "tuningConfig": {
        "windowPeriod": "PT10M",
        "intermediatePersistPeriod": "PT10M",
        "maxRowsInMemory": 150000,
    },
}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", default="quickstart", help="working directory (data, logs)")
    parser.add_argument("--port", type=int, default=8082, help="broker port")
    parser.add_argument("--historical-ports", default="8083,8084", help="two historical ports")
    parser.add_argument("--realtime-port", type=int, default=8100, help="real-time node port (0: none)")
    parser.add_argument(
        "--coordinator-port", type=int, default=8081, help="coordinator-overlord port, Druid's (0: none)"
    )
    parser.add_argument(
        "--cache",
        choices=["lru", "none"],
        default="lru",
        help="the broker's cache: lru (per-segment partials and whole answers, in the broker) or none",
    )
    parser.add_argument("--exit-after-query", action="store_true", help="stop after printing the table")
    parser.add_argument(
        "--metadata",
        help="metadata store: a SQLite file or postgresql://USER@HOST:PORT/DB (default: DIR/metadata.db)",
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="run with security on: an admin password is generated into DIR/admin-password (mode 600)",
    )
    add_drain_flag(parser)


class AlreadyRunning(RuntimeError):
    """Another quickstart holds the working directory or a port."""


@contextlib.contextmanager
def _claim(work: Path, ports: list[int]) -> Iterator[None]:
    """Hold `quickstart.lock` in the working directory and check the ports are free, or say why not."""
    lock_path = work / "quickstart.lock"
    with lock_path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            owner = lock.read().strip() or "?"
            raise AlreadyRunning(f"another quickstart (pid {owner}) is running in {work}") from None
        for port in ports:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    raise AlreadyRunning(f"port {port} is in use (another quickstart running?)") from None
        lock.seek(0)
        lock.truncate()
        lock.write(str(os.getpid()))
        lock.flush()
        yield


def _metadata(args: argparse.Namespace, work: Path) -> str:
    return str(args.metadata or work / "metadata.db")


def _ingest(work: Path, metadata: str) -> None:
    from strata.data import WIKIPEDIA_INDEX_SPEC, WIKIPEDIA_SAMPLE
    from strata.ingestion.api import ingest
    from strata.storage import open_metadata_store

    store = open_metadata_store(metadata)
    try:
        if store.used_segments("wikipedia"):
            print("wikipedia already ingested: reusing it")
            return
    finally:
        store.close()
    spec = json.loads(WIKIPEDIA_INDEX_SPEC.read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(WIKIPEDIA_SAMPLE.parent)
    summary = ingest(spec, deep_storage=work / "deep-storage", metadata=metadata)
    print(f"ingested {summary.rows_ingested:,} rows into {len(summary.segments)} segment(s)")


def _secret(work: Path, name: str) -> str:
    """A password kept in `work/name` (mode 600): generated on the first secured run, read after
    (the store takes the initial passwords once)."""
    from strata.security.passwords import generate_password

    path = work / name
    if path.exists():
        return path.read_text().strip()
    password = generate_password()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(password + "\n")
    return password


def _security(
    args: argparse.Namespace, work: Path
) -> tuple[list[str], dict[str, str], tuple[str, str] | None]:
    """Flags and environment for secured children, and the admin credentials the quickstart's own
    requests use; nothing with security off."""
    if not args.secure:
        return [], {}, None
    admin, internal = _secret(work, "admin-password"), _secret(work, "internal-password")
    env = {"STRATA_ADMIN_PASSWORD": admin, "STRATA_INTERNAL_PASSWORD": internal}
    return ["--authenticator", "basic"], env, ("admin", admin)


def _spawn(
    argv: list[str], log: Path, metadata: str | None = None, secrets: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    # the metadata store and passwords go in the environment, never argv: a URL may carry a
    # password, and a command line is visible to every user of the machine
    extra = {**({"STRATA_METADATA": metadata} if metadata else {}), **(secrets or {})}
    env = {**os.environ, **extra} if extra else None
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "strata.cli.main", *argv],  # -P: no cwd on sys.path
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            **child_popen_kwargs(env),  # its own session; exits when we die, even by kill -9
        )


def _exit_report(child: subprocess.Popen[bytes], log: Path) -> str:
    """Which node stopped, how, and the last line it logged: what an operator reads first."""
    last = ""
    with contextlib.suppress(OSError):
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
        last = f"; its last log line: {lines[-1][:300]}" if lines else ""
    return f"{log.stem} exited (code {child.returncode}){last}"


def _wait_for_segments(
    url: str,
    expected: int,
    children: dict[subprocess.Popen[bytes], Path],
    timeout: float,
    auth: tuple[str, str] | None = None,
) -> None:
    import httpx

    body = {"queryType": "segmentMetadata", "dataSource": "wikipedia", "analysisTypes": []}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child, log in children.items():
            if child.poll() is not None:
                raise RuntimeError(_exit_report(child, log))
        try:
            resp = httpx.post(f"{url}/druid/v2/", json=body, timeout=5, auth=auth)
            if resp.status_code == 200 and len(resp.json()) >= expected:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the broker did not see all {expected} segment(s) within {timeout:.0f}s")


def _print_top_pages(result: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Top 10 pages by edits, 2015-09-12 (Druid's tutorial query)")
    table.add_column("page")
    table.add_column("edits", justify="right")
    for row in result[0]["result"] if result else []:
        table.add_row(str(row["page"]), str(row["count"]))
    Console().print(table)


def _cache_line(status: dict[str, Any]) -> str:
    """What the running broker says of its cache (`GET /status/cache`), not what was asked of it."""
    if status.get("kind", "none") == "none":
        return "Broker cache: off (--cache none); the broker's own default, as Druid's"
    levels = "per-segment partials and whole answers" if "resultLevel" in status else "per-segment partials"
    return f"Broker cache: {status['kind']}, {levels} (--cache none to turn it off)"


def _stop(children: list[subprocess.Popen[bytes]], drain_s: float) -> None:
    for child in reversed(children):
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for child in reversed(children):
        try:
            child.wait(drain_s + 10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(5)


def run(args: argparse.Namespace) -> int:
    work = Path(args.dir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    ports = [args.port, *(int(p) for p in args.historical_ports.split(","))]
    claimed = [*ports, *(p for p in (args.realtime_port, args.coordinator_port) if p)]
    try:
        with raise_on_signals() as hold, _claim(work, claimed):
            return _run(args, work, ports[1:], hold)
    except AlreadyRunning as e:
        print(f"strata quickstart: {e}", file=sys.stderr)
        return 1
    except Shutdown:
        print("\nstopped")
        return 0


def _run(args: argparse.Namespace, work: Path, ports: list[int], hold: Callable[[], None]) -> int:
    import httpx

    from strata.cli.local_servers import ServerStartError, ZooKeeperServer, free_port
    from strata.storage import open_metadata_store

    logging.getLogger("httpx").setLevel(logging.WARNING)
    metadata = _metadata(args, work)
    _ingest(work, metadata)
    store = open_metadata_store(metadata)
    expected = len(store.used_segments("wikipedia"))
    store.close()

    secure_flags, secrets, auth = _security(args, work)
    zk: ZooKeeperServer | None = None
    children: dict[subprocess.Popen[bytes], Path] = {}  # each node and its log
    try:
        if ZooKeeperServer.available():
            promised = {args.port, *ports, args.realtime_port, args.coordinator_port}  # bound later
            zk_port = free_port(excluding=promised)
            zk = ZooKeeperServer(port=zk_port, data_dir=work / "zookeeper", tied=True).start()
            discovery = ["--zk", zk.address]
            print(f"ZooKeeper on {zk.address}")
        else:
            discovery = []
            print("ZooKeeper is not installed: the broker follows the historicals' HTTP change feeds")
        drain = ["--drain-seconds", str(args.drain_seconds)]
        # data nodes read their lookups from the coordinator (strata.server.lookup_sync)
        lookups = ["--coordinator", f"127.0.0.1:{args.coordinator_port}"] if args.coordinator_port else []
        for i, port in enumerate(ports):
            argv = [
                "historical", "--port", str(port), *discovery, *drain,
                "--deep-storage", str(work / "deep-storage"),
                "--segment-cache", str(work / f"segment-cache-{i}"), "--replicas", "2",
                *lookups, *secure_flags,
            ]  # fmt: skip
            log = work / f"historical-{i}.log"
            children[_spawn(argv, log, metadata, secrets)] = log
        nodes = ",".join(f"127.0.0.1:{p}" for p in ports)
        if args.realtime_port:
            spec = work / "realtime-spec.json"
            spec.write_text(json.dumps(LIVE_SPEC, indent=2))
            argv = [
                "realtime", "--port", str(args.realtime_port), *discovery, *drain, "--spec", str(spec),
                "--deep-storage", str(work / "deep-storage"),
                "--base-dir", str(work / "realtime"), *lookups, *secure_flags,
            ]  # fmt: skip
            log = work / "realtime.log"
            children[_spawn(argv, log, metadata, secrets)] = log
            nodes += f",127.0.0.1:{args.realtime_port}/realtime"
        broker_discovery = discovery or ["--discovery", "http", "--nodes", nodes]
        if args.coordinator_port:
            argv = [
                "coordinator", "--port", str(args.coordinator_port), *discovery, *drain,
                "--deep-storage", str(work / "deep-storage"), "--task-log-dir", str(work / "task-logs"),
                *secure_flags,
            ]  # fmt: skip
            log = work / "coordinator.log"
            children[_spawn(argv, log, metadata, secrets)] = log
            # with ZooKeeper the broker finds the coordinator's announcement, as Druid's nodes do
            broker_discovery += [] if discovery else ["--coordinator", f"127.0.0.1:{args.coordinator_port}"]
        broker_argv = ["broker", "--port", str(args.port), *broker_discovery, *drain, "--cache", args.cache,
                       *secure_flags]  # fmt: skip
        # a secured broker keeps its users in the metadata store; an open one needs none
        log = work / "broker.log"
        children[_spawn(broker_argv, log, metadata if args.secure else None, secrets)] = log
        url = f"http://127.0.0.1:{args.port}"
        _wait_for_segments(url, expected, children, timeout=120, auth=auth)
        resp = httpx.post(f"{url}/druid/v2/", json=TOP_PAGES, timeout=60, auth=auth)
        if resp.status_code != 200:
            raise RuntimeError(f"the tutorial query failed: HTTP {resp.status_code} {resp.text[:500]}")
        _print_top_pages(resp.json())
        print(_cache_line(httpx.get(f"{url}/status/cache", timeout=10, auth=auth).json()))
        if args.secure:
            password_file = work / "admin-password"
            print(f"Security on: user admin, its password in {password_file} (mode 600), e.g. "
                  f'curl -u "admin:$(cat {password_file})" {url}/status')  # fmt: skip
        if args.coordinator_port:
            print(f"Coordinator-overlord on http://127.0.0.1:{args.coordinator_port}: Druid's task API "
                  "(/druid/indexer/v1/task), data management (/druid/coordinator/v1/...)")  # fmt: skip
        if args.realtime_port:
            print(f"Real-time node taking pushes for wikipedia_live on "
                  f"http://127.0.0.1:{args.realtime_port}/v1/push/wikipedia_live")  # fmt: skip
        print(f"Web console on {url}/console/")
        print(f"Broker serving Druid's API on {url}/druid/v2/ ; logs in {work}. Ctrl-C to stop.")
        sys.stdout.flush()
        if args.exit_after_query:
            return 0
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        stopped = next(child for child in children if child.poll() is not None)
        print(f"{_exit_report(stopped, children[stopped])}; shutting down", file=sys.stderr)
        return 1
    except (RuntimeError, ServerStartError, httpx.HTTPError) as e:
        print(f"quickstart failed: {e} (logs in {work})", file=sys.stderr)
        return 1
    finally:
        hold()  # a signal from now on must not interrupt stopping the children
        print("shutting down: stopping the broker, the coordinator, the data nodes and ZooKeeper", flush=True)
        _stop(list(children), args.drain_seconds)
        if zk is not None:
            zk.stop()
