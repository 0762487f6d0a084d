"""pydruid's native client (the real package) against a real broker."""

from __future__ import annotations

import urllib.request  # noqa: F401 - pydruid.client needs urllib.request imported first (pydruid #228)
from pathlib import Path
from typing import Any

import pytest
from pydruid.client import PyDruid
from pydruid.utils.aggregators import count, doublesum, longsum
from pydruid.utils.filters import Dimension

from tests.cluster.test_broker_cluster import cluster, raw  # noqa: F401 - the module's cluster fixture

pytestmark = pytest.mark.integration

INTERVAL = "2015-09-12/2015-09-13"


@pytest.fixture(scope="module")
def client(cluster: dict[str, Any]) -> PyDruid:  # noqa: F811
    return PyDruid(cluster["broker"].url, "druid/v2/")


def test_timeseries(client: PyDruid, wikipedia_sample: Path) -> None:
    q = client.timeseries(
        datasource="wikipedia", granularity="all", intervals=INTERVAL,
        aggregations={"edits": count("rows"), "added": doublesum("added")},
        filter=(Dimension("channel") == "#en.wikipedia") & ~(Dimension("page") == "Jeremy Corbyn"),
    )  # fmt: skip
    (edits, added), = raw("SELECT count(*), sum(added)::DOUBLE FROM RAW WHERE channel = '#en.wikipedia' "
                          "AND page <> 'Jeremy Corbyn'", wikipedia_sample)  # fmt: skip
    assert q.result[0]["result"] == {"edits": edits, "added": added}


def test_topn(client: PyDruid, wikipedia_sample: Path) -> None:
    q = client.topn(datasource="wikipedia", granularity="all", intervals=INTERVAL, dimension="channel",
                    metric="added", threshold=3, aggregations={"added": longsum("added")})  # fmt: skip
    want = raw(
        "SELECT channel, sum(added) s FROM RAW GROUP BY channel ORDER BY s DESC LIMIT 3", wikipedia_sample
    )
    assert [(r["channel"], r["added"]) for r in q.result[0]["result"]] == [tuple(w) for w in want]


def test_groupby(client: PyDruid, wikipedia_sample: Path) -> None:
    q = client.groupby(datasource="wikipedia", granularity="all", intervals=INTERVAL,
                       dimensions=["isRobot"], aggregations={"n": count("rows")})  # fmt: skip
    want = dict(raw("SELECT isRobot::VARCHAR, count(*) FROM RAW GROUP BY 1", wikipedia_sample))
    assert {r["event"]["isRobot"]: r["event"]["n"] for r in q.result} == want
    assert all(r["version"] == "v1" for r in q.result)


def test_scan(client: PyDruid, wikipedia_sample: Path) -> None:
    q = client.scan(datasource="wikipedia", granularity="all", intervals=INTERVAL, columns=["user"],
                    filter=Dimension("page") == "Jeremy Corbyn", limit=100)  # fmt: skip
    users = sorted(e["user"] for batch in q.result for e in batch["events"])
    want = sorted(u for (u,) in raw("SELECT user FROM RAW WHERE page = 'Jeremy Corbyn'", wikipedia_sample))
    assert users == want


def test_time_boundary_and_segment_metadata(client: PyDruid, wikipedia_sample: Path) -> None:
    tb = client.time_boundary(datasource="wikipedia")
    assert tb.result[0]["result"]["minTime"] == "2015-09-12T00:46:58.771Z"
    sm = client.segment_metadata(datasource="wikipedia", intervals=INTERVAL, merge=True)
    ((rows,),) = raw("SELECT count(*) FROM RAW", wikipedia_sample)
    assert sm.result[0]["numRows"] == rows
