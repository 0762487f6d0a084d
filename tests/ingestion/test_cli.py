"""`strata ingest` and `strata segments` through the real command line entry point."""

from __future__ import annotations

import orjson

from strata.cli.main import main


def test_ingest_with_flags_then_drop_and_restore(tmp_path, capsys):
    data = tmp_path / "events.json"
    data.write_text(
        '{"timestamp": "2020-01-01T00:00:00Z", "d": "a"}\n{"timestamp": "2020-01-02T00:00:00Z", "d": "b"}\n'
    )
    common = ["--metadata", str(tmp_path / "m.db")]
    rc = main(
        [
            "ingest",
            "--datasource",
            "ev",
            "--input",
            str(data),
            "--deep-storage",
            str(tmp_path / "deep"),
            "--json",
            *common,
        ]
    )
    assert rc == 0
    summary = orjson.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["rowsIngested"] == 2 and len(summary["segments"]) == 2
    assert (
        main(["segments", "drop", "--datasource", "ev", "--interval", "2020-01-01/2020-01-02", *common]) == 0
    )
    assert main(["segments", "list", "--json", "--all", *common]) == 0
    listed = [orjson.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert sorted((s["interval"][:10], s["used"]) for s in listed) == [
        ("2020-01-01", False),
        ("2020-01-02", True),
    ]
    assert main(["segments", "restore", summary["segments"][0]["id"], *common]) == 0
    assert "1 segment(s) restored" in capsys.readouterr().out


def test_ingest_failure_exits_non_zero(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"timestamp": "nope"}\n')
    rc = main(
        [
            "ingest",
            "--datasource",
            "ev",
            "--input",
            str(bad),
            "--deep-storage",
            str(tmp_path / "d"),
            "--metadata",
            str(tmp_path / "m.db"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "maxParseExceptions" in err and "bad.json:1" in err
