"""DL Boost int8 GEMM: heronlike against torch._int_mm and numpy, in one run on this machine.

Shapes are Heron's DL Boost GEMM table (ASPLOS'23 artifact, tests/figure8; notes §7.2), given as
(M, K, N) there and passed here as ``ops.gemm(M, N, K)``. For each shape: tune with the given
trial budget, re-measure the best kernel, time the baselines under the same thread count, and
write one CSV row (latency medians in seconds, GOP/s, ratios, valid rate, tuning wall time).

    python benchmarks/dlboost_gemm.py --cases G1 --trials 64
    python benchmarks/dlboost_gemm.py --cases G1,G3,G5 --trials 200 --out benchmarks/out/gemm.csv
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import heronlike
from heronlike import ops
from heronlike.baselines import numpy_matmul, torch_int_mm

# name -> (M, K, N), Heron's argument order
HERON_GEMM = {
    "G1": (1024, 1024, 1024),
    "G2": (4096, 4096, 4096),
    "G3": (32, 2048, 1008),
    "G4": (32, 4096, 4096),
    "G5": (32, 4096, 1008),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="G1", help="comma-separated names of HERON_GEMM")
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--records", default="benchmarks/out/records.sqlite")
    parser.add_argument("--out", default="benchmarks/out/dlboost_gemm.csv")
    args = parser.parse_args()
    rows = []
    for case in args.cases.split(","):
        M, K, N = HERON_GEMM[case]
        t0 = time.perf_counter()
        r = heronlike.tune(
            ops.gemm(M, N, K), "dlboost", trials=args.trials, seed=args.seed, records=args.records
        )
        wall = time.perf_counter() - t0
        cores = r.space.target.cores
        torch_s, torch_note = torch_int_mm(M, N, K, threads=cores)
        numpy_s, numpy_note = numpy_matmul(M, N, K, threads=cores)
        row = {
            "case": case,
            "M": M,
            "N": N,
            "K": K,
            "trials": r.trials_run,
            "valid": r.valid,
            "invalid": r.invalid,
            "tune_wall_s": round(wall, 1),
            "heronlike_s": r.latency_s,
            "heronlike_gops": r.throughput / 1e9,
            "correct": r.correct,
            "torch_int_mm_s": torch_s,
            "numpy_f32_s": numpy_s,
            "speedup_vs_torch": torch_s / r.latency_s if torch_s else None,
            "speedup_vs_numpy": numpy_s / r.latency_s if numpy_s else None,
            "explore_share": (r.time_s["explore"] + r.time_s["solve"]) / r.time_s["total"],
        }
        rows.append(row)
        print(row, torch_note, numpy_note, flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
