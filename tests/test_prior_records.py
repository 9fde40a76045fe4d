"""``benchmarks/prior_records.py`` records uniform random programs that ``prior_fit.py`` reads
back and fits a prior on (the DL Boost prior's pipeline, on two tiny float32 cases)."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import prior_fit, prior_records  # noqa: E402
from heronlike.prior import fit_linear_prior  # noqa: E402


def test_random_records_of_two_cases_fit_a_prior(tmp_path: Path) -> None:
    records = tmp_path / "prior.sqlite"
    cases = "gemm:32,32,64;bmm:2,16,16,32"
    argv = ["--cases", cases, "--dtype", "float32", "--out", str(records), "--trials", "4"]
    assert prior_records.main([*argv, "--batch", "4"]) == 0
    with sqlite3.connect(records) as db:
        rows = db.execute("SELECT workload_key, explorer, assignment_json FROM trials").fetchall()
    assert len(rows) == 8 and {explorer for _, explorer, _ in rows} == {"rand"}
    for key in {k for k, _, _ in rows}:  # four distinct random programs per workload
        assert len({a for k, _, a in rows if k == key}) == 4
    # resumable: the same command finds each workload's budget spent and records nothing more
    assert prior_records.main([*argv, "--batch", "4"]) == 0
    with sqlite3.connect(records) as db:
        assert db.execute("SELECT count(*) FROM trials").fetchone()[0] == 8
    data, skipped = prior_fit.load([records], "", min_trials=4)
    assert len(data) == 2 and not skipped
    for names, x, latency in data:
        assert x.shape == (4, len(names)) and (latency > 0).all()
    prior = fit_linear_prior(data)
    for names, x, _ in data:
        assert prior.score(names, x).shape == (4,) and np.isfinite(prior.score(names, x)).all()
    # --hold-out: the keys of a suite case name exactly that case's recorded workload
    keys: list[str] = []
    prior_fit.load([records], "", min_trials=4, keys=keys)
    held = prior_fit.case_keys("gemm:32,32,64")
    assert len(keys) == 2 and sum(k in held for k in keys) == 1


def test_the_replay_of_a_budget_rewards_a_better_ranker() -> None:
    """``benchmarks/prior_margin.py``'s replay: every draw measures 16 ... 48 distinct recorded
    programs, its ratios are >= 1, and ranking by the true latency beats ranking at random."""
    from benchmarks import prior_margin

    rng = np.random.default_rng(0)
    latency = rng.lognormal(0.0, 0.5, size=160)
    scores = rng.normal(size=160)  # an uninformative prior for the first round

    def oracle(measured: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        return -latency[candidates]

    def random(measured: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        return rng.random(len(candidates))

    best = prior_margin.replay(oracle, scores, latency, repeats=20, seed=1)
    blind = prior_margin.replay(random, scores, latency, repeats=20, seed=1)
    assert set(best) == set(prior_margin.BUDGETS)
    for budget in prior_margin.BUDGETS:
        assert len(best[budget]) == 20 and min(best[budget]) >= 1.0
        assert np.mean(np.log(best[budget])) < np.mean(np.log(blind[budget]))
    assert all(np.diff([np.mean(best[b]) for b in prior_margin.BUDGETS]) <= 0)


def test_the_replay_compares_a_prior_file_with_the_shipped_prior(tmp_path: Path) -> None:
    """``prior_margin.py --prior NAME=FILE``: the arm ``margin:NAME`` replays a tune with that
    prior. With the shipped prior's own weights it replays exactly the shipped ``margin`` arm
    (same draws, same scores); every arm named on the command line is written."""
    import csv
    import json

    from benchmarks import prior_margin
    from dla_targets.dlboost import PRIOR

    records = tmp_path / "rand.sqlite"
    argv = ["--cases", "gemm:32,32,64", "--dtype", "float32", "--out", str(records)]
    assert prior_records.main([*argv, "--trials", "48", "--batch", "16"]) == 0
    same, negated = tmp_path / "same.json", tmp_path / "negated.json"
    same.write_text(json.dumps({"weights": PRIOR.weights}))
    negated.write_text(json.dumps({"weights": {f: -w for f, w in PRIOR.weights.items()}}))
    out = tmp_path / "results"
    argv = [str(records), "--target", "dlboost", "--min-trials", "48", "--repeats", "3"]
    argv += ["--arms", "margin", "--prior", f"same={same}", "--prior", f"neg={negated}"]
    assert prior_margin.main([*argv, "--out", str(out)]) == 0
    (path,) = out.glob("prior_margin-*.csv")
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r["workload"] != "all"]
    by_arm = {}
    for r in rows:
        by_arm.setdefault(r["arm"], {})[int(r["trials"])] = float(r["best_over_recorded_best"])
    assert set(by_arm) == {"margin", "margin:same", "margin:neg"}
    assert by_arm["margin:same"] == by_arm["margin"]
    assert all(v >= 1.0 for arm in by_arm.values() for v in arm.values())
    with pytest.raises(ValueError, match="NAME=FILE"):
        prior_margin.load_prior(str(same))


def test_prior_fit_saves_its_final_fit_for_the_replay(tmp_path: Path) -> None:
    """``prior_fit.py --save FILE`` writes the fit of every generic feature on all workloads,
    as JSON that ``prior_margin.py --prior`` reads back to the same weights (three tiny float32
    cases, 4 random programs each)."""
    from benchmarks import prior_margin

    records = tmp_path / "prior.sqlite"
    cases = "gemm:16,16,32;gemm:16,32,32;bmm:2,16,16,32"
    argv = ["--cases", cases, "--dtype", "float32", "--out", str(records), "--trials", "4"]
    assert prior_records.main([*argv, "--batch", "4"]) == 0
    saved = tmp_path / "priors" / "fit.json"
    assert prior_fit.main([str(records), "--min-trials", "4", "--save", str(saved)]) == 0
    name, prior = prior_margin.load_prior(f"mine={saved}")
    data, _ = prior_fit.load([records], "", min_trials=4)
    assert name == "mine" and len(data) == 3
    assert prior.weights == pytest.approx(fit_linear_prior(data).weights)
    assert "--save" in prior.source and "prior_fit.py" in prior.source
