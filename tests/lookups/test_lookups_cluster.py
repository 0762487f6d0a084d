"""Lookups end to end on real processes: a coordinator (the configuration API over SQLite), a
historical and a broker that load the `__default` tier by polling it, and queries (SQL and native)
whose answers are checked against plain Python over the raw rows of `foo` joined to the lookup's
map, with the broker's per-segment cache on and off, before and after the lookup changes."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.processes import StrataProcess
from tests.cluster.cluster_kit import wait_settled, wait_until
from tests.coordinator.kit import coordinator
from tests.sql_corpus.cluster import TABLES

pytestmark = pytest.mark.integration
CONFIG = "/druid/coordinator/v1/lookups/config"
ROWS = [json.loads(line) for line in (TABLES / "foo.jsonl").read_text().splitlines() if line.strip()]
MAP_V1 = {"": "empty", "10.1": "ten", "2": "two", "abc": "letters"}
MAP_V2 = {"10.1": "TEN", "1": "one", "def": "DEF"}


def container(version: str, mapping: dict[str, str]) -> dict[str, Any]:
    return {"version": version, "lookupExtractorFactory": {"type": "map", "map": mapping}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    from strata.ingestion.api import ingest

    root = tmp_path_factory.mktemp("lookups")
    spec = json.loads((TABLES / "foo-index.json").read_text())
    spec["spec"]["ioConfig"]["inputSource"]["baseDir"] = str(TABLES.resolve())
    ingest(spec, deep_storage=root / "deep", metadata=root / "meta.db", engine="local")
    coord = coordinator(root, str(root / "meta.db"))
    started: list[StrataProcess] = []
    try:
        started.append(coord.start(timeout=60))
        poll = ["--coordinator", coord.address, "--lookup-poll-period", "0.3"]
        historical = StrataProcess(
            "historical",
            ["--deep-storage", str(root / "deep"), "--metadata", str(root / "meta.db"),
             "--segment-cache", str(root / "cache"), "--poll-period", "1", "--lookup-max-bytes", "2000", *poll],
            root / "historical.log",
        )  # fmt: skip
        started.append(historical.start(timeout=60))
        broker = StrataProcess(
            "broker", ["--discovery", "http", "--nodes", historical.address, "--cache", "lru", *poll],
            root / "broker.log",
        )  # fmt: skip
        started.append(broker.start(timeout=60))
        wait_settled(broker, root / "meta.db", [historical], 60)
        yield {"root": root, "coord": coord, "historical": historical, "broker": broker}
    finally:
        for process in reversed(started):
            process.stop()


def loaded(cluster: dict[str, Any], name: str, version: str) -> None:
    """Wait until the coordinator says `name` is loaded at `version` by both nodes."""

    def ready() -> bool:
        status = httpx.get(f"{cluster['coord'].url}/druid/coordinator/v1/lookups/status/__default/{name}",
                           params={"detailed": "true"}, timeout=10)  # fmt: skip
        nodes = httpx.get(
            f"{cluster['coord'].url}/druid/coordinator/v1/lookups/nodeStatus/__default", timeout=10
        )
        held = [s["current"].get(name, {}).get("version") for s in nodes.json().values()]
        return status.status_code == 200 and status.json()["loaded"] and held == [version, version]

    wait_until(
        ready, f"lookup {name} {version} on both nodes", 30, [cluster["historical"], cluster["broker"]]
    )


def sql(cluster: dict[str, Any], query: str, context: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    resp = httpx.post(f"{cluster['broker'].url}/druid/v2/sql", json={"query": query, "context": context or {}},
                      timeout=30)  # fmt: skip
    assert resp.status_code == 200, resp.text
    return list(resp.json())


def native(cluster: dict[str, Any], body: dict[str, Any]) -> Any:
    resp = httpx.post(f"{cluster['broker'].url}/druid/v2", json=body, timeout=30)
    assert resp.status_code == 200, resp.text
    return resp.json()


def grouped(mapping: dict[str, str], *, retain: bool = False, replace: str | None = None) -> Counter[Any]:
    """The oracle: foo's rows counted by dim1 mapped through `mapping`."""
    out: Counter[Any] = Counter()
    for row in ROWS:
        key = row.get("dim1")
        value = mapping.get(key) if key is not None else None
        out[value if value is not None else (key if retain else replace)] += 1
    return out


