"""Interleaved timing rounds against back-to-back repeats: does a tune measure its trials right?

A tune times each trial once, in a worker process, between builds. On a virtual machine a kernel
runs up to 2x slower for 0.1 to 1 s after a process (a build) has freed much memory (Zen 5,
2026-11-28), so a trial timed in such a spell is ranked behind slower ones and can be lost to
the final pick. ``LocalRunner(interleave=True)`` (:class:`heronlike.measure.LocalRunner`) times a
batch in interleaved rounds, so that a spell shorter than the batch falls on one round of
several candidates rather than on every measurement of one.

For each case and seed this runs two tunes of the same budget and seed, one after the other
(which goes first alternates with the seed): ``rounds`` (``interleave=True``) and
``back_to_back`` (the default runner). Then every distinct trial of both
is rebuilt and timed by the fair table's harness (:func:`benchmarks.suite.time_tvm_kernels`:
fresh processes, outputs checked, the median of three rounds, the order rotated), the reference.
Per tune, one CSV row:

* ``trial_err_median``, ``trial_err_max``: ``|tuning-time / harness - 1|`` over its trials;
* ``slow_trials``: trials the tune timed ≥ 1.25x slower than the harness;
* ``picked_ms``: the harness latency of the kernel the tune returned (the suite's finish:
  its ``suite.FINALISTS`` fastest trials re-measured); ``best_ms``: the fastest harness
  latency among its trials; ``picked_vs_best`` their ratio (1.0: it returned its truly
  fastest trial);
* ``top<k>_vs_best`` (k = 1, 2, 4, 8): the same for the fastest by the harness of the k trials
  the tune timed fastest, what a finish with k finalists returns if its re-measure agrees with
  the harness (``heronlike.tune``'s default is 4).

Usage::

    python benchmarks/measure_rounds.py                      # C3D5,C3D1,G4,D3; seeds 0-3
    python benchmarks/measure_rounds.py --cases C3D5 --seeds 0
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import heronlike  # noqa: E402
from benchmarks import suite  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.measure import LocalRunner  # noqa: E402
from heronlike.records import Records  # noqa: E402
from heronlike.target import get_target  # noqa: E402

#: rows whose tuning-time and harness latencies disagreed in the 2026-11-28 table
DEFAULT_CASES = ("C3D5", "C3D1", "G4", "D3")
RUNNERS = {"rounds": True, "back_to_back": False}
SLOW = 1.25
#: finalist counts whose pick is simulated from the harness times (``top<k>_vs_best``)
TOP_K = (1, 2, 4, 8)


def tune_once(compute, target: str, a, seed: int, interleave: bool, work: Path):  # noqa: ANN001
    """One tune at the suite's trial timing; its result and its trials (records)."""
    work.mkdir(parents=True)
    cores = get_target(target).cores
    with LocalRunner(
        num_threads=cores,
        number=suite.TRIAL_NUMBER,
        repeat=suite.TRIAL_REPEAT,
        min_repeat_ms=suite.MIN_REPEAT_MS,
        interleave=interleave,
    ) as runner:
        r = heronlike.tune(
            compute,
            target,
            trials=a.trials,
            batch_size=a.batch,
            seed=seed,
            records=work / "records.sqlite",
            work_dir=work,
            finalists=suite.FINALISTS,
            final_repeat=suite.FINAL_REPEAT,
            runner=runner,
        )
    with Records(work / "records.sqlite") as rec:
        trials = rec.trials(r.workload_key, r.target_key)
    return r, [t for t in trials if t.ok]


def harness_ms(space, assignments: dict[tuple, dict], work: Path) -> dict[tuple, float]:  # noqa: ANN001
    """Harness milliseconds of each distinct assignment (key -> ms), all timed side by side
    (:func:`benchmarks.suite.time_programs`, the suite's rounds).

    Raises:
        RuntimeError: a program failed or differs from the reference.
    """
    names = {key: f"k{n}" for n, key in enumerate(assignments)}
    programs = {names[key]: space.program(a) for key, a in assignments.items()}
    seconds = suite.time_programs(programs, space, suite.HARNESS_ROUNDS, work)
    return {key: seconds[name] * 1e3 for key, name in names.items()}


def top_k(trials, truth: dict[tuple, float], k: int) -> float:  # noqa: ANN001
    """The harness milliseconds of the fastest (by the harness) of the ``k`` trials a tune
    timed fastest: what a finish re-measuring ``k`` finalists would return if its re-measure
    agreed with the harness."""
    ranked = sorted(trials, key=lambda t: t.latency_s)[:k]
    return min(truth[k_of(t.assignment)] for t in ranked)


def k_of(assignment: dict) -> tuple:
    """An assignment's identity."""
    return tuple(sorted(assignment.items()))


def one_case(spec: str, a, mode, work: Path) -> list[dict]:  # noqa: ANN001
    case = suite.case_compute(spec, "int8", mode)
    name, op, run_params, compute = case.name, case.op, case.params, case.compute
    rows = []
    for seed in (int(s) for s in a.seeds.split(",")):
        order = list(RUNNERS) if seed % 2 == 0 else list(reversed(RUNNERS))
        tunes = {
            who: tune_once(compute, mode.target, a, seed, RUNNERS[who], work / f"{who}-{seed}")
            for who in order
        }
        space = next(iter(tunes.values()))[0].space
        distinct: dict[tuple, dict] = {}
        for r, trials in tunes.values():
            for t in [*trials, r]:
                distinct.setdefault(k_of(t.assignment), dict(t.assignment))
        (work / f"harness-{seed}").mkdir()
        truth = harness_ms(space, distinct, work / f"harness-{seed}")
        for who in order:
            r, trials = tunes[who]
            ratios = [t.latency_s * 1e3 / truth[k_of(t.assignment)] for t in trials]
            errors = [abs(x - 1.0) for x in ratios]
            picked = truth[k_of(r.assignment)]
            best = min(truth[k_of(t.assignment)] for t in trials)
            row = dict(
                case=name,
                op=op,
                shape_run=suite._params_text(run_params),
                runner=who,
                first=order[0],
                seed=seed,
                trials=a.trials,
                batch=a.batch,
                ok_trials=len(trials),
                trial_err_median=statistics.median(errors),
                trial_err_max=max(errors),
                slow_trials=sum(x >= SLOW for x in ratios),
                tuning_best_ms=r.latency_s * 1e3,
                picked_ms=picked,
                best_ms=best,
                picked_vs_best=picked / best,
                **{f"top{k}_vs_best": top_k(trials, truth, k) / best for k in TOP_K},
                threads=space.target.cores,
                **machine_stamp(),
            )
            print(
                f"[{name} seed {seed}] {who:12s}: trial error median {row['trial_err_median']:.1%}"
                f" max {row['trial_err_max']:.1%}, {row['slow_trials']} slow; picked "
                f"{picked:.4f} ms, best {best:.4f} ms ({row['picked_vs_best']:.3f}x)",
                flush=True,
            )
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--seeds", default="0,1,2,3", help="comma-separated tune seeds")
    a = p.parse_args(argv)
    suite.run_per_case(a, one_case, "measure_rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
