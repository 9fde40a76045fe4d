"""Confirm a simulated search comparison on hardware: re-measure the best programs it found.

``search_efficiency.py --surrogate`` ranks explorers on a nearest-neighbour surrogate of recorded
trials; each of its runs writes the best assignment it found (at ``--trials`` and at the end).
This script builds those bests into one offline bundle (``bundle``), to be run on the GPU the
records came from (``python BUNDLE/run_bundle.py BUNDLE``), then reads the measured latencies back
(``report``) and repeats the paired comparisons of the simulation with measured throughput:
the first of ``--explorers`` against each of the others over the same seeds (by default
CGA@trials − CGA-1@trials and CGA@trials − RAND@rand-trials; Heron Fig. 12's set is
``--explorers cga,random,sa,ga``), each with a 95 % Student-t confidence interval.

::

    python benchmarks/search_confirm.py bundle --sim-csv benchmarks/results/search_efficiency_sim-\
gemm1024x1024x1024-cuda-tc-t200-h100-80gb-hbm3-2026-11-23.csv --op gemm --shape 1024,1024,1024 \
        --target "cuda -tensorcore -arch=sm_90" --dtype float16 --out benchmarks/out/confirm_g1
    # on the GPU: python3 benchmarks/out/confirm_g1/run_bundle.py benchmarks/out/confirm_g1
    python benchmarks/search_confirm.py report --sim-csv ... --bundle benchmarks/out/confirm_g1

The bundle times every candidate with the same protocol (warm-up, median of repeats, L2 flushed)
in one run, so the comparison is within one process on one GPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

#: the explorers compared by default (Heron Fig. 13 and its CGA@200 vs RAND@600)
EXPLORERS = ("cga", "cga1", "rand")
#: explorers whose best is taken at the end of their (longer) budget, as in the simulation
LONG_BUDGET = ("rand", "random")


def read_picks(sim_csv: Path, explorers: tuple[str, ...] = EXPLORERS) -> dict[str, dict[str, Any]]:
    """Candidate id (``<explorer>-s<seed>``) -> ``{"label", "seed", "assignment", "sim_gflops"}``
    for every run of the simulation CSV whose explorer is in ``explorers``: its best at
    ``--trials``, or at the end for RAND and CRAND. Ordered seed by seed, so that the programs
    compared in a pair are timed next to each other.

    Raises:
        SystemExit: no run of those explorers has a best assignment in the CSV."""
    picks: dict[str, dict[str, Any]] = {}
    with sim_csv.open(newline="") as f:
        for row in csv.DictReader(f):
            explorer = row["explorer"]
            when = "final" if explorer in LONG_BUDGET else "at_trials"
            col = f"best_assignment_{when}"
            if explorer not in explorers or not row.get(col):
                continue
            picks[f"{explorer}-s{row['seed']}"] = {
                "label": explorer,
                "seed": int(row["seed"]),
                "assignment": json.loads(row[col]),
                "sim_gflops": float(row[f"best_gflops_{when}"]),
            }
    if not picks:
        raise SystemExit(f"{sim_csv}: no run of {', '.join(explorers)} with assignments")
    order = {e: i for i, e in enumerate(explorers)}
    return dict(sorted(picks.items(), key=lambda kv: (kv[1]["seed"], order[kv[1]["label"]])))


def compute_of(op: str, shape: str, dtype: str) -> Any:
    """``heronlike.ops.<op>(*shape, dtype=dtype)``."""
    from heronlike import ops

    return getattr(ops, op)(*(int(v) for v in shape.split(",")), dtype=dtype)


def cmd_bundle(a: argparse.Namespace) -> int:
    from heronlike.offline import bundle_assignments

    picks = read_picks(a.sim_csv, tuple(a.explorers.split(",")))
    compute = compute_of(a.op, a.shape, a.dtype)
    assignments = {cid: p["assignment"] for cid, p in picks.items()}
    path, failed = bundle_assignments(
        compute, a.target, a.out, assignments, repeat=a.repeat, warmup=a.warmup
    )
    for cid, msg in failed.items():
        print(f"{cid}: build failed: {msg[:200]}")
    if path is None:
        print("nothing built")
        return 1
    print(f"bundle {path}: {len(assignments) - len(failed)} of {len(assignments)} built")
    print(f"on the GPU: python3 {path}/run_bundle.py {path} --no-baselines")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from search_efficiency import _ci as ci95  # this script's folder is on sys.path

    explorers = tuple(a.explorers.split(","))
    picks = read_picks(a.sim_csv, explorers)
    bundle = json.loads((a.bundle / "bundle.json").read_text())
    results = json.loads((a.bundle / "results.json").read_text())
    if results.get("standin"):
        raise SystemExit(f"{a.bundle}: stand-in results (fake latencies)")
    flop = float(bundle["workloads"][0]["flop"])
    measured: dict[str, float] = {}
    for cid, res in results["candidates"].items():
        if res.get("latency_s") and not res.get("error_kind"):
            measured[cid] = flop / float(res["latency_s"]) / 1e9
    rows = []
    for cid, p in sorted(picks.items()):
        rows.append(
            {
                "id": cid,
                "explorer": p["label"],
                "seed": p["seed"],
                "sim_gflops": round(p["sim_gflops"], 3),
                "measured_gflops": round(measured[cid], 3) if cid in measured else "",
            }
        )
    print(f"{results.get('device')}, {results.get('date')}: measured GFLOP/s of each run's best")
    summary = []
    for label in dict.fromkeys(p["label"] for p in picks.values()):
        vals = [measured[c] for c, p in picks.items() if p["label"] == label and c in measured]
        if vals:
            m, lo, hi = ci95(vals)
            summary.append(dict(what=label, mean=m, ci_lo=lo, ci_hi=hi, seeds=len(vals)))
            print(f"  {label:10s} mean {m:9.1f} [{lo:9.1f}, {hi:9.1f}] over {len(vals)} seeds")
    for e1, e2 in ((explorers[0], e) for e in explorers[1:]):
        seeds = sorted(
            p["seed"]
            for c, p in picks.items()
            if p["label"] == e1 and c in measured and f"{e2}-s{p['seed']}" in measured
        )
        if len(seeds) < 2:
            continue
        diff = [measured[f"{e1}-s{s}"] - measured[f"{e2}-s{s}"] for s in seeds]
        m, lo, hi = ci95(diff)
        summary.append(dict(what=f"{e1} - {e2}", mean=m, ci_lo=lo, ci_hi=hi, seeds=len(seeds)))
        print(f"  {e1} - {e2}: {m:+.1f} [{lo:+.1f}, {hi:+.1f}] GFLOP/s (paired over seeds)")
    out = a.out or a.sim_csv.with_name(a.sim_csv.stem + "_hardware.csv")
    device, date = results.get("device"), results.get("date")
    with out.open("w", newline="") as f:
        fields = ["kind", "what", "seed", "sim_gflops", "measured_gflops", "mean", "ci_lo", "ci_hi",
                  "seeds", "device", "measured"]  # fmt: skip
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(dict(kind="run", what=r["explorer"], seed=r["seed"],
                            sim_gflops=r["sim_gflops"], measured_gflops=r["measured_gflops"],
                            device=device, measured=date))  # fmt: skip
        for s in summary:
            w.writerow(dict(kind="summary", what=s["what"], mean=round(s["mean"], 3),
                            ci_lo=round(s["ci_lo"], 3), ci_hi=round(s["ci_hi"], 3),
                            seeds=s["seeds"], device=device, measured=date))  # fmt: skip
    print(f"wrote {out}")
    return 0


HELP_EXPLORERS = "comma separated; the first is compared with each of the others"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bundle", help="build each simulated run's best into one bundle")
    b.add_argument("--sim-csv", type=Path, required=True)
    b.add_argument("--op", default="gemm")
    b.add_argument("--shape", required=True)
    b.add_argument("--target", default="cuda -tensorcore -arch=sm_90")
    b.add_argument("--dtype", default="float16")
    b.add_argument("--repeat", type=int, default=50)
    b.add_argument("--warmup", type=int, default=10)
    b.add_argument("--out", type=Path, required=True, help="the bundle folder to create")
    b.add_argument("--explorers", default=",".join(EXPLORERS), help=HELP_EXPLORERS)
    b.set_defaults(fn=cmd_bundle)
    r = sub.add_parser("report", help="paired comparisons of the measured bests")
    r.add_argument("--sim-csv", type=Path, required=True)
    r.add_argument("--bundle", type=Path, required=True)
    r.add_argument("--out", type=Path, default=None, help="default: <sim-csv>_hardware.csv")
    r.add_argument("--explorers", default=",".join(EXPLORERS), help=HELP_EXPLORERS)
    r.set_defaults(fn=cmd_report)
    a = p.parse_args(argv)
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())
