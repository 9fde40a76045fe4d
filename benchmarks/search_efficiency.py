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
* ``<out>/search_efficiency_summary.csv``: mean best GOP/s with a 95 % confidence interval per
  explorer, and CGA paired with every other explorer over the same seeds;
* ``<out>/search_efficiency.png``: median over seeds of best-so-far GOP/s against trials and
  against seconds, with the min-max band.

Usage (the committed results were made with the defaults, on an otherwise idle machine)::

    python benchmarks/search_efficiency.py                      # GEMM 1024^3 and BMM B1, 3 seeds
    python benchmarks/search_efficiency.py --ops gemm --seeds 1 --trials 32 --rand-trials 32
    python benchmarks/search_efficiency.py --simulate heronlike_runs/records.sqlite --ops gemm

**Surrogate simulation** (``--surrogate RECORDS``, for a CPU without AVX512-VNNI): the records of a
float32 GEMM (or, ``--sim-op c2d``, a conv2d) tuned with ``target="llvm"`` (a few hundred RandSAT
trials, recorded once with ``--record``) define a simulated space: the throughput of any valid
assignment is the inverse-distance-weighted mean of its ``--knn`` nearest recorded trials in
``log2`` knob space (exactly the recorded value at a recorded point). Replaying the records alone
(``--simulate``) would fail almost every proposal as ``not_recorded``: the 256^3 space holds ~10^5
valid points. Every explorer then runs the tune loop's protocol (propose a batch, "measure" it on
the surrogate, observe) for ``--seeds`` seeds; the script writes
``<out>/search_efficiency_sim-<op><shape>-t<trials>-<cpu>-<date>.csv`` (one row per explorer, seed
and budget point, with the CPU model and date), ``..._curves.csv`` (best-so-far after every batch:
trials, explorer seconds, GFLOP/s), ``.png`` (those curves, median over seeds with the min-max
band; with matplotlib) and ``..._summary.csv``: mean best GFLOP/s with a 95 % Student-t
confidence interval per explorer and budget, and the paired differences of CGA against each other
explorer over the same seeds (CGA - CGA-1, CGA@200 - RAND@600, ...). The surrogate's
leave-one-out rank correlation is printed and saved. The explorers are CGA, CGA-1, RAND, CRAND
(``random``), OpEvo, FlexTensor, SA and GA; Heron's Fig. 12 (CGA, CRAND, GA and SA at 1000
trials) is ``--explorers cga,random,sa,ga --trials 1000 --rand-trials 1000``.

    python benchmarks/search_efficiency.py --record 256 --shape 256,256,256      # ~3 min
    python benchmarks/search_efficiency.py --surrogate benchmarks/out/search_efficiency/\
        gemm256x256x256_f32_llvm_rand256.sqlite --shape 256,256,256 --seeds 10
    python benchmarks/search_efficiency.py --record 300 --sim-op c2d \
        --shape 1,56,56,64,64,1,1,1,0,1 --seeds 10              # Heron Fig. 12's C2D, float32

``--sim-target``/``--sim-dtype`` simulate another target's space on records measured elsewhere,
e.g. a TensorCore space whose candidates were timed on a GPU through offline bundles
(``--sim-target "cuda -tensorcore -arch=sm_90" --sim-dtype float16 --measured-on "NVIDIA H100"``).