def group_by(lookup_fn: dict[str, Any], cache: bool) -> Counter[Any]:
    return group_by_dimension({"type": "extraction", "dimension": "dim1", "outputName": "d",
                               "extractionFn": lookup_fn}, cache)  # fmt: skip


def group_by_dimension(dimension: dict[str, Any], cache: bool) -> Counter[Any]:
    """A topN (cached per segment and whole by the broker, unlike groupBy) over the dimension."""
    body = {"queryType": "topN", "dataSource": "foo", "intervals": ["2000/2002"], "granularity": "all",
            "dimension": dimension, "metric": "n", "threshold": 100,
            "aggregations": [{"type": "count", "name": "n"}],
            "context": {"useCache": cache, "populateCache": cache, "useResultLevelCache": cache,
                        "populateResultLevelCache": cache}}  # fmt: skip
    return Counter({r["d"]: r["n"] for r in native(CLUSTER[0], body)[0]["result"]})


CLUSTER: list[dict[str, Any]] = []


def settles(check: Any) -> Any:
    """`check` as a wait_until condition: an answer refused while nodes reload (503) is not yet."""

    def ready() -> bool:
        try:
            return bool(check())
        except AssertionError:
            return False

    return ready


def test_configuration_api_follows_druid(cluster: dict[str, Any]) -> None:
    CLUSTER[:] = [cluster]
    url = cluster["coord"].url + CONFIG
    assert httpx.get(url).status_code == 404  # nothing configured yet
    first = httpx.post(url, json={"__default": {"dims": container("v1", MAP_V1)}})
    assert first.status_code == 400 and "post an empty map to initialize" in first.json()["error"]
    assert httpx.post(url, json={}).status_code == 202
    assert httpx.get(url).json() == []
    put = httpx.post(f"{url}/__default/dims", json=container("v1", MAP_V1), headers={"X-Druid-Author": "ann"})
    assert put.status_code == 202
    assert httpx.get(url).json() == ["__default"]
    assert httpx.get(f"{url}/__default").json() == ["dims"]
    assert httpx.get(f"{url}/__default/dims").json() == container("v1", MAP_V1)
    assert httpx.get(f"{url}/all").json() == {"__default": {"dims": container("v1", MAP_V1)}}
    same = httpx.post(f"{url}/__default/dims", json=container("v1", MAP_V2))
    assert same.status_code == 400 and "can't replace" in same.json()["error"]
    older = httpx.post(url, json={"__default": {"dims": container("v0", MAP_V2)}})
    assert older.status_code == 400
    unversioned = httpx.post(
        f"{url}/__default/x", json={"lookupExtractorFactory": {"type": "map", "map": {}}}
    )
    assert unversioned.status_code == 400 and "does not have version" in unversioned.json()["error"]
    bad = httpx.post(f"{url}/__default/x", json=container("v1", {"a": 1}))  # type: ignore[dict-item]
    assert bad.status_code == 400
    assert httpx.get(f"{url}/nope/dims").status_code == 404
    assert httpx.delete(f"{url}/nope/dims").status_code == 404
    with sqlite3.connect(cluster["root"] / "meta.db") as db:  # every change audited, with its author
        authors = [a for (a,) in db.execute("SELECT author FROM druid_audit WHERE type = 'lookupsConfig'")]
    assert authors.count("ann") == 1 and len(authors) == 2
    loaded(cluster, "dims", "v1")
    for node in (cluster["historical"], cluster["broker"]):
        state = httpx.get(f"{node.url}/druid/listen/v1/lookups").json()
        assert state["current"] == {"dims": container("v1", MAP_V1)} and state["toDrop"] == []
        assert httpx.get(f"{node.url}/druid/listen/v1/lookups/dims").json() == container("v1", MAP_V1)
        assert httpx.get(f"{node.url}/druid/listen/v1/lookups/nope").status_code == 404
    tiers = httpx.get(url, params={"discover": "true"}).json()
    assert tiers == ["__default"]


