"""Which rule picks the fastest finalist: the fastest of the first half of the finish's rounds
(heronlike's, since 2026-12-03) or their median (before).

The finish re-measures the ``k`` fastest candidates of a tune side by side in interleaved
rounds, picks one on the first half of the rounds and reports the median of the other half
(``heronlike.session``). With 4 rounds, the median of the first two is their mean, so one round
slowed by the machine (a cloud VM's slow spells last up to seconds) can lose the pick for the
fastest kernel. This benchmark scores both rules on the same measurements:

1. ``tune(trials=T, finalists=k)`` of a case (``--cases``, the names of ``suite.py``: Heron's
   DL Boost shapes), one tune per seed;
2. a *later* re-measure of all ``k`` finalists in one process, interleaved rounds with many
   repeats (the finish's runner and settings): each finalist's reference latency;
3. each rule applied to the tune's own rounds (``Finalist.rounds_s``): the reference latency
   of its pick over the fastest finalist's (``regret``: 0 = the rule picked the fastest).

Writes ``<out>/pick_rule-<cpu>-<date>.csv`` (one row per case and seed) and prints the mean
regret of each rule and how often it picked the later-fastest finalist.

    python benchmarks/pick_rule.py                                # T4, C2D2, G1; 4 seeds each
    python benchmarks/pick_rule.py --cases G1 --seeds 2 --trials 16   # a quick look
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import heronlike  # noqa: E402
from benchmarks.csv_rows import write_rows  # noqa: E402
from benchmarks.final_pick import remeasure_later, tune_options  # noqa: E402
from benchmarks.suite import parse_case  # noqa: E402
from heronlike.host import cpu_model, cpu_signature, machine_slug  # noqa: E402
from heronlike.measure.measurer import FinalMeasurement  # noqa: E402
from heronlike.session import _selection_latency  # noqa: E402


def median_of_first_half(rounds_s: Sequence[float]) -> float:
    """The rule before 2026-12-03: the median of the first half of the rounds (seconds)."""
    return statistics.median(rounds_s[: len(rounds_s) // 2])


def finish_rule(rounds_s: Sequence[float]) -> float:
    """heronlike's rule: the finish's own :func:`heronlike.session._selection_latency`."""
    return _selection_latency(FinalMeasurement(None, None, None, None, tuple(rounds_s)))


#: rule name -> what a finalist's rounds are scored by (the lowest score is picked)
RULES: dict[str, Callable[[Sequence[float]], float]] = {
    "min_first_half": finish_rule,
    "median_first_half": median_of_first_half,
}


def picks(rounds: Sequence[Sequence[float]]) -> dict[str, int]:
    """The index of the finalist each rule of :data:`RULES` picks from the finalists' rounds
    (ties to the earlier finalist, as the finish breaks them)."""
    return {
        name: min(range(len(rounds)), key=lambda i: (rule(rounds[i]), i))
        for name, rule in RULES.items()
    }


def one_tune(a: argparse.Namespace, case: str, seed: int, work: Path) -> dict:
    """Tune once, re-measure every finalist later, score both rules; one CSV row."""
    name, op, params, _ = parse_case(case)
    compute = getattr(heronlike.ops, op)(**params, dtype="int8")
    records = work / f"{name}-seed{seed}.sqlite"
    r = heronlike.tune(
        compute,
        a.target,
        trials=a.trials,
        batch_size=a.batch_size,
        explorer=a.explorer,
        seed=seed,
        records=records,
        finalists=a.finalists,
    )
    timed = [f for f in r.finalists if f.latency_s is not None and len(f.rounds_s) >= 2]
    later = remeasure_later(
        compute, a, records, [f.assignment for f in timed], a.later_repeat, a.later_rounds
    )
    ref = [m.latency_s for m in later]
    fastest = min(ref)
    chosen = picks([f.rounds_s for f in timed])
    row = dict(
        case=name,
        op=op,
        params=" ".join(f"{k}={v}" for k, v in params.items()),
        target=r.target_key,
        trials=a.trials,
        finalists=len(timed),
        seed=seed,
        later_ms=";".join(f"{t * 1e3:.5g}" for t in ref),
        tune_rounds_ms="|".join(";".join(f"{t * 1e3:.5g}" for t in f.rounds_s) for f in timed),
    )
    for rule, i in chosen.items():
        row[f"{rule}_pick"] = i
        row[f"{rule}_regret"] = ref[i] / fastest - 1
    row.update(
        cpu_model=cpu_model(), cpu_signature=cpu_signature(), date=dt.date.today().isoformat()
    )
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="T4,C2D2,G1")
    tune_options(p, target="dlboost", trials=32, finalists=4)
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in a.cases.split(","):
            for seed in range(a.seeds):
                row = one_tune(a, case, seed, Path(tmp))
                rows.append(row)
                print(
                    f"{row['case']} seed {seed}: later ms {row['later_ms']}; picks "
                    + ", ".join(
                        f"{rule} {row[f'{rule}_pick']} (+{row[f'{rule}_regret']:.1%})"
                        for rule in RULES
                    ),
                    flush=True,
                )
    name = f"pick_rule-{machine_slug()}-{dt.date.today()}.csv"
    write_rows(a.out / name, rows)
    print(f"\n{len(rows)} tunes ({cpu_model()}, {a.target}, {a.trials} trials, k={a.finalists}):")
    for rule in RULES:
        regrets = [r[f"{rule}_regret"] for r in rows]
        hits = sum(x == 0 for x in regrets)
        print(
            f"  {rule:18s} mean regret {statistics.mean(regrets):+.2%}, worst "
            f"{max(regrets):+.2%}, picked the later-fastest {hits}/{len(rows)}"
        )
    print(f"wrote {a.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
