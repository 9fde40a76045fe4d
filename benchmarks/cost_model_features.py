"""Do the compile-free schedule features help the cost model? Held-out ranking on recorded trials.

For one workload in a records file, the valid trials are split at random into a training set
(``--train`` trials, as a tune would have after a few rounds) and a test set, and XGBoost
(:class:`heronlike.cost_model.XGBCostModel`, Heron's settings) is fitted on

* ``csp``: Heron's features, every CSP variable (:class:`heronlike.features.CSPFeatures`), and
* ``schedule``: those plus the derived loop, footprint and parallelism features
  (:class:`heronlike.features.ScheduleFeatures`),

then scored on the test set by Spearman's rank correlation and by top-10% recall (the share of
the truly fastest 10% of test trials that the model also puts in its top 10%), over several
random splits. Usage::

    python benchmarks/cost_model_features.py benchmarks/out/search_efficiency/*-gemm-random-*.sqlite
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

from heronlike import ops
from heronlike.cost_model import XGBCostModel
from heronlike.features import CSPFeatures, ScheduleFeatures
from heronlike.records import Records
from heronlike.space import generate_space

CASES = {"gemm": (ops.gemm, (1024, 1024, 1024)), "bmm": (ops.bmm, (12, 512, 512, 64))}


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _recall(truth: np.ndarray, pred: np.ndarray, frac: float = 0.1) -> float:
    k = max(1, int(round(frac * len(truth))))
    top = set(np.argsort(-truth)[:k])
    return len(top & set(np.argsort(-pred)[:k])) / k


def run(argv: list[str] | None = None) -> int:
    """Print mean Spearman and top-10% recall of both feature sets over ``--splits`` splits."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("records", nargs="+", type=Path)
    p.add_argument("--op", default="gemm", choices=sorted(CASES))
    p.add_argument("--train", type=int, default=128)
    p.add_argument("--splits", type=int, default=10)
    a = p.parse_args(argv)
    builder, shape = CASES[a.op]
    space = generate_space(builder(*shape, dtype="int8"), "dlboost")
    rows: dict[tuple[int, ...], tuple[dict[str, int], float]] = {}
    for path in a.records:
        with Records(path) as db:
            for rec in db.trials(space.workload_key, space.target.key):
                if rec.ok and all(v in rec.assignment for v in space.csp.vars):
                    key = tuple(rec.assignment[k] for k in space.csp.knobs)
                    rows[key] = (rec.assignment, space.dag.flop() / rec.latency_s)
    assignments = [r[0] for r in rows.values()]
    y = np.array([r[1] for r in rows.values()])
    if len(y) < a.train + 20:
        print(f"only {len(y)} valid distinct trials; need at least {a.train + 20}")
        return 1
    featurizers = {"csp": CSPFeatures(space.csp), "schedule": ScheduleFeatures(space)}
    x = {name: f(assignments) for name, f in featurizers.items()}
    scores: dict[str, list[tuple[float, float]]] = {name: [] for name in featurizers}
    rng = np.random.default_rng(0)
    for split in range(a.splits):
        order = rng.permutation(len(y))
        train, test = order[: a.train], order[a.train :]
        for name in featurizers:
            model = XGBCostModel(seed=split)
            model.fit(x[name][train], y[train])
            pred = model.predict(x[name][test])
            scores[name].append((_spearman(y[test], pred), _recall(y[test], pred)))
    print(f"{a.op}: {len(y)} valid distinct trials, train {a.train}, {a.splits} random splits")
    for name, vals in scores.items():
        rho = statistics.mean(v[0] for v in vals)
        rec = statistics.mean(v[1] for v in vals)
        print(
            f"  {name:9s} {x[name].shape[1]:3d} features: "
            f"Spearman {rho:.3f}, top-10% recall {rec:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(run())
