"""`strata quickstart --secure`: the whole quickstart with security on; the admin password is
generated into DIR/admin-password (mode 600) and only its path is printed."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from strata.cli.local_servers import free_port

pytestmark = pytest.mark.integration


def test_quickstart_secure(tmp_path: Path) -> None:
    work = tmp_path / "qs"
    argv = [sys.executable, "-P", "-m", "strata.cli.main", "quickstart", "--dir", str(work), "--port", str(free_port()),
            "--historical-ports", f"{free_port()},{free_port()}", "--realtime-port", str(free_port()),
            "--coordinator-port", str(free_port()), "--secure", "--exit-after-query"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    password_file = work / "admin-password"
    assert stat.S_IMODE(password_file.stat().st_mode) == 0o600
    password = password_file.read_text().strip()
    assert len(password) >= 20
    assert str(password_file) in done.stdout
    assert "Top 10 pages" in done.stdout  # the tutorial query answered through the secured broker
    internal = (work / "internal-password").read_text().strip()
    for secret in (password, internal):
        assert secret not in done.stdout and secret not in done.stderr
        for log in work.glob("*.log"):
            assert secret not in log.read_text(errors="replace"), log.name