@pytest.mark.parametrize("cache", [False, True])
def test_native_lookups_match_the_oracle(cluster: dict[str, Any], cache: bool) -> None:
    registered = {"type": "registeredLookup", "lookup": "dims"}
    for _ in range(2):  # the second run answers from the per-segment cache when it is on
        assert group_by(registered, cache) == grouped(MAP_V1)
        assert group_by({**registered, "retainMissingValue": True}, cache) == grouped(MAP_V1, retain=True)
        assert group_by({**registered, "replaceMissingValueWith": "?"}, cache) == grouped(MAP_V1, replace="?")
        inline = {"type": "lookup", "lookup": {"type": "map", "map": MAP_V2}, "retainMissingValue": True}
        assert group_by(inline, cache) == grouped(MAP_V2, retain=True)
        spec = {"type": "lookup", "dimension": "dim1", "outputName": "d", "name": "dims"}
        assert group_by_dimension(spec, cache) == grouped(MAP_V1)
    rows = native(cluster, {"queryType": "scan", "dataSource": {"type": "lookup", "lookup": "dims"},
                            "intervals": ["-146136543-09-08T08:23:32.096Z/146140482-04-24T15:36:27.903Z"],
                            "columns": ["k", "v"], "resultFormat": "compactedList"})  # fmt: skip
    assert sorted(tuple(e) for r in rows for e in r["events"]) == sorted(MAP_V1.items())


@pytest.mark.parametrize("cache", [False, True])
def test_sql_lookups_match_the_oracle(cluster: dict[str, Any], cache: bool) -> None:
    context = {"useCache": cache, "populateCache": cache}
    got = sql(cluster, "SELECT LOOKUP(dim1, 'dims') AS d, COUNT(*) AS n FROM foo GROUP BY 1", context)
    assert Counter({r["d"]: r["n"] for r in got}) == grouped(MAP_V1)
    got = sql(cluster, "SELECT LOOKUP(dim1, 'dims', 'none') AS d, COUNT(*) AS n FROM foo GROUP BY 1", context)
    assert Counter({r["d"]: r["n"] for r in got}) == grouped(MAP_V1, replace="none")
    table = sql(cluster, "SELECT k, v FROM lookup.dims", context)
    assert sorted((r["k"], r["v"]) for r in table) == sorted(MAP_V1.items())
    joined = sql(cluster, "SELECT foo.dim1 AS k, l.v AS v FROM foo INNER JOIN lookup.dims l ON foo.dim1 = l.k",
                 context)  # fmt: skip
    want = sorted((r["dim1"], MAP_V1[r["dim1"]]) for r in ROWS if r.get("dim1") in MAP_V1)
    assert sorted((r["k"], r["v"]) for r in joined) == want
    listed = sql(cluster, "SELECT TABLE_NAME, IS_JOINABLE FROM INFORMATION_SCHEMA.TABLES "
                          "WHERE TABLE_SCHEMA = 'lookup'")  # fmt: skip
    assert listed == [{"TABLE_NAME": "dims", "IS_JOINABLE": "YES"}]
    missing = httpx.post(f"{cluster['broker'].url}/druid/v2/sql",
                         json={"query": "SELECT LOOKUP(dim1, 'nope') FROM foo"}, timeout=30)  # fmt: skip
    assert missing.status_code == 400 and "nope" in missing.text