RAND (``rand``: RandSAT only; ``random`` is RandSAT ranked ε-greedily by the cost model, Heron's
CRAND) gets ``--rand-trials`` (600), so that the check of Heron's claim, CGA's median best at 200
trials against RAND's at 600, comes from the same data. Rows of an earlier run in ``--out`` for
other (op, explorer) pairs are kept, so one explorer can be re-run alone
(``--explorers rand``); ``--fresh`` starts the CSV files anew; ``--summarize`` only rebuilds the
summary and the plot from the CSV files in ``--out``.
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
#: (B, M, N, K)), and the C2D of Heron's Fig. 12 (NHWC 1x56x56x64 -> 64, 1x1, stride 1)
CASES = {
    "gemm": (ops.gemm, (1024, 1024, 1024)),
    "bmm": (ops.bmm, (12, 512, 512, 64)),
    "c2d": (ops.c2d, (1, 56, 56, 64, 64, 1, 1, 1, 0, 1)),
}
#: the columns that name the machine and date of a measured row
MACHINE_COLUMNS = ("cpu_model", "cpu_signature", "date")
#: every explorer, in the order the benchmark runs them (measured and surrogate modes)
EXPLORERS = ("cga", "cga1", "rand", "random", "opevo", "flextensor", "sa", "ga")
#: explorers given ``--rand-trials`` instead of ``--trials`` (RAND gets 3x, Heron Fig. 12)
LONG_BUDGET = ("rand", "random")


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ops", default="gemm,bmm", help="comma separated: " + ", ".join(CASES))
    p.add_argument("--explorers", default=None, help="default: every explorer of the mode")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 per explorer")
    p.add_argument("--trials", type=int, default=200, help="trial budget of every explorer")
    p.add_argument("--rand-trials", type=int, default=600, help="trial budget of 'random'")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    p.add_argument("--work", type=Path, default=Path("benchmarks/out/search_efficiency"))
    p.add_argument("--simulate", type=Path, default=None, help="replay this records file")
    p.add_argument("--fresh", action="store_true", help="drop the rows of earlier runs")
    p.add_argument(
        "--summarize",
        action="store_true",
        help="only rebuild the summary CSV and the plot from the runs and curves CSVs in --out",
    )
    p.add_argument("--surrogate", type=Path, default=None, help="simulate on these records")
    p.add_argument("--record", type=int, default=0, help="record this many RandSAT trials")
    p.add_argument("--sim-op", default="gemm", help="float32 op of --record, --surrogate")
    p.add_argument(
        "--shape", default="256,256,256", help="M,N,K; B,M,N,K; or N,H,W,CI,CO,KH,KW,s,p,d"
    )
    p.add_argument("--knn", type=int, default=8, help="neighbours of the surrogate")
    p.add_argument(
        "--sim-target",
        default="llvm",
        help="target of the --surrogate space and records (e.g. 'cuda -tensorcore -arch=sm_90')",
    )
    p.add_argument("--sim-dtype", default="float32", help="heronlike.ops dtype of --sim-op")
    p.add_argument(
        "--measured-on",
        default=None,
        help="the device the --surrogate records were measured on (default: this CPU)",
    )
    p.add_argument(
        "--plot-curves",
        default=None,
        help="only plot these comma-separated *_curves.csv files of surrogate runs into one "
        "figure, one row per op, written to --out (a .png path)",
    )
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
    if a.plot_curves:
        rows: list[dict] = []
        for path in a.plot_curves.split(","):
            with open(path, newline="") as f:
                rows += list(csv.DictReader(f))
        if a.out.suffix != ".png":
            raise SystemExit("--plot-curves: --out must name the .png file to write")
        a.out.parent.mkdir(parents=True, exist_ok=True)
        _plot(rows, a.out, unit="GFLOP/s (surrogate)", seconds="explorer s")
        return 0
    if a.record or a.surrogate:
        return simulate_llvm(a)
    if a.summarize:
        runs = _merge(a.out / "search_efficiency_runs.csv", [], set(), False)
        curves = _merge(a.out / "search_efficiency_curves.csv", [], set(), False)
        if not runs:
            raise SystemExit(f"--summarize: no search_efficiency_runs.csv in {a.out}")
        return _report(a, runs, curves)
    a.explorers = a.explorers or ",".join(EXPLORERS)
    a.out.mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    from heronlike.host import machine_stamp

    stamp = time.strftime("%Y%m%d-%H%M%S")
    machine = machine_stamp()
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
                curves += _curve_rows(op, explorer, seed, r.curve, digits=2, **machine)
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
                    **machine,
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
    return _report(a, runs, curves)


def _report(a: argparse.Namespace, runs: list[dict], curves: list[dict]) -> int:
    """Print the medians, write ``search_efficiency_summary.csv`` (per op, named after the
    machine of that op's rows) and the plot, from measured ``runs`` and ``curves`` rows."""
    _summary(runs, a.trials, a.rand_trials)
    at, final = "best_gops_at_trials", "best_gops_final"
    summary = _paired_summary(runs, a.trials, a.rand_trials, at, final, "remeasured_gops")
    _write_csv(a.out / "search_efficiency_summary.csv", summary)
    try:
        _plot(curves, a.out / "search_efficiency.png")
    except ImportError:
        print("no matplotlib (the 'bench' extra): no plot")
    return 0


