"""`strata quickstart --metadata postgresql://...`: the whole cluster on a PostgreSQL metadata store."""

from __future__ import annotations

import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from strata.storage import open_metadata_store
from tests.quickstart.test_quickstart import PUBLISHED, argv

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_quickstart_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    """libpq finds the password in PGPASSFILE (set by the postgres_server fixture), as it would in
    an operator's ~/.pgpass; the nodes get the URL in their environment, never on a command line."""
    done = subprocess.run(
        argv(tmp_path, "--exit-after-query", "--realtime-port", "0", "--metadata", postgres_url),
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    for page, edits in PUBLISHED:
        assert any(page in line and f" {edits} " in line for line in lines), (page, done.stdout)
    assert not (tmp_path / "metadata.db").exists()
    with closing(open_metadata_store(postgres_url)) as store:
        assert store.data_sources() == ["wikipedia"]
