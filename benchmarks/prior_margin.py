"""Which cost model ranks a small budget's later rounds best: XGBoost alone, XGBoost with the
schedule prior as its base margin, or the prior alone? Replayed on recorded random programs.

After the first round of a 16-trial tune (8 trials, ranked by the target's prior:
:meth:`heronlike.explore.base.Explorer.initial`), Heron's XGBoost model ranks the next rounds
from the workload's own 8, 16, ... measurements. This script replays that loop on records of
random programs (``benchmarks/prior_records.py``: ``--trials`` RandSAT programs per workload,
each measured once), so that every arm sees the same measurements and no timing noise of the
minute decides between them. For each workload and ``--repeats`` random draws:

1. the first round: a pool of 64 recorded programs, the prior's best 6 and 2 at random (as
   ``initial`` with ``prior_pool_factor`` 8, ``prior_share`` 0.75);
2. each later round of 8: a pool of 64 unmeasured recorded programs (standing in for the
   explorer's population), ranked by the arm, its best ``ceil(0.6 · 8)`` and the rest at random
   (CGA's ε-greedy pick, ε = 0.6);
3. after 16, 24, 32 and 48 trials, the best latency measured so far over the workload's best
   recorded one.

Arms: ``model`` (:class:`~heronlike.cost_model.XGBCostModel` alone, the cost model before
this change), ``margin`` (:class:`~heronlike.cost_model.PriorMarginCostModel`, the default now),
``prior`` (the prior alone, never learning) and ``random``. The same random draws (seed 1 per
workload) serve every arm. Writes one row per workload, arm and budget, plus ``all`` rows
(geomeans over workloads), to ``benchmarks/results/prior_margin-<cpu>-<date>.csv``.

    python benchmarks/prior_records.py --out rand.sqlite --dtype int8 --trials 160 \\
        --batch 16 --cases G3,B1,C1D5,C2D1,C2D4,C3D3,D1,G1
    python benchmarks/prior_margin.py rand.sqlite

The cases above are ones the DL Boost prior was not fitted on (``dla_targets/dlboost.py``).
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import prior_fit  # noqa: E402
from benchmarks.csv_rows import write_rows  # noqa: E402
from benchmarks.suite import geomean  # noqa: E402
from heronlike.cost_model import PriorMarginCostModel, XGBCostModel  # noqa: E402
from heronlike.explore.base import Explorer  # noqa: E402
from heronlike.explore.cga import CGAOptions  # noqa: E402
from heronlike.host import machine_slug, machine_stamp  # noqa: E402
from heronlike.prior import LinearPrior  # noqa: E402

ARMS = ("model", "margin", "prior", "random")
BUDGETS = (16, 24, 32, 48)
ROUND = 8
#: the explorers' first round with a prior (Explorer.initial) and CGA's later ε-greedy pick
POOL = ROUND * Explorer.prior_pool_factor
FIRST_SHARE = Explorer.prior_share
EPSILON = CGAOptions().epsilon

#: ranks ``candidates`` (row indices) from the ``measured`` rows of a workload
Ranker = Callable[[np.ndarray, np.ndarray], np.ndarray]


def rankers(
    names: list[str], x: np.ndarray, throughput: np.ndarray, prior: LinearPrior, seed: int
) -> dict[str, Ranker]:
    """The arms' scores of candidate rows given the measured rows (higher = picked first)."""
    scores = prior.score(names, x)
    rng = np.random.default_rng(seed)

    def model(measured: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        m = XGBCostModel(seed=seed)
        m.fit(x[measured], throughput[measured])
        return m.predict(x[candidates])

    def margin(measured: np.ndarray, candidates: np.ndarray) -> np.ndarray:
        m = PriorMarginCostModel(prior, names, seed=seed)
        m.fit(x[measured], throughput[measured])
        return m.predict(x[candidates])

    return {
        "model": model,
        "margin": margin,
        "prior": lambda measured, candidates: scores[candidates],
        "random": lambda measured, candidates: rng.random(len(candidates)),
    }


def replay(
    rank: Ranker, scores: np.ndarray, latency: np.ndarray, repeats: int, seed: int
) -> dict[int, list[float]]:
    """``budget -> [best so far / best recorded]`` over ``repeats`` draws of one arm."""
    rng = np.random.default_rng(seed)
    n = len(latency)
    out: dict[int, list[float]] = {b: [] for b in BUDGETS}
    for _ in range(repeats):
        pool = rng.choice(n, size=min(POOL, n), replace=False)
        order = pool[np.argsort(-scores[pool], kind="stable")]
        greedy = math.ceil(FIRST_SHARE * ROUND)
        measured = list(order[:greedy])
        measured += list(rng.choice(order[greedy:], size=ROUND - greedy, replace=False))
        while len(measured) < max(BUDGETS):
            rest = np.setdiff1d(np.arange(n), measured)
            candidates = rng.choice(rest, size=min(POOL, len(rest)), replace=False)
            ranked = candidates[np.argsort(-rank(np.array(measured), candidates), kind="stable")]
            greedy = math.ceil(EPSILON * ROUND)
            measured += list(ranked[:greedy])
            measured += list(rng.choice(ranked[greedy:], size=ROUND - greedy, replace=False))
            if len(measured) in out:
                out[len(measured)].append(float(latency[measured].min() / latency.min()))
    return out


def _descriptions(path: Path) -> dict[str, str]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT workload_key, description FROM workloads").fetchall()
    return {key: text for key, text in rows}


def main(argv: list[str] | None = None) -> int:
    from dla_targets.dlboost import PRIOR

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", type=Path, nargs="+", help="records of random programs")
    p.add_argument("--target", default="dlboost", help="target key prefix of the workloads")
    p.add_argument("--repeats", type=int, default=40, help="random draws per workload and arm")
    p.add_argument("--min-trials", type=int, default=2 * POOL)
    p.add_argument(
        "--cases",
        default="G3,B1,C1D5,C2D1,C2D4,C3D3,D1,G1",
        help="the suite's cases the records hold, to name their workloads",
    )
    p.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    a = p.parse_args(argv)
    keys: list[str] = []
    workloads, skipped = prior_fit.load(a.records, a.target, a.min_trials, keys)
    for line in skipped:
        print(f"skipped {line}")
    if not workloads:
        print("no workload with enough trials", file=sys.stderr)
        return 1
    described: dict[str, str] = {}
    for path in a.records:
        described.update(_descriptions(path))
    for case in a.cases.split(","):
        described.update(dict.fromkeys(prior_fit.case_keys(case), case))
    rows: list[dict] = []
    per_arm: dict[tuple[str, int], list[float]] = {}
    for (names, x, latency), key in zip(workloads, keys, strict=True):
        scores = PRIOR.score(names, x)
        arms = rankers(names, x, 1.0 / latency, PRIOR, seed=0)
        line = [f"{described.get(key, key)[:40]:40s}"]
        for arm in ARMS:
            ratios = replay(arms[arm], scores, latency, a.repeats, seed=1)
            for budget, values in ratios.items():
                g = geomean(values)
                per_arm.setdefault((arm, budget), []).append(g)
                rows.append(
                    dict(
                        workload=described.get(key, key),
                        workload_key=key,
                        programs=len(latency),
                        arm=arm,
                        trials=budget,
                        repeats=a.repeats,
                        best_over_recorded_best=round(g, 5),
                        within_95_pct=round(100 * float(np.mean(np.array(values) <= 1 / 0.95)), 1),
                        **machine_stamp(),
                    )
                )
            line.append(f"{arm} {geomean(ratios[BUDGETS[0]]):.3f}")
        print("  ".join(line), flush=True)
    for (arm, budget), values in per_arm.items():
        rows.append(
            dict(
                workload="all",
                workload_key="",
                programs="",
                arm=arm,
                trials=budget,
                repeats=a.repeats,
                best_over_recorded_best=round(geomean(values), 5),
                within_95_pct="",
                **machine_stamp(),
            )
        )
    print(f"\ngeomean over {len(workloads)} workloads of best so far / best recorded:")
    print("  arm     " + "".join(f"{b:>9d}" for b in BUDGETS))
    for arm in ARMS:
        print(f"  {arm:7s} " + "".join(f"{geomean(per_arm[arm, b]):9.4f}" for b in BUDGETS))
    path = write_rows(a.out / f"prior_margin-{machine_slug()}-{machine_stamp()['date']}.csv", rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
