"""Every `bash tested` / `python tested` block of README.md and docs/*.md runs, in document order,
against one real `strata quickstart` on free ports; where a command is followed by `# ` lines (a
python block by `# prints:` lines), its output must be exactly that (as JSON when it parses as
JSON). The docs cannot drift from what Strata does. Blocks run in the directory holding the
quickstart's working directory `quickstart/`, so the docs can name its files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from harness.processes import sigint_ignored_by_children
from strata.cli.ports import free_port
from tests.docs.extract import Block, commands, fenced_blocks, python_expected

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MARK = "@@strata-docs-command-done@@"
# the ports the docs show: broker, historicals, real-time node, ZooKeeper, and the extra nodes the
# chapters start (a second broker, a third historical, a second real-time node, memcached), and the
# coordinator-overlord
DOC_PORTS = (8082, 8083, 8084, 8100, 2181, 8090, 8085, 8101, 11211, 8081)
# the nodes (the quickstart's and those the blocks start) read the metadata store and the
# coordinator's lookups every second instead of every 5 and 10 s: the blocks wait for new segments
# and lookups with `until` loops, which then end within a second of the change
POLLS = {"STRATA_POLL_PERIOD": "1", "STRATA_LOOKUP_POLL_PERIOD": "1"}


def reserved_ports(count: int) -> list[int]:
    """Free loopback ports for the quickstart and the extra nodes the docs start minutes later:
    from this worker's slice below the kernel's ephemeral range (`strata.cli.ports`), where no
    `bind(0)`, outgoing connection or other xdist worker takes one meanwhile (once memcached found
    its port taken by an HTTP server)."""
    ports: list[int] = []
    while len(ports) < count:
        ports.append(free_port(excluding={*DOC_PORTS, *ports}))
    return ports


@dataclass(frozen=True)
class Cluster:
    ports: dict[int, int]  # a port the docs show -> this run's
    cwd: Path

    def substitute(self, text: str) -> str:
        """The docs' ports replaced by this run's (after `:`, `=` or a space: `--port 8090`)."""
        pattern = r"(?<=[:= ])(" + "|".join(str(p) for p in self.ports) + r")\b"
        return re.sub(pattern, lambda m: str(self.ports[int(m.group(1))]), text)


@pytest.fixture(scope="module")
def docs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the blocks run (and Spark's JVM): the quickstart's `quickstart/` is in it."""
    return tmp_path_factory.mktemp("docs")


@pytest.fixture(scope="module")
def quickstart(docs_dir: Path) -> Iterator[Cluster]:
    base = docs_dir
    work = base / "quickstart"
    work.mkdir()
    ports = dict(zip(DOC_PORTS, reserved_ports(len(DOC_PORTS)), strict=True))
    argv = [sys.executable, "-P", "-m", "strata.cli.main", "quickstart", "--dir", str(work), "--port", str(ports[8082]),
            "--historical-ports", f"{ports[8083]},{ports[8084]}", "--realtime-port", str(ports[8100]),
            "--coordinator-port", str(ports[8081])]  # fmt: skip
    log = (work / "quickstart.out").open("wb")
    with sigint_ignored_by_children():
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=_env()
        )
    port = ports[8082]
    try:
        deadline = time.monotonic() + 240
        while True:
            assert proc.poll() is None, (work / "quickstart.out").read_text()[-3000:]
            assert time.monotonic() < deadline, "quickstart not ready in 240 s"
            try:
                resp = httpx.post(f"http://127.0.0.1:{port}/druid/v2/sql",
                                  json={"query": "SELECT COUNT(*) AS n FROM wikipedia"}, timeout=5)  # fmt: skip
                if resp.status_code == 200 and resp.json() == [{"n": 39244}]:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        zk = re.search(r"ZooKeeper on 127\.0\.0\.1:(\d+)", (work / "quickstart.out").read_text())
        assert zk, "the docs need the quickstart's ZooKeeper"
        ports[2181] = int(zk.group(1))
        yield Cluster(ports, base)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


