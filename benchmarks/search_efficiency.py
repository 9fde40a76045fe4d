"""Search efficiency of the explorers: best-so-far throughput against trials and wall time.

Heron (ASPLOS'23, Fig. 12/13) compares its constraint-based GA (CGA) with RAND, SA, GA and CGA
with random key variables (CGA-1); OpEvo (Gao et al., AAAI'21) is our alternate explorer. This
script tunes each operator with each explorer for real on DL Boost (or replays a records file
with ``--simulate``), several seeds each, and writes:

* ``<out>/search_efficiency_curves.csv``: one row per measured batch: op, explorer, seed,
  trials, elapsed seconds, best GOP/s so far;
* ``<out>/search_efficiency_runs.csv``: one row per tune: trials, valid and invalid counts, best
  GOP/s at ``--trials`` and at the end, seconds by phase (explore = explorer + cost model, solve =
  CP-SAT, build, run), the explorer's share of the loop's wall time, and the explorer's counters
  (OpEvo's invalid walks, the GA's invalid children ...);
* ``<out>/search_efficiency.png``: median over seeds of best-so-far GOP/s against trials and
  against seconds, with the min-max band.

Usage (the committed results were made with the defaults, on an otherwise idle machine)::

    python benchmarks/search_efficiency.py                      # GEMM 1024^3 and BMM B1, 3 seeds
    python benchmarks/search_efficiency.py --ops gemm --seeds 1 --trials 32 --rand-trials 32
    python benchmarks/search_efficiency.py --simulate heronlike_runs/records.sqlite --ops gemm

RAND (``rand``: RandSAT only; ``random`` is RandSAT ranked ε-greedily by the cost model, Heron's
CRAND) gets ``--rand-trials`` (600), so that the check of Heron's claim, CGA's median best at 200
trials against RAND's at 600, comes from the same data. Rows of an earlier run in ``--out`` for
other (op, explorer) pairs are kept, so one explorer can be re-run alone
(``--explorers rand``); ``--fresh`` starts the CSV files anew.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path

import heronlike
from heronlike import ops

#: op name -> (compute builder, arguments): int8 GEMM G1 and BMM B1 of Heron's DL Boost table
#: (heron_repo.md §7.2; BMM B1 is (B, M, K, N) = 12, 512, 64, 512 there, our argument order is
#: (B, M, N, K))
CASES = {
    "gemm": (ops.gemm, (1024, 1024, 1024)),
    "bmm": (ops.bmm, (12, 512, 512, 64)),
}
EXPLORERS = ("cga", "cga1", "rand", "sa", "ga", "opevo")
#: explorers given ``--rand-trials`` instead of ``--trials``
LONG_BUDGET = ("rand", "random")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ops", default="gemm,bmm", help="comma separated: " + ", ".join(CASES))
    p.add_argument("--explorers", default=",".join(EXPLORERS))
    p.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 per explorer")
    p.add_argument("--trials", type=int, default=200, help="trial budget of every explorer")
    p.add_argument("--rand-trials", type=int, default=600, help="trial budget of 'random'")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    p.add_argument("--work", type=Path, default=Path("benchmarks/out/search_efficiency"))
    p.add_argument("--simulate", type=Path, default=None, help="replay this records file")
    p.add_argument("--fresh", action="store_true", help="drop the rows of earlier runs")
    return p.parse_args(argv)


def _best_at(curve: list[tuple[int, float, float | None]], trials: int) -> float | None:
    best = None
    for n, _, b in curve:
        if n <= trials and b is not None:
            best = b
    return best


def run(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit status."""
    a = _args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    curves: list[dict] = []
    runs: list[dict] = []
    for op in a.ops.split(","):
        builder, shape = CASES[op]
        for explorer in a.explorers.split(","):
            budget = a.rand_trials if explorer in LONG_BUDGET else a.trials
            for seed in range(a.seeds):
                records = a.work / f"{stamp}-{op}-{explorer}-{seed}.sqlite"
                t0 = time.perf_counter()
                r = heronlike.tune(
                    builder(*shape, dtype="int8"),
                    "dlboost",
                    trials=budget,
                    explorer=explorer,
                    seed=seed,
                    batch_size=a.batch_size,
                    records=records,
                    simulate=a.simulate,
                )
                wall = time.perf_counter() - t0
                for n, elapsed, best in r.curve:
                    curves.append(
                        dict(
                            op=op,
                            explorer=explorer,
                            seed=seed,
                            trials=n,
                            elapsed_s=round(elapsed, 3),
                            best_gops=round(best / 1e9, 2) if best else "",
                        )
                    )
                t = r.time_s
                loop = t.get("elapsed") or wall
                best_at = _best_at(r.curve, a.trials)
                row = dict(
                    op=op,
                    explorer=explorer,
                    seed=seed,
                    trials=r.trials_run,
                    valid=r.valid,
                    invalid=r.invalid,
                    best_gops_at_trials=round(best_at / 1e9, 2) if best_at else "",
                    best_gops_final=round(r.curve[-1][2] / 1e9, 2) if r.curve[-1][2] else "",
                    remeasured_gops=round(r.throughput / 1e9, 2) if r.throughput else "",
                    loop_s=round(loop, 2),
                    explore_s=round(t.get("explore", 0.0), 2),
                    solve_s=round(t.get("solve", 0.0), 2),
                    build_s=round(t.get("build", 0.0), 2),
                    run_s=round(t.get("run", 0.0), 2),
                    explorer_share=round((t.get("explore", 0) + t.get("solve", 0)) / loop, 4),
                    stats=json.dumps(r.explorer_stats),
                )
                runs.append(row)
                print(
                    f"{op:5s} {explorer:7s} seed {seed}: {r.trials_run} trials, best "
                    f"{row['best_gops_final']} GOP/s (at {a.trials}: {row['best_gops_at_trials']}),"
                    f" explorer {row['explorer_share']:.1%} of {loop:.0f} s {r.explorer_stats}",
                    flush=True,
                )
    done = {(r["op"], r["explorer"]) for r in runs}
    curves = _merge(a.out / "search_efficiency_curves.csv", curves, done, a.fresh)
    runs = _merge(a.out / "search_efficiency_runs.csv", runs, done, a.fresh)
    _write_csv(a.out / "search_efficiency_curves.csv", curves)
    _write_csv(a.out / "search_efficiency_runs.csv", runs)
    _summary(runs, a.trials, a.rand_trials)
    _plot(curves, a.out / "search_efficiency.png")
    return 0