def _machine(rows: list[dict]) -> dict[str, str]:
    """The machine columns (:data:`MACHINE_COLUMNS`) of ``rows`` (one op's runs, which may come
    from an earlier run than this one); distinct values (dates) are joined with ``"; "``."""
    return {k: "; ".join(dict.fromkeys(str(r.get(k, "")) for r in rows)) for k in MACHINE_COLUMNS}


def _curve_rows(
    op: str, explorer: str, seed: int, curve: list, digits: int = 3, **machine: str
) -> list[dict]:
    """One CSV row per point of a best-so-far ``curve`` of ``(trials, seconds, best op/s)``:
    best in G(FL)OP/s rounded to ``digits``, ``""`` before the first valid trial; ``machine``
    columns (CPU model, device, date) are appended to every row."""
    return [
        dict(
            op=op,
            explorer=explorer,
            seed=seed,
            trials=n,
            elapsed_s=round(t, 3),
            best_gops=round(b / 1e9, digits) if b else "",
            **machine,
        )
        for n, t, b in curve
    ]


def _merge(path: Path, rows: list[dict], done: set, fresh: bool) -> list[dict]:
    """``rows`` after the rows of ``path`` whose (op, explorer) was not re-run now. Old rows of
    an op re-run now on another CPU (model or family/model/stepping) are dropped, with a
    message: explorers are compared only on one machine (``--out`` keeps both apart)."""
    if fresh or not path.exists():
        return rows
    cpu = MACHINE_COLUMNS[:2]  # the CPU's model and signature, not the date
    here = {r["op"]: tuple(r.get(k, "") for k in cpu) for r in rows}
    with path.open(newline="") as f:
        old = [r for r in csv.DictReader(f) if (r["op"], r["explorer"]) not in done]

    def moved(r: dict) -> bool:  # an op re-run now, this row from another CPU
        return r["op"] in here and tuple(r.get(k, "") for k in cpu) != here[r["op"]]

    for op in dict.fromkeys(r["op"] for r in old if moved(r)):
        n = sum(r["op"] == op and moved(r) for r in old)
        print(f"{path.name}: dropping {n} rows of {op} measured on another CPU than this run's")
    old = [r for r in old if not moved(r)]
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
            # the tune's pick re-measured against its finalists (not the luckiest timing)
            picked = [float(r["remeasured_gops"]) for r in rows if r.get("remeasured_gops")]
            if picked:
                line += f"  re-measured pick: {statistics.median(picked):8.1f}"
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


