"""Which cost model ranks a small budget's later rounds best: XGBoost alone, XGBoost with the
schedule prior as its base margin, or the prior alone? Replayed on recorded random programs.

After the first round of a 16-trial tune (8 trials, ranked by the prior:
:meth:`heronlike.explore.base.Explorer.initial`; here ``PRIOR`` of ``dla_targets/dlboost.py``,
the DL Boost prior of every CPU without one of its own, unless ``--prior`` names another),
Heron's XGBoost model ranks the next rounds from the workload's own 8, 16, ... measurements.
This script replays that loop on records of random programs (``benchmarks/prior_records.py``:
``--trials`` RandSAT programs per workload, each measured once), so that every arm sees the
same measurements and no timing noise of the minute decides between them. For each workload
and ``--repeats`` random draws:

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
workload) serve every arm.

``--prior NAME=FILE`` (repeatable) compares *priors* the same way: it adds the arm
``margin:NAME``, a tune with the prior of ``FILE`` (JSON ``{"weights": ...}``, as
``benchmarks/priors/`` holds) in place of the shipped one: its first round ranked by that prior,
its later rounds by XGBoost with that prior as the base margin. ``--arms`` keeps only the named
arms of the four above (``--arms margin`` to compare priors alone).

Writes one row per workload, arm and budget, plus ``all`` rows (geomeans over workloads), to
``benchmarks/results/prior_margin-<cpu>-<date>.csv``.

    python benchmarks/prior_records.py --out rand.sqlite --dtype int8 --trials 160 \\
        --batch 16 --cases G3,B1,C1D5,C2D1,C2D4,C3D3,D1,G1
    python benchmarks/prior_margin.py rand.sqlite
    python benchmarks/prior_margin.py rand.sqlite --arms margin \\
        --prior zen4=benchmarks/priors/dlboost-zen4-2026-12-07.json

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


def load_prior(spec: str) -> tuple[str, LinearPrior]:
    """``NAME=FILE`` (``--prior``) -> ``(NAME, the prior of FILE)``; FILE holds JSON
    ``{"weights": {feature: weight}, "source": ...}`` (``benchmarks/priors/``;
    :func:`benchmarks.prior_fit.read_prior`).

    Raises:
        ValueError: if ``spec`` is not ``NAME=FILE`` or FILE has no ``weights``.
        OSError: if FILE cannot be read.
    """
    name, _, path = spec.partition("=")
    if not name or not path:
        raise ValueError(f"--prior {spec!r}: want NAME=FILE")
    return name, prior_fit.read_prior(Path(path))


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
    p.add_argument(
        "--prior",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="add the arm margin:NAME, a tune with the prior of FILE (JSON weights) in place "
        "of the shipped one (repeatable)",
    )
    p.add_argument(
        "--arms",
        default=",".join(ARMS),
        help=f"the arms of the shipped prior to replay, of {','.join(ARMS)}",
    )
    a = p.parse_args(argv)
    shipped = [arm for arm in a.arms.split(",") if arm]
    if not set(shipped) <= set(ARMS):
        p.error(f"--arms {a.arms}: each one of {', '.join(ARMS)}")
    try:
        others = [load_prior(spec) for spec in a.prior]
    except (OSError, ValueError) as err:
        p.error(str(err))
    arm_names = shipped + [f"margin:{name}" for name, _ in others]
    if not arm_names:
        p.error("no arm to replay")
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
        # arm -> (its ranker of later rounds, the scores of its first round)
        base = rankers(names, x, 1.0 / latency, PRIOR, seed=0)
        arms = {arm: (base[arm], PRIOR.score(names, x)) for arm in shipped}
        for name, prior in others:
            rank = rankers(names, x, 1.0 / latency, prior, seed=0)["margin"]
            arms[f"margin:{name}"] = (rank, prior.score(names, x))
        line = [f"{described.get(key, key)[:40]:40s}"]
        for arm, (rank, scores) in arms.items():
            ratios = replay(rank, scores, latency, a.repeats, seed=1)
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
    width = max(7, *(len(arm) for arm in arm_names))
    print(f"  {'arm':{width}s} " + "".join(f"{b:>9d}" for b in BUDGETS))
    for arm in arm_names:
        print(f"  {arm:{width}s} " + "".join(f"{geomean(per_arm[arm, b]):9.4f}" for b in BUDGETS))
    path = write_rows(a.out / f"prior_margin-{machine_slug()}-{machine_stamp()['date']}.csv", rows)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
