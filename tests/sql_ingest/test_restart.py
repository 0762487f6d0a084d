"""A REPLACE run whole by DuckDB survives its coordinator: the coordinator is SIGKILLed while the
task is held at its publish (its process dies with it), a second one on the same address and store
starts the task again, and the statement publishes once; the data source then holds exactly the
REPLACE's rows (what it replaced is gone), checked against DuckDB over the raw rows."""

from __future__ import annotations

import uuid
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from harness.processes import running
from strata.storage import open_metadata_store
from tests.cluster.cluster_kit import write_rows
from tests.coordinator.kit import TASKS, coordinator, publishing, wait_for, wait_publishing
from tests.sql_ingest.kit import eventually, oracle, run_sql, scene, sql_string, submit_sql

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OLD = [{"ts": f"2022-07-0{1 + h % 2}T{h:02d}:00:00Z", "k": "old", "n": h} for h in range(24)]
NEW = [{"ts": f"2022-07-0{1 + h % 3}T{h % 24:02d}:30:00Z", "k": f"k{h % 4}", "n": h * 10} for h in range(90)]


def _source(path: Path) -> str:
    files = sql_string(f'{{"type": "local", "files": ["{path}"]}}')
    return f'TABLE(EXTERN({files}, \'{{"type": "json"}}\')) EXTEND (ts VARCHAR, k VARCHAR, n BIGINT)'


def test_a_replace_killed_with_its_coordinator_is_started_again_and_publishes_once(
    tmp_path: Path, zk_hosts: str
) -> None:
    base, hold = f"/sqlrestart-{uuid.uuid4().hex[:8]}", tmp_path / "hold"
    old, new = write_rows(tmp_path / "old.json", OLD), write_rows(tmp_path / "new.json", NEW)
    with scene(tmp_path, zk_hosts, base, hold=hold) as s:
        run_sql(s.broker, f'INSERT INTO kept SELECT TIME_PARSE(ts) AS __time, k, n FROM {_source(old)} '
                          "PARTITIONED BY DAY")  # fmt: skip
        for marker in publishing(hold):  # the INSERT's publish left its marker: wait for the REPLACE's
            marker.unlink()
        (hold / "hold").touch()
        task_id = submit_sql(s.broker, f"""REPLACE INTO kept OVERWRITE ALL
            SELECT TIME_FLOOR(TIME_PARSE(ts), 'P1D') AS __time, k, COUNT(*) AS c, SUM(n) AS total
            FROM {_source(new)} GROUP BY 1, 2 PARTITIONED BY DAY""")  # fmt: skip
        wait_publishing(hold, 1)
        s.coordinator.kill()  # SIGKILL: its task process dies with it
        for marker in hold.glob("publishing-*"):
            marker.unlink()
        (hold / "hold").unlink()
        second = coordinator(tmp_path, str(tmp_path / "meta.db"), "--zk", zk_hosts, "--zk-base", base,
                             hold=hold, name="coordinator-2", port=s.coordinator.port)  # fmt: skip
        with running([second]):
            second.start()
            done = wait_for(second, task_id, "SUCCESS", "FAILED", timeout=180)
            assert done["statusCode"] == "SUCCESS", done
            log = httpx.get(f"{second.url}{TASKS}/task/{task_id}/log", timeout=30).text
            assert "the coordinator restarted while attempt 1 ran" in log and "attempt 2 started" in log
            want = oracle("SELECT strftime(date_trunc('day', ts::TIMESTAMP), '%Y-%m-%dT%H:%M:%S.000Z'), k, "
                          "COUNT(*), SUM(n) FROM new GROUP BY 1, 2 ORDER BY 1, 2", new=new)  # fmt: skip
            eventually(
                s.broker,
                "SELECT TIME_FORMAT(__time), k, c, total FROM kept GROUP BY 1, 2, 3, 4 ORDER BY 1, 2",
                want,
                s.nodes,
            )
    with closing(open_metadata_store(str(tmp_path / "meta.db"))) as store:
        used = store.used_segments("kept")
        every = store.segments("kept", include_unused=True)
    assert sorted(str(seg.interval) for seg in used) == sorted(
        {f"2022-07-0{d}T00:00:00.000Z/2022-07-0{d + 1}T00:00:00.000Z" for d in (1, 2, 3)}
    )
    assert len({seg.version for seg in used}) == 1  # one publish, one version
    assert len(every) == len(used) + 2  # the INSERT's two days, replaced (unused); nothing else
