"""What the schedule prior (:mod:`heronlike.prior`) buys at small trial budgets (issue 25).

For each case and seed, two tunes of the same compute with the same seed, explorer and budget,
one after the other in this process: ``prior=True`` (the first, untrained round ranked by the
target's prior) and ``prior=False`` (that round random, as in Heron); the arm that runs first
alternates with the seed. Then both picks are re-measured side by side (interleaved rounds,
:meth:`~heronlike.measure.measurer.Measurer.finish_many`), so the two final kernels are timed
under the same conditions. Per row:

* ``*_first_ms``: the best tuning-time latency after the first round (what the prior ranks);
* ``*_final_ms``: the side-by-side re-measure of the kernel the tune returned;
* ``*_trials_to_95``: trials until the tune's best reached 95 % of its final tuning-time best;
* ``speedup``: ``off_final_ms / on_final_ms`` (> 1: the prior's tune found the faster kernel).

``--model-alone`` makes the ``off`` arm the cost model before
:class:`~heronlike.cost_model.PriorMarginCostModel`: the prior ranks its first round, then
XGBoost alone ranks the rest (the ``on`` arm: XGBoost with the prior as its base margin).

``--baseline FILE`` makes the ``off`` arm rank its first round by another prior instead of
none: a JSON file ``{"weights": {generic feature: weight}, "source": "..."}`` (a refitted prior
against the one it replaces: ``git show REV:dla_targets/dlboost.py`` has the old weights).

The cases are those of ``benchmarks/suite.py`` (Heron's table, padded to the intrinsic as
there). The DL Boost prior was fitted without the default cases' records (see
``dla_targets/dlboost.py``), so they measure it on workloads it has not seen.

    python benchmarks/prior_effect.py                          # 10 cases x 2 seeds, 16 trials
    python benchmarks/prior_effect.py --cases G1 --seeds 1 --trials 8   # a quick look

Writes ``benchmarks/results/prior_effect-<cpu>-<date>.csv`` and prints the geomeans.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import heronlike  # noqa: E402
from benchmarks import prior_fit, suite  # noqa: E402
from heronlike.cost_model import XGBCostModel  # noqa: E402
from heronlike.host import cpu_model, machine_stamp  # noqa: E402
from heronlike.session import TuningSession  # noqa: E402

#: the cases the DL Boost prior was not fitted on: the rows lost to MetaSchedule or PyTorch at
#: 16 trials on the Zen 5 (G5 G4 C1D1 C2D5 T5 D4) and four more (GEMM, BMM, 1-D, 3-D convolution)
DEFAULT_CASES = ("G5", "G4", "C1D1", "C2D5", "T5", "D4", "G1", "B1", "C2D1", "C3D2")


def _ms(latency_s: float | None) -> float | None:
    return latency_s * 1e3 if latency_s else None


def tune_arm(compute, target: str, a: argparse.Namespace, seed: int, prior: bool, work: Path):
    """One tune; its result, the best after its first round (s) and its trials to 95 %. The
    ``off`` arm (``prior=False``) uses ``a.baseline``'s prior when one is given; with
    ``--model-alone`` it keeps the target's prior for its first round and then ranks by the
    XGBoost model alone, without the prior as its base margin."""
    curve: list[tuple[int, float]] = []

    def progress(p) -> None:  # noqa: ANN001
        if p.best_latency_s:
            curve.append((p.trials_done, p.best_latency_s))

    r = heronlike.tune(
        compute,
        target,
        trials=a.trials,
        batch_size=a.batch,
        explorer=a.explorer,
        seed=seed,
        prior=prior or a.baseline_prior or a.model_alone,
        cost_model=XGBCostModel(seed=seed) if a.model_alone and not prior else None,
        records=work / f"{'on' if prior else 'off'}-{seed}.sqlite",
        work_dir=work,
        number=suite.TRIAL_NUMBER,
        repeat=suite.TRIAL_REPEAT,
        min_repeat_ms=suite.MIN_REPEAT_MS,
        finalists=suite.FINALISTS,
        final_repeat=suite.FINAL_REPEAT,
        progress=progress,
    )
    first = curve[0][1] if curve else None
    final = curve[-1][1] if curve else None
    to_95 = next((n for n, best in curve if final and best <= final / 0.95), None)
    return r, first, to_95


def one_case(spec: str, a: argparse.Namespace, mode, work: Path) -> list[dict]:
    case = suite.case_compute(spec, "int8", mode)
    name, op, run_params, compute = case.name, case.op, case.params, case.compute
    rows = []
    for seed in range(a.seeds):
        arms = {}
        for prior in (True, False) if seed % 2 == 0 else (False, True):
            arms[prior] = tune_arm(compute, mode.target, a, seed, prior, work)
        (on, on_first, on_95), (off, off_first, off_95) = arms[True], arms[False]
        session = TuningSession(compute, mode.target, trials=1, records=work / "later.sqlite")
        try:
            later = session.measurer.finish_many(  # type: ignore[attr-defined]
                [on.assignment, off.assignment], a.later_repeat, rounds=a.later_rounds
            )
        finally:
            session.close()
        on_ms, off_ms = _ms(later[0].latency_s), _ms(later[1].latency_s)
        row = dict(
            case=name,
            op=op,
            shape_run=suite._params_text(run_params),
            target=on.target_key,
            explorer=a.explorer,
            baseline=(
                a.baseline_prior.source
                if a.baseline_prior
                else "the prior, then XGBoost alone"
                if a.model_alone
                else "no prior"
            ),
            trials=a.trials,
            batch=a.batch,
            seed=seed,
            on_first_ms=_ms(on_first),
            off_first_ms=_ms(off_first),
            on_final_ms=on_ms,
            off_final_ms=off_ms,
            speedup=off_ms / on_ms if on_ms and off_ms else None,
            first_round_speedup=off_first / on_first if on_first and off_first else None,
            on_trials_to_95=on_95,
            off_trials_to_95=off_95,
            threads=on.space.target.cores,
            **machine_stamp(),
        )
        rows.append(row)
        print(
            f"[{name} seed {seed}] first round {row['on_first_ms']:.4f} vs "
            f"{row['off_first_ms']:.4f} ms; final {on_ms:.4f} vs {off_ms:.4f} ms "
            f"(prior on vs off): {row['speedup']:.3f}x; "
            f"trials to 95% {on_95} vs {off_95}",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--explorer", default="cga")
    p.add_argument("--later-repeat", type=int, default=40, help="repeats of the side-by-side")
    p.add_argument("--later-rounds", type=int, default=8)
    p.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="FILE",
        help="the off arm ranks its first round by this prior (JSON weights) instead of none",
    )
    p.add_argument(
        "--model-alone",
        action="store_true",
        help="the off arm keeps the prior for its first round, then ranks by XGBoost alone "
        "(no prior as its base margin: the cost model before PriorMarginCostModel)",
    )
    a = p.parse_args(argv)
    if a.model_alone and a.baseline is not None:
        p.error("--model-alone and --baseline are two different off arms: pick one")
    a.baseline_prior = None
    if a.baseline is not None:
        try:
            a.baseline_prior = prior_fit.read_prior(a.baseline)
        except (OSError, ValueError) as err:
            p.error(f"--baseline: {err}")
    rows, path = suite.run_per_case(a, one_case, "prior_effect")
    if path is None:
        return 1
    mode = suite.resolve_mode("auto")
    final = [r["speedup"] for r in rows if r["speedup"]]
    first = [r["first_round_speedup"] for r in rows if r["first_round_speedup"]]
    print(f"\n{len(rows)} tunes per arm ({cpu_model()}, {mode.target}, {a.trials} trials):")
    off = f"the baseline prior ({a.baseline_prior.source})" if a.baseline_prior else "off"
    if a.model_alone:
        off = "the prior's first round, then XGBoost without the prior as its base margin"
    print(f"  off arm: {off}")
    print(f"  first round, prior on vs off: geomean {suite.geomean(first):.3f}x")
    print(
        f"  final kernel, prior on vs off: geomean {suite.geomean(final):.3f}x "
        f"(better on {sum(s > 1 for s in final)}, worse on {sum(s < 1 for s in final)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
