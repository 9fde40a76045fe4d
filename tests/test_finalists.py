"""The finish re-measures the top k candidates and keeps the fastest re-measured (issue 25)."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from heronlike import ops, tune
from heronlike.errors import InvalidArgumentError
from heronlike.records import Records

TARGET = "llvm -num-cores=1"


def test_finish_picks_the_fastest_re_measured_finalist(tmp_path: Path) -> None:
    records = tmp_path / "r.sqlite"
    gemm = ops.gemm(64, 64, 64, dtype="float32")
    r = tune(gemm, TARGET, trials=12, batch_size=6, records=records, finalists=3, final_repeat=6)
    assert len(r.finalists) == 3
    assignments = [tuple(sorted(f.assignment.items())) for f in r.finalists]
    assert len(set(assignments)) == 3, "finalists are distinct candidates"
    tuning = [f.tuning_latency_s for f in r.finalists]
    assert tuning == sorted(tuning)
    with Records(records) as db:
        ok = sorted(t.latency_s for t in db.trials(r.workload_key, r.target_key) if t.ok)
        by_index = {t.trial_index: t for t in db.trials(r.workload_key, r.target_key)}
    assert tuning == ok[:3], "the finalists are the three fastest trials of the tune"
    for f in r.finalists:
        assert by_index[f.trial_index].assignment == f.assignment
        assert f.latency_s is not None and f.latency_s > 0 and f.error_kind is None
    # picked by the fastest of the first half of the interleaved rounds (noise only slows),
    # reported with the median of the second half
    assert all(len(f.rounds_s) == 4 for f in r.finalists)
    winner = min(r.finalists, key=lambda f: min(f.rounds_s[:2]))
    assert r.assignment == winner.assignment
    assert r.latency_s == statistics.median(winner.rounds_s[2:])
    assert r.tuning_latency_s == winner.tuning_latency_s
    assert r.correct

    # resuming with the budget spent measures nothing new and re-picks among k finalists
    again = tune(gemm, TARGET, trials=12, records=records, finalists=1)
    assert again.trials_run == 0
    assert len(again.finalists) == 1
    assert again.finalists[0].tuning_latency_s == ok[0]


def test_finalists_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="finalists"):
        tune(
            ops.gemm(16, 16, 16, dtype="float32"),
            TARGET,
            trials=1,
            finalists=0,
            records=tmp_path / "r.sqlite",
        )


def test_a_shared_runner_passes_the_finish_timing_policy_on() -> None:
    """A task scheduler's lane shares one runner between its tasks' sessions; a finish's
    ``number`` and ``repeat`` must reach that runner (they used to stay on the wrapper, so the
    finalists were re-measured with the tuning repeats)."""
    from heronlike.measure import LocalRunner
    from heronlike.scheduler import _SharedRunner

    inner = LocalRunner(num_threads=1, number=3, repeat=5)
    shared = _SharedRunner(inner)
    shared.repeat, shared.number = 20, 10
    assert (inner.repeat, inner.number) == (20, 10)
    assert (shared.repeat, shared.number) == (20, 10)
