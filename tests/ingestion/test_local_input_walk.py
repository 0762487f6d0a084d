"""The local input source's walk of `baseDir`: recursive, by file name, and unmoved by a directory
that another process removes while the walk is under way (the docs' blocks ingest from a directory
that also holds a running cluster's and Spark's working files)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strata.ingestion import parse_spec
from strata.ingestion.readers import matching_files, resolve_inputs


def _tree(base: Path) -> None:
    for rel in ("a.json", "b.csv", "deep/er/c.json", "deep/d.json", "scratch/x/e.json", ".hidden.json"):
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")


def test_files_match_by_name_at_any_depth(tmp_path: Path) -> None:
    _tree(tmp_path)
    names = [p.relative_to(tmp_path).as_posix() for p in matching_files(tmp_path, "*.json")]
    assert names == [".hidden.json", "a.json", "deep/d.json", "deep/er/c.json", "scratch/x/e.json"]
    assert matching_files(tmp_path, "c.json") == [tmp_path / "deep/er/c.json"]
    assert matching_files(tmp_path, "*.parquet") == []


def test_a_directory_removed_during_the_walk_is_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`scratch/` is listed by its parent, then removed before the walk enters it: the walk goes
    on with the rest (a walk by `Path.rglob` raised FileNotFoundError here)."""
    _tree(tmp_path)
    real_scandir = os.scandir
    victim = tmp_path / "scratch"

    def scandir(path: Any = ".") -> Iterator[os.DirEntry[str]]:
        # (rmtree's own calls pass a descriptor)
        if isinstance(path, (str, os.PathLike)) and Path(path) == victim:
            shutil.rmtree(victim)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    names = [p.relative_to(tmp_path).as_posix() for p in matching_files(tmp_path, "*.json")]
    assert not victim.exists()
    assert names == [".hidden.json", "a.json", "deep/d.json", "deep/er/c.json"]


def test_other_errors_of_the_walk_are_not_swallowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Iterator[os.DirEntry[str]]:
        if isinstance(path, (str, os.PathLike)) and Path(path) == tmp_path / "deep":
            raise OSError(5, "Input/output error", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with pytest.raises(OSError, match="Input/output error"):
        matching_files(tmp_path, "*.json")


def test_the_local_input_source_reads_through_the_walk(tmp_path: Path) -> None:
    _tree(tmp_path)
    spec = parse_spec({
        "type": "index_parallel",
        "spec": {
            "dataSchema": {"dataSource": "t", "timestampSpec": {"column": "ts"},
                           "granularitySpec": {"segmentGranularity": "day"}},
            "ioConfig": {"type": "index_parallel", "inputFormat": {"type": "json"},
                         "inputSource": {"type": "local", "baseDir": str(tmp_path), "filter": "*.json"}},
        },
    })  # fmt: skip
    inputs = resolve_inputs(spec.input_source)
    assert [Path(i.name).relative_to(tmp_path).as_posix() for i in inputs] == [
        ".hidden.json", "a.json", "deep/d.json", "deep/er/c.json", "scratch/x/e.json",
    ]  # fmt: skip
