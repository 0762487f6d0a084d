"""A real `strata broker` process in HTTP discovery mode following a real change feed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import ExitStack

import httpx
import pytest
from starlette.applications import Starlette

from strata.cli.local_servers import free_port
from tests.broker.fake_data_node import FakeNode, node_app
from tests.broker.feed_server import FeedState, feed_app
from tests.broker.helpers import segment, serve

pytestmark = pytest.mark.integration


def start_broker(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    argv = [sys.executable, "-m", "strata.cli.main", "broker", "--port", str(port), *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"broker exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"{url}/status/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError("broker did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)


def test_broker_process_follows_feed_and_answers_api():
    state = FeedState()
    segs = [segment(interval=f"2015-09-{d:02d}/2015-09-{d + 1:02d}", dims=("page", "user")) for d in (12, 13)]
    for s in segs:
        state.load(s)
    node = FakeNode()
    app = Starlette(routes=[*feed_app(state).routes, *node_app(node).routes])
    with ExitStack() as stack:
        port = stack.enter_context(serve(app))
        proc, url = start_broker("--discovery", "http", "--nodes", f"127.0.0.1:{port}")
        stack.callback(stop, proc)
        with httpx.Client(base_url=url, timeout=10) as http:
            deadline = time.monotonic() + 20
            while http.get("/druid/v2/datasources").json() != ["wiki"]:
                assert time.monotonic() < deadline, "broker never saw the announced segments"
                time.sleep(0.1)
            assert http.get("/status/ready").json() is True
            cols = http.get("/druid/v2/datasources/wiki", params={"interval": "2015-09-12/2015-09-14"}).json()
            assert cols == {"dimensions": ["page", "user"], "metrics": ["added"]}
            state.drop(segs[0])
            while (
                len(
                    http.get(
                        "/druid/v2/datasources/wiki/candidates", params={"intervals": "2015-09-01/2015-10-01"}
                    ).json()
                )
                != 1
            ):
                assert time.monotonic() < deadline, "broker never saw the drop"
                time.sleep(0.1)
            bad = http.post("/druid/v2/", content=b"{oops", headers={"Content-Type": "application/json"})
            assert bad.status_code == 400 and bad.json()["error"] == "Json parse failed"
            status = http.get("/status").json()
            assert status["inventory"]["kind"] == "http" and status["segments"] == 1
            assert "strata_broker_inventory_segments 1.0" in http.get("/metrics").text


def test_broker_refuses_bad_settings_with_a_clear_message():
    proc = subprocess.run(
        [sys.executable, "-m", "strata.cli.main", "broker", "--discovery", "http", "--nodes", "nonsense"],
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 2 and b"HOST:PORT" in proc.stderr