def test_a_changed_lookup_is_never_answered_from_the_cache(cluster: dict[str, Any]) -> None:
    registered = {"type": "registeredLookup", "lookup": "dims"}
    assert group_by(registered, True) == grouped(MAP_V1)  # cached with v1
    url = cluster["coord"].url + CONFIG
    assert httpx.post(f"{url}/__default/dims", json=container("v2", MAP_V2)).status_code == 202
    loaded(cluster, "dims", "v2")
    assert group_by(registered, True) == grouped(MAP_V2)
    got = sql(cluster, "SELECT LOOKUP(dim1, 'dims') AS d, COUNT(*) AS n FROM foo GROUP BY 1")
    assert Counter({r["d"]: r["n"] for r in got}) == grouped(MAP_V2)


def test_a_namespace_file_is_read_parsed_and_re_read(cluster: dict[str, Any]) -> None:
    path = cluster["root"] / "names.csv"
    path.write_text("id,name\n10.1,ten-from-file\n2,two-from-file\n")
    factory = {
        "type": "cachedNamespace",
        "extractionNamespace": {
            "type": "uri",
            "uri": path.as_uri(),
            "pollPeriod": "PT0.2S",
            "namespaceParseSpec": {
                "format": "csv",
                "hasHeaderRow": True,
                "keyColumn": "id",
                "valueColumn": "name",
            },
        },
    }
    url = cluster["coord"].url + CONFIG
    assert (
        httpx.post(
            f"{url}/__default/names", json={"version": "v1", "lookupExtractorFactory": factory}
        ).status_code
        == 202
    )
    loaded(cluster, "names", "v1")
    registered = {"type": "registeredLookup", "lookup": "names"}
    first = {"10.1": "ten-from-file", "2": "two-from-file"}
    assert group_by(registered, True) == grouped(first)
    path.write_text("id,name\n10.1,ten-again\nabc,letters\n")
    again = {"10.1": "ten-again", "abc": "letters"}
    wait_until(settles(lambda: group_by(registered, True) == grouped(again)), "the re-read file's values", 30,
               [cluster["historical"]])  # fmt: skip
    # both nodes re-read it: SQL over the broker's own copy agrees
    wait_until(lambda: sql(cluster, "SELECT k, v FROM lookup.names") == [{"k": k, "v": v} for k, v in sorted(again.items())],
               "the broker's copy", 30)  # fmt: skip


def test_an_oversized_file_is_refused_and_the_node_keeps_serving(cluster: dict[str, Any]) -> None:
    path = cluster["root"] / "big.tsv"
    path.write_text("".join(f"k{i}\tv{i}\n" for i in range(500)))  # past the historical's 2000 bytes
    factory = {
        "type": "cachedNamespace",
        "extractionNamespace": {
            "type": "uri",
            "uri": path.as_uri(),
            "namespaceParseSpec": {"format": "tsv", "columns": ["k", "v"]},
        },
    }
    url = cluster["coord"].url + CONFIG
    assert (
        httpx.post(
            f"{url}/__default/big", json={"version": "v1", "lookupExtractorFactory": factory}
        ).status_code
        == 202
    )

    def refused() -> bool:
        state = httpx.get(f"{cluster['historical'].url}/druid/listen/v1/lookups").json()
        return "big" in state["toLoad"] and "--lookup-max-bytes" in state["toLoad"]["big"]["loadError"]

    wait_until(refused, "the historical to refuse the big file", 30, [cluster["historical"]])
    want = {"loaded": False, "pendingNodes": [cluster["historical"].address]}

    def only_the_historical_pending() -> bool:  # the broker (a larger bound) loads it on its next poll
        status = httpx.get(f"{cluster['coord'].url}/druid/coordinator/v1/lookups/status/__default/big",
                           params={"detailed": "true"}).json()  # fmt: skip
        return bool(status == want)

    wait_until(only_the_historical_pending, "the broker to load the file the historical refuses", 30,
               [cluster["historical"]])  # fmt: skip
    assert cluster["historical"].alive()
    assert group_by({"type": "registeredLookup", "lookup": "dims"}, False) == grouped(MAP_V2)
    assert httpx.delete(f"{url}/__default/big").status_code == 202
    assert httpx.get(f"{url}/__default/big").status_code == 404