def _plot(curves: list[dict], path: Path, unit: str = "GOP/s", seconds: str = "seconds") -> None:
    """Best-so-far against trials (left) and against ``seconds`` (right), one row per op: the
    median over seeds with the min-max band (Heron Fig. 12's layout)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    op_names = list(dict.fromkeys(c["op"] for c in curves))
    names = list(dict.fromkeys([*EXPLORERS, *(c["explorer"] for c in curves)]))
    colors = {e: plt.get_cmap("tab10")(i % 10) for i, e in enumerate(names)}
    fig, axes = plt.subplots(len(op_names), 2, figsize=(10, 3.2 * len(op_names)), squeeze=False)
    for row, op in enumerate(op_names):
        for col, (xkey, xlabel) in enumerate((("trials", "trials"), ("elapsed_s", seconds))):
            ax = axes[row][col]
            for explorer in dict.fromkeys(c["explorer"] for c in curves if c["op"] == op):
                xs, med, lo, hi = _band(curves, op, explorer, xkey)
                color = colors[explorer]  # one colour per explorer in every panel
                ax.plot(xs, med, label=explorer, lw=1.4, color=color)
                ax.fill_between(xs, lo, hi, alpha=0.15, color=color)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"best {unit}")
            cpus = "; ".join(dict.fromkeys(c.get("cpu_model", "") for c in curves if c["op"] == op))
            ax.set_title(f"{op} ({cpus})" if cpus else op, fontsize=9)
            ax.grid(alpha=0.3)
            if col == 0:
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
    xmin = max(min(x for x, _ in pts) for pts in by_seed.values())  # every seed has a best
    xmax = min(max(x for x, _ in pts) for pts in by_seed.values())
    xs = np.linspace(xmin, xmax, 100)
    ys = []
    for pts in by_seed.values():
        px = np.array([x for x, _ in pts])
        py = np.array([y for _, y in pts])
        idx = np.searchsorted(px, xs, side="right") - 1
        ys.append(np.where(idx >= 0, py[np.clip(idx, 0, None)], np.nan))
    arr = np.array(ys)
    return xs, np.nanmedian(arr, 0), np.nanmin(arr, 0), np.nanmax(arr, 0)


# -- surrogate simulation on a float32 llvm GEMM or conv2d ---------------------------------------


def _sim_space(op: str, shape: str, target: str = "llvm", dtype: str = "float32"):
    """``(compute, space)`` of ``op`` (``gemm``: ``M,N,K``; ``bmm``: ``B,M,N,K``; ``c2d``:
    heronlike.ops ``c2d``'s arguments ``N,H,W,CI,CO,KH,KW,stride,pad,dilation``) in ``dtype``
    for ``target`` (``llvm`` float32 by default; ``cuda -tensorcore`` float16 for records
    measured on a GPU through bundles, ``benchmarks/tensorcore.py``)."""
    from heronlike.space import generate_space

    if op not in ("gemm", "bmm", "c2d"):
        raise SystemExit(f"--sim-op {op!r}: the surrogate runs 'gemm', 'bmm' or 'c2d'")
    args = tuple(int(v) for v in shape.split(","))
    compute = getattr(ops, op)(*args, dtype=dtype)
    return compute, generate_space(compute, target)


class Surrogate:
    """Throughput (op/s) of any assignment of ``space``: inverse-distance-weighted mean of the
    ``k`` recorded trials nearest in ``log2(knob + 1)`` space (the recorded value at a recorded
    point).

    Raises:
        ValueError: if the records hold no valid trial of this space (other rules: other knobs).
    """

    def __init__(self, records: Path, space, k: int) -> None:
        import numpy as np

        from heronlike.records import Records

        self.knobs = space.csp.knobs
        flop = space.logical.flop()
        with Records(records) as db:
            trials = db.trials(space.workload_key, space.target.key)
        rows = [t for t in trials if t.latency_s and all(kn in t.assignment for kn in self.knobs)]
        if not rows:
            raise ValueError(f"{records} holds no valid trial with the knobs {self.knobs}")
        self.x = np.log2(np.array([[t.assignment[kn] for kn in self.knobs] for t in rows]) + 1.0)
        self.y = np.array([flop / t.latency_s for t in rows])
        self.k = min(k, len(rows))
        self._np = np

    def __call__(self, assignment) -> float:
        np = self._np
        q = np.log2(np.array([assignment[kn] for kn in self.knobs], dtype=np.float64) + 1.0)
        d = np.sqrt(((self.x - q) ** 2).sum(axis=1))
        near = np.argsort(d, kind="stable")[: self.k]
        if d[near[0]] == 0:
            return float(self.y[near[0]])
        w = 1.0 / d[near] ** 2
        return float((w * self.y[near]).sum() / w.sum())

    def loo_spearman(self) -> float:
        """Leave-one-out rank correlation of the surrogate on the recorded trials."""
        np = self._np
        pred = []
        for i in range(len(self.y)):
            d = np.sqrt(((self.x - self.x[i]) ** 2).sum(axis=1))
            d[i] = np.inf
            near = np.argsort(d, kind="stable")[: self.k]
            w = 1.0 / np.maximum(d[near], 1e-9) ** 2
            pred.append((w * self.y[near]).sum() / w.sum())
        ra = np.argsort(np.argsort(pred))
        rb = np.argsort(np.argsort(self.y))
        return float(np.corrcoef(ra, rb)[0, 1])


def _simulated_tune(space, oracle, explorer: str, seed: int, trials: int, batch: int):
    """The tune loop's protocol on ``oracle``: best-so-far (op/s) after each batch, seconds,
    the explorer's stats, and the best assignment after each batch (to re-measure on hardware)."""
    from heronlike.explore import Observation, search_for

    sampler, ex = search_for(space, explorer, seed)
    measured: set = set()
    best, curve, best_x, bests = 0.0, [], None, []
    t0 = time.perf_counter()
    while len(measured) < trials:
        got = ex.propose(min(batch, trials - len(measured)), exclude=frozenset(measured))
        if not got:
            break
        obs = [Observation(x, oracle(x)) for x in got]
        measured |= {sampler.key(x) for x in got}
        for o in obs:
            if o.throughput > best:
                best, best_x = o.throughput, o.assignment
        ex.observe(obs)
        curve.append((len(measured), time.perf_counter() - t0, best))
        bests.append(dict(best_x))
    return curve, time.perf_counter() - t0, ex.stats(), bests


def _ci(values) -> tuple[float, float, float]:
    """Mean and 95 % Student-t confidence interval."""
    from scipy import stats as st

    n = len(values)
    m = statistics.fmean(values)
    if n < 2:
        return m, m, m
    h = st.t.ppf(0.975, n - 1) * statistics.stdev(values) / n**0.5
    return m, m - h, m + h


def simulate_llvm(a: argparse.Namespace) -> int:
    """``--record`` and/or ``--surrogate``: see the module docstring."""
    from heronlike.host import cpu_model

    compute, space = _sim_space(a.sim_op, a.shape, a.sim_target, a.sim_dtype)
    tag = a.sim_op + a.shape.replace(",", "x")
    if a.sim_target != "llvm":
        tag += "-" + a.sim_target.split()[0] + ("-tc" if "-tensorcore" in a.sim_target else "")
    if a.record and a.sim_target != "llvm":
        raise SystemExit("--record measures on this CPU (llvm); record a GPU space with bundles")
    if a.record:
        path = a.work / f"{tag}_f32_llvm_rand{a.record}.sqlite"
        a.work.mkdir(parents=True, exist_ok=True)
        r = heronlike.tune(
            compute, "llvm", trials=a.record, explorer="rand", seed=0, records=path, batch_size=32
        )
        print(f"recorded {r.trials_run} trials in {path}; best {r.throughput / 1e9:.2f} GFLOP/s")
        a.surrogate = a.surrogate or path
    if not a.surrogate:
        return 0
    sur = Surrogate(a.surrogate, space, a.knn)
    loo = sur.loo_spearman()
    print(
        f"surrogate: {len(sur.y)} recorded trials, {len(sur.knobs)} knobs, LOO Spearman {loo:.3f}"
    )
    date, cpu = time.strftime("%Y-%m-%d"), cpu_model()
    measured_on = a.measured_on or cpu
    budgets = {e: (a.rand_trials if e in LONG_BUDGET else a.trials) for e in EXPLORERS}
    wanted = a.explorers.split(",") if a.explorers else list(EXPLORERS)
    rows: list[dict] = []
    curves: list[dict] = []
    for explorer in wanted:
        for seed in range(a.seeds):
            curve, secs, st, bests = _simulated_tune(
                space, sur, explorer, seed, budgets[explorer], a.batch_size
            )
            at_i = max((i for i, (n, *_) in enumerate(curve) if n <= a.trials), default=0)
            curves += _curve_rows(
                tag, explorer, seed, curve, cpu_model=cpu, measured_on=measured_on, date=date
            )
            at = _best_at(curve, a.trials) or 0.0
            rows.append(
                dict(
                    op=tag,
                    explorer=explorer,
                    seed=seed,
                    trials=curve[-1][0],
                    best_gflops_at_trials=round(at / 1e9, 3),
                    best_gflops_final=round(curve[-1][2] / 1e9, 3),
                    explorer_s=round(secs, 2),
                    stats=json.dumps(st),
                    cpu_model=cpu,
                    measured_on=measured_on,
                    date=date,
                    best_assignment_at_trials=json.dumps(bests[at_i], sort_keys=True),
                    best_assignment_final=json.dumps(bests[-1], sort_keys=True),
                    source=f"kNN-{sur.k} surrogate of {len(sur.y)} trials in {a.surrogate.name}",
                )
            )
            print(
                f"{explorer:10s} seed {seed}: best@{a.trials} {at / 1e9:6.2f}  final "
                f"{curve[-1][2] / 1e9:6.2f} GFLOP/s after {curve[-1][0]} ({secs:.1f} s) {st}",
                flush=True,
            )
    slug = measured_on.lower().replace("nvidia ", "").replace(" ", "-")[:24]
    a.out.mkdir(parents=True, exist_ok=True)
    stem = f"search_efficiency_sim-{tag}-t{a.trials}-{slug}-{date}"
    _write_csv(a.out / f"{stem}.csv", rows)
    _write_csv(a.out / f"{stem}_curves.csv", curves)
    print(f"surrogate LOO Spearman {loo:.3f}")
    summary = _paired_summary(rows, a.trials, a.rand_trials, cpu_model=cpu, date=date)
    _write_csv(a.out / f"{stem}_summary.csv", summary)
    try:
        _plot(curves, a.out / f"{stem}.png", unit="GFLOP/s (surrogate)", seconds="explorer s")
    except ImportError:
        print("no matplotlib (the 'bench' extra): no plot")
    return 0


def _paired_summary(
    rows: list[dict],
    trials: int,
    rand_trials: int,
    at_col: str = "best_gflops_at_trials",
    final_col: str = "best_gflops_final",
    remeasured_col: str | None = None,
    **stamp: str,
) -> list[dict]:
    """Per op: mean best with 95 % CI per explorer (at ``trials`` and at the end), and the paired
    differences of CGA against every other explorer over the same seeds (CGA - CGA-1,
    CGA@trials - RAND@rand_trials, ...); ``stamp`` columns (CPU, date) end every row, or where
    none are given, the machine columns of that op's own rows (:func:`_machine`).

    ``remeasured_col`` (measured runs): the column of each run's final best re-timed after the
    tune (more repeats, one process), summarised and paired the same way under ``what`` names
    ending in ``remeasured``; tuning-time bests are maxima of noisy timings, so this is the
    comparison that holds on hardware."""
    out = []

    def add(
        op: str, machine: dict, what: str, vals: list, seeds: int, paired: bool = False
    ) -> None:
        m, lo, hi = _ci(vals)
        out.append(
            dict(
                op=op,
                what=what,
                mean=round(m, 3),
                ci_lo=round(lo, 3),
                ci_hi=round(hi, 3),
                seeds=seeds,
                **machine,
            )
        )
        sign = "+" if paired else ""
        print(f"  {what:36s}: {m:{sign}10.3f}  [{lo:{sign}10.3f}, {hi:{sign}10.3f}]")

    for op in dict.fromkeys(r["op"] for r in rows):
        ops_rows = [r for r in rows if r["op"] == op]
        by = {(r["explorer"], r["seed"]): r for r in ops_rows}
        explorers = list(dict.fromkeys(r["explorer"] for r in ops_rows))
        machine = stamp or _machine(ops_rows)
        final = {
            e: max(int(r["trials"]) for r in ops_rows if r["explorer"] == e) for e in explorers
        }
        print(f"\n{op}: mean best over seeds, 95 % CI; CGA - X paired over seeds")
        # (column, whether it holds the best at the run's end, suffix of the row's name)
        columns = [(at_col, False, ""), (final_col, True, "")]
        if remeasured_col:
            columns.append((remeasured_col, True, " remeasured"))
        for e in explorers:
            for col, at_end, suffix in columns:
                if col == final_col and final[e] == trials:
                    continue  # the same budget: already reported
                vals = [float(r[col] or 0) for r in ops_rows if r["explorer"] == e]
                add(op, machine, f"{e}@{final[e] if at_end else trials}{suffix}", vals, len(vals))
        # CGA against every other explorer over the same seeds at `trials`, and RAND and CRAND
        # also at `rand_trials` (Heron's CGA@200 - RAND@600; Fig. 12 runs all at one budget)
        pairs = [(e, at_col, at_col, trials, "") for e in explorers if e != "cga"]
        pairs += [
            (e, at_col, final_col, rand_trials, "")
            for e in explorers
            if e in LONG_BUDGET and rand_trials != trials
        ]
        if remeasured_col:
            pairs += [
                (e, remeasured_col, remeasured_col, final[e], " remeasured")
                for e in explorers
                if e != "cga"
            ]
        for e, c1, c2, budget, suffix in pairs:
            seeds = sorted({s for (x, s) in by if x == "cga"} & {s for (x, s) in by if x == e})
            if len(seeds) < 2:
                continue
            diff = [float(by[("cga", s)][c1] or 0) - float(by[(e, s)][c2] or 0) for s in seeds]
            what = f"cga@{trials} - {e}@{budget}{suffix}"
            add(op, machine, what, diff, len(seeds), paired=True)
    return out


if __name__ == "__main__":
    sys.exit(run())