def _merge(path: Path, rows: list[dict], done: set, fresh: bool) -> list[dict]:
    """``rows`` after the rows of ``path`` whose (op, explorer) was not re-run now."""
    if fresh or not path.exists():
        return rows
    with path.open(newline="") as f:
        old = [r for r in csv.DictReader(f) if (r["op"], r["explorer"]) not in done]
    for r in old:
        for key in ("seed", "trials"):
            r[key] = int(r[key])
        for key in ("elapsed_s", "explorer_share", "loop_s"):
            if key in r:
                r[key] = float(r[key])
    return old + rows


def _write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path}")


def _summary(runs: list[dict], trials: int, rand_trials: int) -> None:
    """Median over seeds, per op and explorer; Heron's claim; explorer overhead; OpEvo."""
    print(f"\nmedian over seeds (GOP/s); rand and random ran {rand_trials} trials")
    for op in dict.fromkeys(r["op"] for r in runs):
        for explorer in dict.fromkeys(r["explorer"] for r in runs if r["op"] == op):
            rows = [r for r in runs if r["op"] == op and r["explorer"] == explorer]
            at = [float(r["best_gops_at_trials"] or 0) for r in rows]
            final = [float(r["best_gops_final"] or 0) for r in rows]
            share = statistics.median(r["explorer_share"] for r in rows)
            line = (
                f"{op:5s} {explorer:7s} @{trials}: {statistics.median(at):8.1f}  "
                f"final: {statistics.median(final):8.1f}  explorer share {share:.1%}"
            )
            if explorer == "opevo":
                walks = sum(json.loads(r["stats"]).get("walks", 0) for r in rows)
                bad = sum(json.loads(r["stats"]).get("invalid_walks", 0) for r in rows)
                line += f"  invalid walks {bad}/{walks} = {bad / max(1, walks):.1%}"
            if explorer == "ga":
                kids = sum(json.loads(r["stats"]).get("children", 0) for r in rows)
                bad = sum(json.loads(r["stats"]).get("invalid_children", 0) for r in rows)
                line += f"  invalid children {bad}/{kids} = {bad / max(1, kids):.1%}"
            print(line)
        cga = [
            float(r["best_gops_at_trials"] or 0)
            for r in runs
            if r["op"] == op and r["explorer"] == "cga"
        ]
        rand = [
            float(r["best_gops_final"] or 0)
            for r in runs
            if r["op"] == op and r["explorer"] == "rand"
        ]
        if cga and rand:
            c, r = statistics.median(cga), statistics.median(rand)
            print(
                f"{op}: Heron's claim, CGA median best at {trials} trials / RAND's at "
                f"{rand_trials}: {c:.1f} / {r:.1f} = {c / r:.3f}"
            )


def _plot(curves: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    op_names = list(dict.fromkeys(c["op"] for c in curves))
    fig, axes = plt.subplots(len(op_names), 2, figsize=(10, 3.2 * len(op_names)), squeeze=False)
    for row, op in enumerate(op_names):
        for col, (xkey, xlabel) in enumerate((("trials", "trials"), ("elapsed_s", "seconds"))):
            ax = axes[row][col]
            for explorer in dict.fromkeys(c["explorer"] for c in curves if c["op"] == op):
                xs, med, lo, hi = _band(curves, op, explorer, xkey)
                ax.plot(xs, med, label=explorer, lw=1.4)
                ax.fill_between(xs, lo, hi, alpha=0.15)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"{op}: best GOP/s")
            ax.grid(alpha=0.3)
            if row == 0 and col == 0:
                ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=72)
    print(f"wrote {path}")


def _band(curves: list[dict], op: str, explorer: str, xkey: str):
    """Median, min and max over seeds of best-so-far at common x points (step interpolation)."""
    import numpy as np

    by_seed: dict[int, list[tuple[float, float]]] = {}
    for c in curves:
        if c["op"] == op and c["explorer"] == explorer and c["best_gops"] != "":
            by_seed.setdefault(c["seed"], []).append((float(c[xkey]), float(c["best_gops"])))
    xmax = min(max(x for x, _ in pts) for pts in by_seed.values())
    xs = np.linspace(0, xmax, 100)
    ys = []
    for pts in by_seed.values():
        px = np.array([x for x, _ in pts])
        py = np.array([y for _, y in pts])
        idx = np.searchsorted(px, xs, side="right") - 1
        ys.append(np.where(idx >= 0, py[np.clip(idx, 0, None)], np.nan))
    arr = np.array(ys)
    return xs, np.nanmedian(arr, 0), np.nanmin(arr, 0), np.nanmax(arr, 0)


if __name__ == "__main__":
    sys.exit(run())