class SparkGateway:
    """The docs' Spark JVM (tests/docs/spark_gateway.py), started beside the quickstart and awaited
    by the first Python block that needs it."""

    def __init__(self, cwd: Path) -> None:
        argv = [sys.executable, "-m", "tests.docs.spark_gateway"]
        # a process group of its own with the JVM, stopped whole whatever happened
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=cwd,
                                     env={**_env(), "PYTHONPATH": str(REPO)}, start_new_session=True)  # fmt: skip
        self._env: dict[str, str] | None = None

    def env(self, timeout: float = 240) -> dict[str, str]:
        if self._env is None:
            assert self.proc.stdout is not None
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
            assert ready, f"the Spark gateway did not start in {timeout:.0f} s"
            line = self.proc.stdout.readline().split()  # the port and secret, once the JVM is up
            assert len(line) == 2, f"the Spark gateway did not start (exit {self.proc.poll()})"
            self._env = {"PYSPARK_GATEWAY_PORT": line[0], "PYSPARK_GATEWAY_SECRET": line[1]}
        return self._env

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # the helper returns; the JVM's own input closes with it
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # a JVM still starting, or one that outlived it
        self.proc.wait(10)


@pytest.fixture(scope="module")
def spark_gateway(docs_dir: Path) -> Iterator[SparkGateway]:
    gateway = SparkGateway(docs_dir)
    try:
        yield gateway
    finally:
        gateway.stop()


def runnable_blocks() -> list[Block]:
    return [b for b in fenced_blocks() if b.tested]


def _block_id(block: Block) -> str:
    first = next(line for line in block.body.splitlines() if line.strip())
    return f"{block.source}:{first[:60]}"


def test_the_docs_have_tested_commands() -> None:
    blocks = runnable_blocks()
    assert sum(len(commands(b)) for b in blocks if b.language == "bash") >= 5
    assert sum(b.language == "python" for b in blocks) >= 2


@pytest.mark.parametrize("block", runnable_blocks(), ids=_block_id)
def test_documented_block(spark_gateway: SparkGateway, quickstart: Cluster, block: Block) -> None:
    if block.language == "python":
        _run_python(quickstart, block, spark_gateway if "pyspark" in block.body else None)
    else:
        assert block.language == "bash", f"{block.source}: only bash and python blocks run"
        _run_bash(quickstart, block)


def _env() -> dict[str, str]:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return {**os.environ, **POLLS, "PATH": path}


def _run(
    argv: list[str], cwd: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a block in its own process group; past the timeout the whole group (the nodes a block
    started in the background, Spark's JVM) is stopped, so nothing outlives the test."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                          env={**_env(), **(env or {})}, start_new_session=True) as proc:  # fmt: skip
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
                try:
                    out, err = proc.communicate(timeout=15)
                    break
                except subprocess.TimeoutExpired:
                    continue
            pytest.fail(f"the block did not finish in {timeout:.0f} s:\n{argv[-1][:2000]}")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever the block left behind
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _run_python(cluster: Cluster, block: Block, spark: SparkGateway | None) -> None:
    code = cluster.substitute(block.body)
    done = _run([sys.executable, "-c", code], cluster.cwd, env=spark.env() if spark else None)
    assert done.returncode == 0, f"{block.source}:\n{code}\n{done.stdout}\n{done.stderr[-3000:]}"
    expected = python_expected(block)
    if expected is not None:
        assert done.stdout.strip() == cluster.substitute(expected), f"{block.source}:\n{code}"


def _run_bash(cluster: Cluster, block: Block) -> None:
    """The block as one bash script, each command followed by a marker with its exit status; any
    process the block left in the background is stopped when the script ends."""
    cmds = commands(block)
    script = "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n"
    script += "".join(f'{cluster.substitute(c.text)}\necho "{MARK} $?"\n' for c in cmds)
    done = _run(["bash", "-c", script], cluster.cwd)
    pieces = done.stdout.split(MARK)
    assert len(pieces) == len(cmds) + 1, (
        f"{block.source}: the block stopped early\n{done.stdout}\n{done.stderr}"
    )
    # pieces[i + 1] starts with command i's exit status, then holds command i + 1's output
    for i, command in enumerate(cmds):
        output = pieces[i] if i == 0 else pieces[i].split("\n", 1)[-1]
        status = pieces[i + 1].split("\n", 1)[0].strip()
        got = output.strip()
        assert status == "0", f"{command.source}: {command.text}\nexit {status}\n{got}\n{done.stderr}"
        if not command.expected:
            continue
        want = cluster.substitute("\n".join(command.expected))
        try:
            assert json.loads(got) == json.loads(want), f"{command.source}: {command.text}\ngot: {got}"
        except json.JSONDecodeError:
            assert got == want, f"{command.source}: {command.text}\ngot: {got}"
