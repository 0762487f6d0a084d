"""Every `bash tested` block of README.md (and docs/*.md) runs against a real `strata quickstart` on
free ports; where a command is followed by `# ` lines, its output must be exactly that (as JSON when
it parses as JSON). The docs cannot drift from what Strata does."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from harness.processes import sigint_ignored_by_children
from strata.local_servers import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```bash tested\n(.*?)^```", re.S | re.M)
PYTHON_FENCE = re.compile(r"^```python tested\n(.*?)^```", re.S | re.M)


@dataclass
class Command:
    source: str
    text: str
    expected: list[str] = field(default_factory=list)


def _open(text: str) -> bool:
    """Whether a command continues on the next line (a trailing backslash or an open quote)."""
    return text.endswith("\\") or text.count("'") % 2 == 1


def blocks() -> list[list[Command]]:
    """The commands of each `bash tested` block (a block runs in one shell: variables carry over)."""
    out: list[list[Command]] = []
    for doc in DOCUMENTS:
        for block in FENCE.findall(doc.read_text()):
            commands: list[Command] = []
            current: Command | None = None
            for line in block.splitlines():
                if current is not None and _open(current.text):
                    current.text += "\n" + line
                elif line.startswith("# ") or line == "#":
                    assert current is not None, f"output before any command in {doc.name}"
                    current.expected.append(line[2:])
                elif line.strip():
                    current = Command(doc.name, line)
                    commands.append(current)
            out.append(commands)
    return out


MARK = "@@strata-docs-command-done@@"


@dataclass(frozen=True)
class Ports:
    broker: int
    realtime: int

    def substitute(self, text: str) -> str:
        """The docs' default ports (broker 8082, real-time node 8100) replaced by this run's."""
        text = text.replace("127.0.0.1:8082", f"127.0.0.1:{self.broker}").replace(
            "port=8082", f"port={self.broker}"
        )
        return text.replace("127.0.0.1:8100", f"127.0.0.1:{self.realtime}")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ports]:
    work = tmp_path_factory.mktemp("quickstart")
    port, realtime = free_port(), free_port()
    argv = [sys.executable, "-P", "-m", "strata.cli", "quickstart", "--dir", str(work), "--port", str(port),
            "--historical-ports", f"{free_port()},{free_port()}", "--realtime-port", str(realtime)]  # fmt: skip
    log = (work / "quickstart.out").open("wb")
    with sigint_ignored_by_children():
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
        yield Ports(port, realtime)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def python_blocks() -> list[tuple[str, str, str | None]]:
    """(document, code, expected stdout from a `# prints:` line) of every `python tested` block."""
    out = []
    for doc in DOCUMENTS:
        for block in PYTHON_FENCE.findall(doc.read_text()):
            prints = [
                line.removeprefix("# prints:").strip()
                for line in block.splitlines()
                if line.startswith("# prints:")
            ]
            out.append((doc.name, block, "\n".join(prints) if prints else None))
    return out


def test_the_docs_have_tested_commands() -> None:
    assert sum(len(b) for b in blocks()) >= 5 and len(python_blocks()) >= 2


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b[1].splitlines()[0][:60])
def test_documented_python(quickstart: Ports, block: tuple[str, str, str | None]) -> None:
    source, code, expected = block
    code = quickstart.substitute(code)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{source}:\n{code}\n{done.stdout}\n{done.stderr[-3000:]}"
    if expected is not None:
        assert done.stdout.strip() == expected, f"{source}:\n{code}"


@pytest.mark.parametrize("block", blocks(), ids=lambda b: b[0].text.split("\n")[0][:60])
def test_documented_commands(quickstart: Ports, block: list[Command]) -> None:
    """The block as one bash script, each command followed by a marker with its exit status."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = "".join(f'{quickstart.substitute(c.text)}\necho "{MARK} $?"\n' for c in block)
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, env=env)
    pieces = done.stdout.split(MARK)
    assert len(pieces) == len(block) + 1, (
        f"{block[0].source}: the block stopped early\n{done.stdout}\n{done.stderr}"
    )
    # pieces[i + 1] starts with command i's exit status, then holds command i + 1's output
    for i, command in enumerate(block):
        output = pieces[i] if i == 0 else pieces[i].split("\n", 1)[-1]
        status = pieces[i + 1].split("\n", 1)[0].strip()
        got = output.strip()
        assert status == "0", f"{command.source}: {command.text}\nexit {status}\n{got}\n{done.stderr}"
        if not command.expected:
            continue
        want = "\n".join(command.expected)
        try:
            assert json.loads(got) == json.loads(want), f"{command.source}: {command.text}"
        except json.JSONDecodeError:
            assert got == want, f"{command.source}: {command.text}"
