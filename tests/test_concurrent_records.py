"""Records shared by concurrent processes (issue 25): tunes, appends and a lock held too long."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from heronlike.errors import RecordsBusyError
from heronlike.records import Records, TrialRecord


def _record(wk: str, x: int) -> TrialRecord:
    return TrialRecord(wk, "t", {"x": x}, 1e-3, None, None, 0.0, 0.0, 0.0, 0.0, 0, "test", -1)


_APPEND = """
import sys
from heronlike.records import Records, TrialRecord
path, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with Records(path) as db:
    for i in range(start, start + n):
        db.append(TrialRecord("w", "t", {"x": i}, 1e-3, None, None, 0, 0, 0, 0, 0, "test", -1))
"""


def test_append_from_processes_numbers_every_trial_once(tmp_path: Path) -> None:
    path = str(tmp_path / "r.sqlite")
    Records(path).close()
    procs = [
        subprocess.Popen([sys.executable, "-c", _APPEND, path, str(100 * p), "40"])
        for p in range(4)
    ]
    assert [p.wait(120) for p in procs] == [0, 0, 0, 0]
    with Records(path) as db:
        trials = db.trials("w", "t")
    assert len(trials) == 160
    assert [r.trial_index for r in trials] == list(range(160))  # gap-free, none taken twice
    assert sorted(r.assignment["x"] for r in trials) == sorted(
        100 * p + i for p in range(4) for i in range(40)
    )


def test_lock_held_too_long_is_a_typed_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with Records(path) as db:
        db.append(_record("w", 0))
    holder = sqlite3.connect(str(path))
    holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a long write
    try:
        with Records(path, busy_timeout_s=0.2) as db:
            t0 = time.perf_counter()
            with pytest.raises(RecordsBusyError, match="locked by another process"):
                db.append(_record("w", 1))
            assert time.perf_counter() - t0 < 5
            assert len(db.trials("w", "t")) == 1  # readers are not blocked (WAL)
    finally:
        holder.rollback()
        holder.close()
    with Records(path) as db:
        assert db.append(_record("w", 2)).trial_index == 1


def test_three_concurrent_tunes_on_one_records_file(tmp_path: Path) -> None:
    """Three ``heronlike tune`` processes on one file, two of them on the same GEMM: all finish,
    every trial is recorded once, and the shared GEMM's budget counts both tunes' trials."""
    records = tmp_path / "records.sqlite"
    cli = [sys.executable, "-m", "heronlike.cli", "tune", "gemm", "--dtype", "float32"]
    common = ["--target", "llvm -num-cores=1", "--batch-size", "4", "--no-baselines"]
    common += ["--records", str(records), "--explorer", "random"]
    jobs = [
        ("32,32,32", "0", "12"),  # the shared workload ...
        ("32,32,32", "1", "12"),  # ... tuned twice at once, 12 trials in all
        ("32,48,16", "0", "8"),
    ]
    env = {**os.environ, "TVM_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [*cli, "--shape", shape, "--seed", seed, "--trials", trials, *common],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for shape, seed, trials in jobs
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out[-3000:]
    conn = sqlite3.connect(str(records))
    rows = conn.execute("SELECT workload_key, trial_index, assignment_json FROM trials").fetchall()
    runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    conn.close()
    assert runs == 3
    per_workload = Counter(wk for wk, _, _ in rows)
    assert sorted(per_workload.values()) in ([8, 12], [8, 13], [8, 14], [8, 15], [8, 16])
    for wk, n in per_workload.items():
        indices = sorted(i for w, i, _ in rows if w == wk)
        assert indices == list(range(n)), "trial indices must be gap-free and unique"
