"""The finish re-measures the top k candidates and keeps the fastest re-measured (issue 25)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

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


@pytest.mark.parametrize("explorer", ["cga", "random"])
def test_variant_trials_settle_the_finish_knob(tmp_path: Path, explorer: str) -> None:
    """A padded convolution's guard place is a finish knob: the search measures only
    ``outer`` guards, the budget's last trial is the fastest candidate with ``all`` guards
    (recorded like any trial, naming the trial it varies), and a resumed tune with a larger
    budget searches on from both (the explorer shown a point its search CSP holds out).
    Every trial is a finalist here, so the variant takes part in the re-measured pick whether
    or not this machine times ``all`` guards faster (on a Zen 4 the tiny convolution's ``all``
    version ran behind four ``outer`` ones, outside the default four finalists)."""
    from heronlike.target import get_target

    if not get_target("llvm").intrinsics:
        pytest.skip("this CPU has no int8 dot-product intrinsic (AVX2 or later)")
    records = tmp_path / "r.sqlite"
    conv = ops.c2d(1, 8, 8, 8, 16, 3, 3, pad=1, dtype="int8")  # 36 % of the input is padding
    knob = "Y.skip_padding"
    r = tune(conv, TARGET, trials=8, batch_size=4, explorer=explorer, records=records, finalists=8)
    assert r.space.csp.finish_knobs == [knob] and r.trials_run == 8 and r.correct
    with Records(records) as db:
        trials = sorted(db.trials(r.workload_key, r.target_key), key=lambda t: t.trial_index)
    assert len(trials) == 8
    *searched, variant = trials
    assert {t.assignment[knob] for t in searched} == {0}, "the search holds the guards outer"
    best = min((t for t in searched if t.ok), key=lambda t: (t.latency_s, t.trial_index))
    assert variant.info["variant_of"] == best.trial_index
    assert variant.assignment == {**best.assignment, knob: 1}
    assert variant.ok, "the variant is built, run and checked like any trial"
    assert any(f.trial_index == variant.trial_index for f in r.finalists)

    again = tune(conv, TARGET, trials=16, batch_size=4, explorer=explorer, records=records)
    assert again.trials_run == 8 and again.correct
    with Records(records) as db:
        trials = sorted(db.trials(r.workload_key, r.target_key), key=lambda t: t.trial_index)
    keys = [tuple(sorted(t.assignment.items())) for t in trials]
    assert len(trials) == 16 and len(set(keys)) == 16, "no point measured twice"
    by_index = {t.trial_index: t for t in trials}
    variants = [t for t in trials if "variant_of" in t.info]
    assert len([t for t in variants if t.trial_index >= 8]) <= 2  # this budget's two at most
    for t in variants:  # each the point it varies with the knob's other value
        assert t.assignment == {**by_index[t.info["variant_of"]].assignment, knob: 1}
    assert all(t.assignment[knob] == 0 for t in trials if "variant_of" not in t.info)


def test_a_task_scheduler_spends_variant_trials_within_its_budget(tmp_path: Path) -> None:
    """A model's scheduler grows each session's budget round by round, so a session never
    reaches the end of its own; the scheduler keeps the variant trials of the sessions with a
    finish knob out of the search's share and measures them once it is spent: the total stays
    the budget, the padded convolution gets its two (each the best's or the runner-up's
    assignment with ``all`` guards), the GEMM none, and a rerun measures nothing."""
    from heronlike.scheduler import Task, TaskScheduler
    from heronlike.target import get_target

    if not get_target("llvm").intrinsics:
        pytest.skip("this CPU has no int8 dot-product intrinsic (AVX2 or later)")
    records = tmp_path / "r.sqlite"
    tasks = [
        Task("conv", ops.c2d(1, 8, 8, 8, 16, 3, 3, pad=1, dtype="int8")),  # 36 % padding
        # float32: no intrinsic, so no finish knob (an int8 GEMM's widened copy has one on AVX2)
        Task("gemm", ops.gemm(16, 16, 16, dtype="float32")),
    ]

    def schedule() -> Any:
        return TaskScheduler(
            tasks, TARGET, trials=16, batch_size=4, records=records, epsilon=0.0
        ).run()

    result = schedule()
    assert result.trials_done == result.trials_run == 16
    knob = "Y.skip_padding"
    with Records(records) as db:
        conv, gemm = (
            sorted(db.trials(s.workload_key, s.target_key), key=lambda t: t.trial_index)
            for s in result.tasks
        )
    assert len(conv) + len(gemm) == 16 and not any("variant_of" in t.info for t in gemm)
    variants = [t for t in conv if "variant_of" in t.info]
    searched = [t for t in conv if "variant_of" not in t.info]
    assert len(variants) == 2 and conv[-2:] == variants, "measured last, once searched"
    assert {t.assignment[knob] for t in searched} == {0}
    by_index = {t.trial_index: t for t in searched}
    ranked = sorted((t for t in searched if t.ok), key=lambda t: (t.latency_s, t.trial_index))
    assert variants[0].info["variant_of"] == ranked[0].trial_index
    for t in variants:
        assert t.assignment == {**by_index[t.info["variant_of"]].assignment, knob: 1}
    assert schedule().trials_run == 0
