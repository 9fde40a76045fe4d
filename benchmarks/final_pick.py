"""How far a tune's reported best is from a later re-measure of it, before and after the final
pick by re-measure (issue 25).

Before, a tune returned its fastest *tuning-time* timing: the maximum of a few hundred noisy
measurements, which a later re-measure of the same kernel does not reproduce. Now the finish
re-measures the ``--finalists`` fastest distinct candidates side by side (interleaved rounds) and
returns the fastest re-measured one (``heronlike.tune(..., finalists=k)``).

For each seed, on one records file (the same candidates for both picks):

1. ``tune(trials=T, finalists=1)``: the tuning-time best and its finish re-measure (before);
2. ``tune(trials=T, finalists=k)`` on the same records (nothing new is measured): the pick by
   re-measure (after);
3. a *later* re-measure of both picks, in one process, interleaved rounds with many repeats
   (the same runner and settings as the finish).

The gap of a figure is ``reported / later - 1`` in throughput (positive: the report flatters).
Writes ``<out>/final_pick-<op><shape>-<cpu>-<date>.csv`` (one row per seed) and prints the
medians.

    python benchmarks/final_pick.py                              # GEMM 1024^3 fp32, 4 seeds
    python benchmarks/final_pick.py --shape 256,256,256 --trials 16 --seeds 2   # a quick look
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import heronlike  # noqa: E402
from benchmarks.csv_rows import write_rows  # noqa: E402
from heronlike.host import cpu_model, machine_slug  # noqa: E402
from heronlike.session import TuningSession  # noqa: E402


def _gops(flop: float, latency: float | None) -> float | None:
    return flop / latency / 1e9 if latency else None


def remeasure_later(
    compute: object,
    a: argparse.Namespace,
    records: Path,
    assignments: list[dict[str, int]],
    repeat: int,
    rounds: int,
) -> list:
    """A later re-measure of ``assignments`` of ``compute`` on ``a.target`` (the finish's
    runner and settings: ``FinalMeasurement``s), in one process, ``rounds`` interleaved rounds
    of ``repeat`` measurements."""
    session = TuningSession(compute, a.target, trials=a.trials, records=records)
    try:
        return session.measurer.finish_many(  # type: ignore[attr-defined]
            assignments, repeat, rounds=rounds
        )
    finally:
        session.close()


def tune_options(
    p: argparse.ArgumentParser, *, target: str, trials: int, finalists: int
) -> argparse.ArgumentParser:
    """Add the options of a benchmark that tunes per seed and re-measures later (this one,
    ``pick_rule.py``): ``--target``, ``--explorer``, ``--trials``, ``--batch-size``,
    ``--finalists``, ``--seeds``, ``--later-repeat``, ``--later-rounds``, ``--out``; returns
    ``p``."""
    p.add_argument("--target", default=target, help="e.g. llvm, dlboost (VNNI), 'dlboost -general'")
    p.add_argument("--explorer", default="cga")
    p.add_argument("--trials", type=int, default=trials)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--finalists", type=int, default=finalists)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--later-repeat", type=int, default=40, help="repeats of the later re-measure")
    p.add_argument("--later-rounds", type=int, default=8)
    p.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "out")
    return p


def one_seed(a: argparse.Namespace, seed: int, work: Path) -> dict:
    """Tune once, pick both ways, re-measure both picks later; one CSV row."""
    shape = tuple(int(x) for x in a.shape.split(","))
    compute = getattr(heronlike.ops, a.op)(*shape, dtype=a.dtype)
    records = work / f"seed{seed}.sqlite"
    common = dict(trials=a.trials, explorer=a.explorer, seed=seed, records=records)
    before = heronlike.tune(compute, a.target, finalists=1, batch_size=a.batch_size, **common)
    after = heronlike.tune(compute, a.target, finalists=a.finalists, **common)
    assert after.trials_run == 0, "the second tune must only re-pick"
    later = remeasure_later(
        compute, a, records, [before.assignment, after.assignment], a.later_repeat, a.later_rounds
    )
    flop = before.flop
    row = dict(
        op=a.op,
        shape=a.shape,
        dtype=a.dtype,
        target=before.target_key,
        explorer=a.explorer,
        trials=a.trials,
        finalists=a.finalists,
        seed=seed,
        tuning_best_gops=_gops(flop, before.tuning_latency_s),
        before_reported_gops=_gops(flop, before.latency_s),
        before_later_gops=_gops(flop, later[0].latency_s),
        after_tuning_gops=_gops(flop, after.tuning_latency_s),
        after_reported_gops=_gops(flop, after.latency_s),
        after_later_gops=_gops(flop, later[1].latency_s),
        same_pick=before.assignment == after.assignment,
        cpu=cpu_model(),
        date=dt.date.today().isoformat(),
    )
    for k in ("tuning_best", "before_reported", "after_reported"):
        base = row["after_later_gops"] if k.startswith("after") else row["before_later_gops"]
        row[f"{k}_gap"] = row[f"{k}_gops"] / base - 1 if row[f"{k}_gops"] and base else None
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="gemm")
    p.add_argument("--shape", default="1024,1024,1024")
    p.add_argument("--dtype", default="float32")
    tune_options(p, target="llvm", trials=64, finalists=8)
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(a.seeds):
            row = one_seed(a, seed, Path(tmp))
            rows.append(row)
            print(
                f"seed {seed}: tuning best {row['tuning_best_gops']:.1f} GOP/s; before: reported "
                f"{row['before_reported_gops']:.1f}, later {row['before_later_gops']:.1f}; after "
                f"(k={a.finalists}): reported {row['after_reported_gops']:.1f}, later "
                f"{row['after_later_gops']:.1f}; same pick: {row['same_pick']}",
                flush=True,
            )
    cpu = machine_slug()
    name = f"final_pick-{a.op}{a.shape.replace(',', 'x')}-{cpu}-{dt.date.today()}.csv"
    write_rows(a.out / name, rows)
    med = {
        k: statistics.median(r[k] for r in rows if r[k] is not None)
        for k in rows[0]
        if k.endswith("_gap") or k.endswith("_gops")
    }
    print(f"\nmedian over {len(rows)} seeds ({cpu_model()}, {a.target}, {a.trials} trials):")
    print(f"  tuning-time best vs later re-measure of it:   {med['tuning_best_gap']:+.1%}")
    print(f"  before (finish re-measures 1) vs later:       {med['before_reported_gap']:+.1%}")
    print(
        f"  after (best of {a.finalists} re-measured) vs later:  {med['after_reported_gap']:+.1%}"
    )
    print(
        f"  later re-measure of the pick, after / before: "
        f"{statistics.median(r['after_later_gops'] / r['before_later_gops'] for r in rows):.3f}"
    )
    print(f"wrote {a.out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
