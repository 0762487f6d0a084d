"""`strata ingest --engine auto|spark`: which engine runs, said on stderr, and the Spark flags."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from strata.cli.main import main
from strata.ingestion.api import AUTO_SPARK_BYTES, choose_engine, load_spec
from strata.ingestion.cli import spark_conf
from strata.server.engine_flags import size

EVENTS = '{"timestamp": "2020-01-01T00:00:00Z", "d": "a"}\n{"timestamp": "2020-01-02T00:00:00Z", "d": "b"}\n'


def _flags(tmp_path: Path) -> list[str]:
    data = tmp_path / "events.json"
    data.write_text(EVENTS)
    return ["ingest", "--datasource", "ev", "--input", str(data), "--deep-storage", str(tmp_path / "deep"),
            "--metadata", str(tmp_path / "m.db"), "--json"]  # fmt: skip


def test_auto_is_the_default_and_says_it_chose_local(tmp_path, capsys):
    assert main(_flags(tmp_path)) == 0
    out, err = capsys.readouterr()
    assert "strata ingest: engine local (96 B of input is below the 2.0 GiB threshold for Spark)" in err
    summary = orjson.loads(out.strip().splitlines()[-1])
    assert summary["engine"] == "local" and summary["engineReason"].startswith("96 B of input")


def test_choose_engine_by_input_size(tmp_path):
    data = tmp_path / "events.json"
    data.write_text(EVENTS)
    spec = load_spec({
        "dataSchema": {"dataSource": "ev", "timestampSpec": {"column": "timestamp"}},
        "ioConfig": {"inputSource": {"type": "local", "files": [str(data)]}, "inputFormat": {"type": "json"}},
    })  # fmt: skip
    assert choose_engine(spec)[0] == "local" and AUTO_SPARK_BYTES == 2 << 30
    assert choose_engine(spec, threshold=96) == ("spark", "96 B of input is at least the 96 B threshold")


def test_size_and_conf_flags():
    assert size("512MiB") == 512 << 20 and size("2GiB") == 2 << 30 and size("1000") == 1000
    assert size("1.5k") == 1536
    with pytest.raises(ValueError, match="not a size"):
        size("lots")
    assert spark_conf(["spark.a=1", "spark.b = x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    assert spark_conf("spark.a=1,spark.b=2") == {"spark.a": "1", "spark.b": "2"}  # from STRATA_SPARK_CONF
    with pytest.raises(ValueError, match="KEY=VALUE"):
        spark_conf(["spark.a"])
