"""Fit a target's schedule prior (:mod:`heronlike.prior`) on records files, and check it.

Every workload of the given records files (any target; ``--target`` keeps those whose target
key starts with it) is rebuilt from its stored compute text, its space regenerated with the
current rules, and its valid trials turned into :func:`heronlike.prior.generic_features`.
Workloads whose recorded assignments no longer fit the current space (a knob added since) are
skipped and counted.

The check is leave-one-workload-out: for each workload, a prior fitted on all the *others*
ranks its trials, and the script prints

* the Spearman rank correlation between the prior's score and the measured speed (median and
  mean over the workloads);
* the gain of a first round picked by the prior over a random one: from random pools of
  ``--pool`` of the workload's trials, the best latency of a random ``--k`` against the best of
  the prior's top ``--k`` (geomean over workloads of ``random best / prior best``, > 1 is a gain).

Then it fits on every workload and prints the weights as the Python mapping a target's
``prior()`` returns (``dla_targets/dlboost.py`` holds the DL Boost one).

``--without F`` (repeatable) runs the check a second time without the generic features ``F``,
to see what they add (``--without tile.loads``). ``--current T`` also checks the prior target
``T`` uses today (``dlboost``; per workload, the prior its space gets: ``prior_for``) on the
same workloads, as it is (it was fitted on other records,
so no workload is left out): whether a refit ranks these records better than it.
``--fixed F=W`` (repeatable) weighs the generic feature ``F`` by ``W`` in every fit instead of
fitting it (a weight from first principles: ``padding.skipped=0.6931``, ``ln 2``).
``--trees`` runs the same checks with a nonlinear model of the same generic features (an
XGBoost regression of ``-ln(latency)``, centred within each workload as the linear fit is,
:class:`TreePrior`): whether the prior's linear form, not its features, limits its ranking.
``--hold-out CASES`` leaves the workloads of those suite cases out of every fit and checks the
final fit on them (the cases a tune-level check of the prior then runs out of sample).
``--save FILE`` writes the final fit of every generic feature as JSON (``{"weights": ...,
"source": ...}``, as ``benchmarks/priors/`` holds), the file ``prior_margin.py --prior`` and
``prior_effect.py --baseline`` read.

Records are read as points of today's space: each trial's knobs, its derived variables
recomputed; trials whose knobs today's constraints reject are left out
(:func:`current_points`).

    python benchmarks/prior_fit.py benchmarks/out/resnet50-qdq-int8.sqlite \\
        benchmarks/out/suite-*/*/heronlike/records.sqlite --target dlboost
    python benchmarks/prior_fit.py int8.sqlite float32.sqlite --current dlboost \\
        --hold-out G1,G3,B1,C1D5,C2D1,C2D4,C3D1,C3D3,D1
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from heronlike.features import ScheduleFeatures  # noqa: E402
from heronlike.prior import (  # noqa: E402
    GENERIC_FEATURES,
    LinearPrior,
    fit_linear_prior,
    generic_matrix,
)
from heronlike.space import Space, generate_space  # noqa: E402

Workload = tuple[list[str], np.ndarray, np.ndarray]


def load(
    paths: list[Path],
    target: str,
    min_trials: int,
    keys: list[str] | None = None,
    spaces: list[Space] | None = None,
) -> tuple[list[Workload], list[str]]:
    """``(names, features, latencies)`` of every usable workload, and the skipped ones'
    reasons; each usable workload's key is appended to ``keys`` and its space to ``spaces``
    (in the same order) when given.
    """
    import tvm.script

    out: list[Workload] = []
    skipped: list[str] = []
    for path in paths:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            workloads = db.execute("SELECT workload_key, target_key, compute_text FROM workloads")
            for wk, tk, text in workloads.fetchall():
                if not tk.startswith(target):
                    continue
                rows = db.execute(
                    "SELECT assignment_json, latency_s FROM trials WHERE workload_key = ? AND "
                    "target_key = ? AND latency_s IS NOT NULL",
                    (wk, tk),
                ).fetchall()
                if len(rows) < min_trials:
                    continue
                try:
                    space = generate_space(tvm.script.from_source(text), tk)
                    featurizer = ScheduleFeatures(space)
                    points, latencies = current_points(space, rows)
                    if len(points) < min_trials:
                        raise ValueError(f"{len(points)} of {len(rows)} trials fit today's space")
                    x, names = featurizer(points), list(featurizer.names)
                except Exception as exc:  # noqa: BLE001 - a space the current rules changed
                    skipped.append(f"{path}:{wk}: {type(exc).__name__} {exc}")
                    continue
                out.append((names, x, np.array(latencies)))
                if keys is not None:
                    keys.append(wk)
                if spaces is not None:
                    spaces.append(space)
    return out, skipped


def split_out(items: list, keys: list[str], out: set[str]) -> tuple[list, list]:
    """``items`` (one per workload, in the order of their ``keys``) split into those whose key
    is not in ``out`` and those whose key is (the held-out workloads)."""
    return [x for x, k in zip(items, keys) if k not in out], [
        x for x, k in zip(items, keys) if k in out
    ]


def current_points(space: Space, rows: list[tuple[str, float]]) -> tuple[list[dict], list[float]]:
    """The records ``(assignment JSON, latency)`` as points of today's ``space``: each
    record's knobs, every derived variable recomputed (:meth:`heronlike.csp.CSP.complete`), so
    features see what a tune sees today (a register reserve grown since, say); the records
    whose knobs today's constraints reject (a tile that spilled before the reserve grew) are
    left out, with their latencies."""
    knobs = space.csp.knobs
    steps, determined = space.csp.derivation(knobs)
    points, latencies = [], []
    for text, latency in rows:
        recorded = json.loads(text)
        point = (
            space.csp.complete({k: recorded[k] for k in knobs if k in recorded}, steps)
            if determined
            else None
        )
        if point is not None:
            points.append(point)
            latencies.append(latency)
    return points, latencies


@dataclass(frozen=True)
class TreePrior:
    """A nonlinear counterpart of :class:`heronlike.prior.LinearPrior` for ``--trees``: an
    XGBoost regression of ``-ln(latency)`` on the generic features, each workload's labels
    centred (the fixed effects of :func:`heronlike.prior.fit_linear_prior`), so only the order
    of its scores within one space means anything. Not shipped: a check of the linear form."""

    booster: object
    features: tuple[str, ...]

    @classmethod
    def fit(cls, workloads: list[Workload], features: tuple[str, ...], seed: int = 0) -> TreePrior:
        """Fit on ``(names, x, latency_s)`` workloads (150 trees of depth 4, learning rate
        0.1, 80 % row subsampling)."""
        import xgboost as xgb

        rows = [generic_matrix(names, x, features) for names, x, _ in workloads]
        labels = [-np.log(lat) + np.log(lat).mean() for _, _, lat in workloads]
        params = {"max_depth": 4, "eta": 0.1, "subsample": 0.8, "min_child_weight": 3}
        dtrain = xgb.DMatrix(np.concatenate(rows), label=np.concatenate(labels))
        return cls(xgb.train({**params, "seed": seed}, dtrain, 150), features)

    def score(self, names: list[str], x: np.ndarray) -> np.ndarray:
        """``(n,)`` scores of the ``n`` rows of ``x`` (columns ``names``); higher = faster."""
        import xgboost as xgb

        return self.booster.predict(xgb.DMatrix(generic_matrix(names, x, self.features)))


def case_keys(cases: str) -> set[str]:
    """The workload keys of the suite's ``cases`` (``benchmarks/suite.py`` names or shapes,
    comma-separated) as :mod:`benchmarks.prior_records` records them: int8 on this CPU's DL
    Boost mode, padded to the intrinsic and as given, and float32 on the general rule set."""
    from benchmarks import suite
    from heronlike import ops
    from heronlike.dag import ComputeDAG

    mode = suite.resolve_mode("auto")
    out = set()
    for spec in suite.split_cases(cases):
        _, op, params, _ = suite.parse_case(spec)
        computes = [getattr(ops, op)(**params, dtype="int8")]
        computes += [suite.case_compute(spec, dt, mode).compute for dt in ("int8", "float32")]
        out |= {ComputeDAG.from_compute(c).workload_key for c in computes}
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation of two ``(n,)`` vectors (0 when either is constant)."""
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    if ra.std() == 0 or rb.std() == 0 or np.all(a == a[0]):
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def first_round_gain(
    score: np.ndarray, latency: np.ndarray, pool: int, k: int, rng: np.random.Generator
) -> float:
    """Mean ``ln(random best / prior best)`` over 200 random pools of one workload's trials."""
    pool = min(pool, latency.size)
    k = min(k, max(1, pool // 4))
    gains = []
    for _ in range(200):
        p = rng.choice(latency.size, pool, replace=False)
        top = p[np.argsort(-score[p], kind="stable")[:k]]
        rnd = rng.choice(p, k, replace=False)
        gains.append(np.log(latency[rnd].min() / latency[top].min()))
    return float(np.mean(gains))


def report(
    label: str,
    data: list[Workload],
    a: argparse.Namespace,
    prior_for: Callable[[int], LinearPrior | TreePrior],
) -> str:
    """One line: how well ``prior_for(i)`` ranks workload ``i``'s trials, over all workloads
    (Spearman against the measured speed; the best of its top ``a.k`` of random pools of
    ``a.pool`` against a random ``a.k``'s)."""
    rng = np.random.default_rng(0)
    rhos, gains = [], []
    for i, (names, x, latency) in enumerate(data):
        score = prior_for(i).score(names, x)
        rhos.append(spearman(score, -np.log(latency)))
        gains.append(first_round_gain(score, latency, a.pool, a.k, rng))
    return (
        f"{label}: Spearman median {np.median(rhos):.2f}, mean {np.mean(rhos):.2f}; top-{a.k} "
        f"of {a.pool} vs random {a.k}: best {np.exp(np.mean(gains)):.3f}x (worse on "
        f"{sum(g < 0 for g in gains)} of {len(gains)} workloads)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("records", nargs="+", type=Path, help="records files (SQLite)")
    p.add_argument("--target", default="", help="keep target keys starting with this")
    p.add_argument("--min-trials", type=int, default=8, help="valid trials a workload needs")
    p.add_argument("--pool", type=int, default=32, help="first-round pool size of the check")
    p.add_argument("--k", type=int, default=8, help="programs picked from a pool")
    p.add_argument("--ridge", type=float, default=1.0)
    p.add_argument(
        "--current",
        metavar="T",
        default=None,
        help="also check the prior target T uses today on these workloads (e.g. dlboost)",
    )
    p.add_argument(
        "--without",
        action="append",
        default=[],
        metavar="F",
        choices=GENERIC_FEATURES,
        help="check (and fit) a second time without the generic feature F (repeatable)",
    )
    p.add_argument(
        "--hold-out",
        metavar="CASES",
        default="",
        help="fit without the workloads of these suite cases (comma-separated) and check the "
        "fit on them: the cases a later tune-level check runs out of sample",
    )
    p.add_argument(
        "--fixed",
        action="append",
        default=[],
        metavar="F=W",
        help="weigh the generic feature F by W instead of fitting it, in every fit "
        "(repeatable; heronlike.prior.fit_linear_prior's fixed)",
    )
    p.add_argument(
        "--save",
        type=Path,
        metavar="FILE",
        help="write the final fit (every generic feature) as JSON weights to FILE",
    )
    p.add_argument(
        "--trees",
        action="store_true",
        help="also check an XGBoost regression on the same generic features (TreePrior)",
    )
    a = p.parse_args(argv)
    fixed = {}
    for item in a.fixed:
        name, _, weight = item.partition("=")
        if name not in GENERIC_FEATURES or not weight:
            p.error(f"--fixed {item}: want F=W with F one of {', '.join(GENERIC_FEATURES)}")
        fixed[name] = float(weight)
    keys: list[str] = []
    spaces: list[Space] = []
    data, skipped = load(a.records, a.target, a.min_trials, keys, spaces)
    held: list[Workload] = []
    held_spaces: list[Space] = []
    if a.hold_out:
        out = case_keys(a.hold_out)
        data, held = split_out(data, keys, out)
        spaces, held_spaces = split_out(spaces, keys, out)
    print(
        f"{len(data)} workloads, {sum(len(w[2]) for w in data)} trials "
        f"({len(held)} more held out); skipped {len(skipped)}"
    )
    if len(data) < 3:
        print("need at least 3 workloads", file=sys.stderr)
        return 1
    feature_sets = [("generic features", GENERIC_FEATURES)]
    if a.without:
        kept = tuple(f for f in GENERIC_FEATURES if f not in a.without)
        feature_sets.append((f"without {', '.join(a.without)}", kept))
    if a.current:
        from heronlike.target import get_target

        current = get_target(a.current)  # each workload ranked by the prior its tune gets
        print(
            report(
                f"the prior of {a.current} today", data, a, lambda i: current.prior_for(spaces[i])
            )
        )
        if held:
            label = f"the prior of {a.current} today, held out"
            print(report(label, held, a, lambda i: current.prior_for(held_spaces[i])))
    for label, features in feature_sets:

        def fit_without(i: int, features: tuple[str, ...] = features) -> LinearPrior:
            rest = data[:i] + data[i + 1 :]
            return fit_linear_prior(rest, features=features, ridge=a.ridge, fixed=fixed)

        print(report(f"{label}, leave-one-workload-out", data, a, fit_without))
        prior = fit_linear_prior(data, features=features, ridge=a.ridge, fixed=fixed)
        if held:
            print(report(f"{label}, the {len(held)} held out", held, a, lambda _, p=prior: p))
        if a.trees:

            def trees_without(i: int, features: tuple[str, ...] = features) -> TreePrior:
                return TreePrior.fit(data[:i] + data[i + 1 :], features)

            print(report(f"{label}, trees, leave-one-workload-out", data, a, trees_without))
            if held:
                trees = TreePrior.fit(data, features)
                label_held = f"{label}, trees, the {len(held)} held out"
                print(report(label_held, held, a, lambda _, t=trees: t))
        print("weights = {")
        for name, w in prior.weights.items():
            print(f'    "{name}": {w:+.4f},')
        print("}")
        if a.save is not None and features == GENERIC_FEATURES:
            save_prior(a.save, prior, argv)
            print(f"wrote {a.save}")
    return 0


def read_prior(path: Path) -> LinearPrior:
    """The prior a JSON file ``{"weights": {feature: weight}, "source": ...}`` holds (as
    ``benchmarks/priors/`` does and :func:`save_prior` writes); its source, or the path.

    Raises:
        ValueError: if the file is not JSON or has no ``weights`` mapping.
        OSError: if it cannot be read.
    """
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict) or not isinstance(data.get("weights"), dict):
        raise ValueError(f"{path} has no 'weights' mapping")
    return LinearPrior(data["weights"], source=str(data.get("source", path)))


def save_prior(path: Path, prior: LinearPrior, argv: list[str] | None) -> None:
    """Write ``prior`` as JSON ``{"weights": ..., "source": ...}`` to ``path`` (what
    :func:`read_prior` reads); the source names the command (``argv``), the CPU and the date."""
    from heronlike.host import cpu_model, machine_stamp

    args = " ".join(sys.argv[1:] if argv is None else argv)
    source = f"benchmarks/prior_fit.py {args} ({cpu_model()}, {machine_stamp()['date']})"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"weights": dict(prior.weights), "source": source}, indent=1)
    path.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
