"""Planning of INSERT and REPLACE without processes: Druid's clauses taken apart, table functions as
input sources, PARTITIONED BY and OVERWRITE WHERE, how a SELECT runs (block by block, without
DuckDB, or whole), rollup metrics and segment layout; and the per-row stage on blocks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pytest

from strata.ingestion.block import Block
from strata.ingestion.row_stage import RowStage
from strata.query.errors import InvalidInput
from strata.sql.ingest import plan_ingest, tables_of
from strata.sql.ingest.clauses import _tokens as tokens
from strata.sql.ingest.clauses import split_statement
from strata.sql.ingest.targets import overwrite_intervals, segment_granularity
from timeline import Interval

SIG = json.dumps([{"name": "ts", "type": "string"}, {"name": "k", "type": "string"},
                  {"name": "n", "type": "long"}, {"name": "x", "type": "double"}])  # fmt: skip
SRC = json.dumps({"type": "inline", "data": "{}"})
EXT = f"TABLE(EXTERN('{SRC}', '{{\"type\":\"json\"}}', '{SIG}'))"


class Catalog:
    def columns(self, table: str) -> Mapping[str, str] | None:
        return {"wiki": {"__time": "LONG", "page": "STRING", "added": "LONG", "ratio": "DOUBLE"}}.get(table)


def plan(sql: str, **context: Any) -> dict[str, Any]:
    return dict(plan_ingest(sql, Catalog(), context, query_id="q", now_ms=0).task)


def test_clauses_are_taken_apart_on_tokens_not_text() -> None:
    st = split_statement(
        "SET finalizeAggregations = false; SET rowsPerSegment = 10;\n"
        "REPLACE INTO druid.\"w x\" OVERWRITE WHERE __time >= TIMESTAMP '2020-01-01' "
        f"SELECT 'PARTITIONED BY DAY' AS s, k -- PARTITIONED BY HOUR\n FROM {EXT} AS t "
        "PARTITIONED BY DAY CLUSTERED BY 2, (k)"
    )
    assert (st.operation, st.target_schema, st.target) == ("REPLACE", "druid", "w x")
    assert st.overwrite == "__time >= TIMESTAMP '2020-01-01'"
    assert st.settings == {"finalizeAggregations": False, "rowsPerSegment": 10}
    assert st.query.startswith("SELECT 'PARTITIONED BY DAY' AS s") and st.query.endswith(
        'FROM "__extern0" AS t'
    )
    assert st.clustered_by == ["2", "(k)"] and [t.text for t in st.partitioned_by] == ["DAY"]
    assert st.externals["__extern0"].signature == (
        ("ts", "STRING"),
        ("k", "STRING"),
        ("n", "LONG"),
        ("x", "DOUBLE"),
    )


def test_table_functions_become_input_sources_and_formats() -> None:
    cases = {
        "http(userName => 'bob', password => 'secret', uris => ARRAY['http://h/a.csv'], format => 'csv')":
            ({"type": "http", "uris": ["http://h/a.csv"], "httpAuthenticationUsername": "bob",
              "httpAuthenticationPassword": {"type": "default", "password": "secret"}}, "csv"),
        "inline(data => ARRAY['a,1', 'b,2'], format => 'csv', skipHeaderRows => 1)":
            ({"type": "inline", "data": "a,1\nb,2\n"}, "csv"),
        "localfiles(files => '/a.json, /b.json', format => 'json')":
            ({"type": "local", "files": ["/a.json", "/b.json"]}, "json"),
        "s3(bucket => 'bk', paths => ARRAY['x/1.parquet'], format => 'parquet')":
            ({"type": "s3", "objects": [{"bucket": "bk", "path": "x/1.parquet"}]}, "parquet"),
        "EXTERN(inputSource => '{\"type\":\"local\",\"files\":[\"/f\"]}', inputFormat => '{\"type\":\"tsv\"}')":
            ({"type": "local", "files": ["/f"]}, "tsv"),
    }  # fmt: skip
    for call, (source, fmt) in cases.items():
        st = split_statement(
            f"INSERT INTO t SELECT * FROM TABLE({call}) EXTEND (a VARCHAR, b BIGINT) PARTITIONED BY ALL"
        )
        table = st.externals["__extern0"]
        assert table.input_source == source and table.input_format["type"] == fmt, call
        assert table.signature == (("a", "STRING"), ("b", "LONG"))
        if fmt == "csv":
            assert table.input_format["columns"] == ["a", "b"]
    csv = split_statement("INSERT INTO t SELECT * FROM TABLE(inline(data => 'x', format => 'csv', skipHeaderRows => 1)) "
                          "(a VARCHAR) PARTITIONED BY ALL").externals["__extern0"]  # fmt: skip
    assert csv.input_format["skipHeaderRows"] == 1
    with pytest.raises(InvalidInput, match="needs an EXTEND clause"):
        split_statement(
            "INSERT INTO t SELECT * FROM TABLE(inline(data => 'x', format => 'csv')) PARTITIONED BY ALL"
        )
    with pytest.raises(InvalidInput, match="has no parameter"):
        split_statement(
            "INSERT INTO t SELECT * FROM TABLE(http(url => 'x', format => 'csv')) (a VARCHAR) PARTITIONED BY ALL"
        )
    with pytest.raises(InvalidInput, match="not supported in EXTEND"):
        split_statement("INSERT INTO t SELECT * FROM TABLE(inline(data => 'x', format => 'csv')) (a VARCHAR ARRAY) "
                        "PARTITIONED BY ALL")  # fmt: skip


@pytest.mark.parametrize(("text", "name"), [
    ("DAY", "DAY"), ("HOUR", "HOUR"), ("ALL", "ALL"), ("ALL TIME", "ALL"), ("'P1D'", "DAY"), ("'PT15M'", "FIFTEEN_MINUTE"),
    ("'SIX_HOUR'", "SIX_HOUR"), ("'ALL TIME'", "ALL"), ("TIME_FLOOR(__time, 'PT1H')", "HOUR"),
    ("FLOOR(__time TO QUARTER)", "QUARTER"), ("MONTH", "MONTH"),
])  # fmt: skip
def test_partitioned_by_forms(text: str, name: str) -> None:
    assert segment_granularity(tokens(text), text) == name


@pytest.mark.parametrize(
    "text", ["'PT2H'", "TIME_FLOOR(__time, 'PT2H')", "'none'", "WEEKLY", "FLOOR(x TO DAY)"]
)
def test_partitioned_by_refusals(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"specified after PARTITIONED BY clause"):
        segment_granularity(tokens(text), text)


def test_overwrite_where_takes_time_conditions_in_the_session_zone() -> None:
    condition = ("__time >= TIMESTAMP '2000-01-01' AND __time < TIMESTAMP '2000-02-01' OR "
                 "__time BETWEEN TIMESTAMP '2000-03-01' AND TIMESTAMP '2000-03-31 23:59:59.999'")  # fmt: skip
    assert overwrite_intervals(condition, "MONTH", None, 0) == [
        Interval.parse("2000-01-01/2000-02-01"),
        Interval.parse("2000-03-01/2000-04-01"),
    ]
    zoned = "__time >= TIMESTAMP '2000-01-01 05:30:00' AND __time < TIMESTAMP '2000-01-02 05:30:00'"
    assert overwrite_intervals(zoned, "DAY", "Asia/Kolkata", 0) == [Interval.parse("2000-01-01/2000-01-02")]
    assert (
        overwrite_intervals("NOT (__time < TIMESTAMP '2000-01-01')", "DAY", None, 0)[0].start == 946684800000
    )
    with pytest.raises(InvalidInput, match=r"Unsupported operation \[LIKE\]"):
        overwrite_intervals("__time LIKE '2000%'", "DAY", None, 0)
    with pytest.raises(InvalidInput, match="produced no time intervals"):
        overwrite_intervals(
            "__time < TIMESTAMP '2000-01-01' AND __time > TIMESTAMP '2000-01-01'", "DAY", None, 0
        )


def test_a_plain_selection_runs_no_duckdb_and_time_parse_is_vectorised() -> None:
    task = plan(f"INSERT INTO t SELECT TIME_PARSE(ts) AS __time, k AS key, n FROM {EXT} PARTITIONED BY DAY")
    stage = task["spec"]["query"]["rowStage"]
    assert task["spec"]["query"]["mode"] == "rows" and stage["sql"] is None
    assert stage["timeParsed"] == [["ts", "__time_parsed_0"]]
    assert stage["columns"] == [["__time", "__time_parsed_0"], ["key", "k"], ["n", "n"]]
    schema = task["spec"]["ingestion"]["dataSchema"]
    assert schema["dimensionsSpec"]["dimensions"] == [
        {"name": "key", "type": "string"},
        {"name": "n", "type": "long"},
    ]
    assert task["spec"]["ingestion"]["ioConfig"]["appendToExisting"] is True
    assert task["context"] == {"taskLockType": "SHARED"} and task["id"] == "query-q"


def test_rollup_metrics_take_their_input_s_type_and_filters_move_into_inputs() -> None:
    task = plan(f"""INSERT INTO t SELECT FLOOR(TIME_PARSE(ts) TO HOUR) AS __time, k, COUNT(*) AS c, SUM(x) AS sx,
        MAX(n) AS mn, COUNT(x) AS cx, SUM(n) FILTER (WHERE k = 'a') AS sa,
        APPROX_COUNT_DISTINCT_DS_HLL(k, 11) AS uk
        FROM {EXT} GROUP BY 1, 2 PARTITIONED BY DAY""", finalizeAggregations=False)  # fmt: skip
    schema = task["spec"]["ingestion"]["dataSchema"]
    metrics = {m["name"]: m for m in schema["metricsSpec"]}
    assert metrics["c"] == {"type": "count", "name": "c"}
    assert [metrics[n]["type"] for n in ("sx", "mn", "cx", "sa", "uk")] == [
        "doubleSum",
        "longMax",
        "longSum",
        "longSum",
        "HLLSketchBuild",
    ]
    assert metrics["uk"]["lgK"] == 11
    assert schema["granularitySpec"] == {"segmentGranularity": "DAY", "queryGranularity": "hour", "rollup": True,
                                         "intervals": []}  # fmt: skip
    assert "CASE WHEN" in task["spec"]["query"]["rowStage"]["sql"]
    finalized = plan(f"INSERT INTO t SELECT k, COUNT(*) AS c FROM {EXT} GROUP BY 1 PARTITIONED BY ALL")
    assert finalized["spec"]["query"]["mode"] == "whole"
    assert finalized["spec"]["ingestion"]["dataSchema"]["metricsSpec"] == []


def test_whole_statements_with_rollup_keep_combining_metrics() -> None:
    task = plan(f"""REPLACE INTO t OVERWRITE ALL SELECT k, COUNT(*) AS c, SUM(n) AS s, AVG(x) AS ax
        FROM {EXT} GROUP BY 1 HAVING COUNT(*) > 2 PARTITIONED BY ALL""", finalizeAggregations="false")  # fmt: skip
    schema = task["spec"]["ingestion"]["dataSchema"]
    assert task["spec"]["query"]["mode"] == "whole"
    assert schema["metricsSpec"] == [{"type": "longSum", "name": "c", "fieldName": "c"},
                                     {"type": "longSum", "name": "s", "fieldName": "s"}]  # fmt: skip
    assert schema["dimensionsSpec"]["dimensions"] == [
        {"name": "k", "type": "string"},
        {"name": "ax", "type": "double"},
    ]
    assert task["spec"]["destination"]["replaceTimeChunks"] == "all" and task["context"] == {}


def test_clustering_orders_dimensions_and_cuts_ranges_on_replace() -> None:
    replace = plan(f"REPLACE INTO t OVERWRITE ALL SELECT TIME_PARSE(ts) AS __time, n, k FROM {EXT} "
                   "PARTITIONED BY DAY CLUSTERED BY 3", rowsPerSegment=1000)  # fmt: skip
    ingestion = replace["spec"]["ingestion"]
    assert [d["name"] for d in ingestion["dataSchema"]["dimensionsSpec"]["dimensions"]] == ["k", "n"]
    assert ingestion["tuningConfig"]["partitionsSpec"] == {"type": "range", "partitionDimensions": ["k"],
                                                           "targetRowsPerSegment": 1000}  # fmt: skip
    insert = plan(
        f"INSERT INTO t SELECT TIME_PARSE(ts) AS __time, n, k FROM {EXT} PARTITIONED BY DAY CLUSTERED BY k"
    )
    assert insert["spec"]["ingestion"]["tuningConfig"]["partitionsSpec"]["type"] == "dynamic"
    with pytest.raises(InvalidInput, match="Ordinal out of range"):
        plan(f"INSERT INTO t SELECT k FROM {EXT} PARTITIONED BY ALL CLUSTERED BY 5")
    with pytest.raises(InvalidInput, match=r"Ordinal \[-1\]"):
        plan(f"INSERT INTO t SELECT k FROM {EXT} PARTITIONED BY ALL CLUSTERED BY -1")


def test_reading_a_data_source_reads_only_the_where_s_time() -> None:
    task = plan("INSERT INTO copy SELECT __time, page, added * 2 AS a2 FROM wiki "
                "WHERE __time >= TIMESTAMP '2015-09-12' AND __time < TIMESTAMP '2015-09-13' PARTITIONED BY HOUR")  # fmt: skip
    io = task["spec"]["ingestion"]["ioConfig"]
    assert io["inputSource"] == {"type": "druid", "dataSource": "wiki",
                                 "interval": "2015-09-12T00:00:00.000Z/2015-09-13T00:00:00.000Z"}  # fmt: skip
    assert tables_of(
        "INSERT INTO copy WITH c AS (SELECT * FROM wiki) SELECT * FROM c PARTITIONED BY ALL"
    ) == ["wiki"]


def test_the_row_stage_conforms_blocks_and_keeps_line_numbers() -> None:
    stage = RowStage(
        signature=(("ts", "STRING"), ("n", "LONG"), ("gone", "DOUBLE")),
        time_parsed=(("ts", "__tp"),),
        sql='SELECT "__tp" AS "__time", "n" * 2 AS "n2", "gone", "__row" FROM "input" WHERE "n" > 1',
    )
    raw = pa.table(
        {"ts": ["2020-01-01T00:00:00Z", "nope", "2020-01-02"], "n": ["1", "x", "3"], "extra": [1, 2, 3]}
    )
    out = stage.apply(Block(raw, "f.json", 10))
    assert out.table.column_names == ["__time", "n2", "gone"]
    assert out.table.column("n2").to_pylist() == [6] and out.lines(pa.array([0]).to_numpy()).tolist() == [12]
    conformed = stage.conform(raw)
    assert conformed.column("n").to_pylist() == [1, None, 3]  # not a number: null, as SQL reads it
    assert conformed.column("__tp").null_count == 1 and conformed.column("gone").null_count == 3
