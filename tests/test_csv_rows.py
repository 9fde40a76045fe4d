"""benchmarks/csv_rows.py: the benchmarks' one CSV writer."""

from __future__ import annotations

import csv

import pytest

from benchmarks.csv_rows import write_rows


def test_header_is_every_key_in_first_seen_order(tmp_path):
    path = write_rows(tmp_path / "sub" / "a.csv", [{"b": 1, "a": None}, {"c": 2.5, "b": 3}])
    assert path == tmp_path / "sub" / "a.csv"
    with path.open(newline="") as f:
        got = list(csv.reader(f))
    assert got == [["b", "a", "c"], ["1", "", ""], ["3", "", "2.5"]]
    assert [p.name for p in path.parent.iterdir()] == ["a.csv"]  # no temporary file left


def test_fieldnames_fix_the_columns(tmp_path):
    rows = iter([{"x": 1, "extra": "dropped"}, {"y": 2}])  # any iterable of rows
    path = write_rows(tmp_path / "b.csv", rows, ("y", "x"))
    with path.open(newline="") as f:
        assert list(csv.DictReader(f)) == [{"y": "", "x": "1"}, {"y": "2", "x": ""}]


def test_a_rewrite_replaces_the_file(tmp_path):
    path = tmp_path / "c.csv"
    write_rows(path, [{"a": 1}, {"a": 2}])
    write_rows(path, [{"a": 3}])
    assert path.read_text().splitlines() == ["a", "3"]


def test_nothing_to_write_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no rows and no fieldnames"):
        write_rows(tmp_path / "d.csv", [])
    assert not (tmp_path / "d.csv").exists()
