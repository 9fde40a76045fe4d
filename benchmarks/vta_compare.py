"""heronlike vs the AutoTVM-style VTA template space, in simulated VTA cycles.

Cases: the GEMM, BMM and C2D operators of Heron's DL Boost figure (heron_repo.md §7.2) that a
batch-1 VTA program holds (C2D all batch 1; BMM batched over B, one GEMM per batch). GEMM G1,
G2, G4 and BMM B3–B5 are left out for the host's time only. BMM B1 (12 × 512 × 512 × 64) is in:
its candidates' programs reach 10⁵–4·10⁶ instructions, which the VTA target generates, stores
and times as arrays (median about 0.05 s per candidate end to end, 2–3 s for the largest).
Heron reports 2.32× over AutoTVM on VTA on average.

For each case:

* **heronlike**: ``heronlike.tune(..., "vta", trials=T, explorer=cga)`` (Heron's constraint-based
  GA) with the VTA runner in timing-only mode; the best program is then simulated in full once
  on random int8 inputs and compared bit-exactly with numpy (``heronlike.reference``);
* **AutoTVM-style, random**: AutoTVM's ``RandomTuner`` over the template space at the same T
  trials (invalid points cost a trial, as they did on the board),
  :func:`heronlike.dla_targets.vta.baseline.random_search`, mean of 3 seeds;
* **AutoTVM-style, exhaustive**: the whole template space enumerated
  (:func:`~heronlike.dla_targets.vta.baseline.exhaustive`): the strongest baseline any AutoTVM
  tuner could reach on this space.

Ratios are AutoTVM cycles / heronlike cycles (> 1: heronlike faster). Cycles are deterministic
(uncalibrated timing constants, dla_targets/vta/timing.py); the CSV still names the host's CPU
and the date.

    .venv/bin/python benchmarks/vta_compare.py --trials 64 [--cases G3,C2D5]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from heronlike import ops
from heronlike.dla_targets.vta import simulate
from heronlike.dla_targets.vta.baseline import (
    INVALID,
    compute_params,
    exhaustive,
    random_search,
    space_size,
)
from heronlike.dla_targets.vta.lowering import (
    GemmParams,
    gemm_int32_program,
    pack_inputs,
    unpack_int32_output,
)
from heronlike.dla_targets.vta.runner import VTARunner
from heronlike.host import cpu_model

S8 = ops.target_dtype("int8", "vta")
#: name -> (operator, heronlike.ops arguments); heron_repo.md §7.2 argument orders converted:
#: GEMM (M, K, N) -> gemm(M, N, K); BMM (B, M, K, N) -> bmm(B, M, N, K); C2D (N, H, W, CI, CO,
#: KH, KW, stride, pad, dilation) unchanged
CASES: dict[str, tuple[str, tuple[int, ...]]] = {
    "G3": ("gemm", (32, 1008, 2048)),
    "G5": ("gemm", (32, 1008, 4096)),
    "B1": ("bmm", (12, 512, 512, 64)),
    "B2": ("bmm", (12, 512, 64, 512)),
    "C2D2": ("c2d", (1, 56, 56, 64, 64, 1, 1, 1, 0, 1)),
    "C2D4": ("c2d", (1, 28, 28, 128, 256, 1, 1, 2, 0, 1)),
    "C2D5": ("c2d", (1, 14, 14, 256, 256, 3, 3, 1, 1, 1)),
    "C2D6": ("c2d", (1, 14, 14, 256, 512, 1, 1, 2, 0, 1)),
}
OUT = Path(__file__).parent / "results" / "vta_compare.csv"


def _compute(case: str) -> list:
    op, args = CASES[case]
    return ops.OPERATORS[op][0](*args, dtype=S8)


def check_bit_exact(compute: list, params: GemmParams, seed: int = 0) -> bool:
    """Full simulation of ``params``'s program on random int8 inputs == numpy's exact result."""
    from heronlike.reference import random_inputs, reference_outputs
    from heronlike.space import generate_space

    dag = generate_space(compute, "vta").dag
    arrays = random_inputs(dag, np.random.default_rng(seed))
    (ref,) = reference_outputs(dag, arrays).values()
    result = simulate(gemm_int32_program(params), pack_inputs(arrays[0], arrays[1]))
    return bool(np.array_equal(unpack_int32_output(result.outputs["C"]), ref))


def run_case(case: str, trials: int, seeds: int = 3) -> dict[str, object]:
    """heronlike and both AutoTVM-style searches on one case (module docstring)."""
    import heronlike

    compute = _compute(case)
    geometry = compute_params(compute)
    clock = 100e6
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        res = heronlike.tune(
            compute,
            "vta",
            trials=trials,
            batch_size=16,
            seed=0,
            explorer="cga",
            records=str(Path(tmp) / "records.sqlite"),
            work_dir=tmp,
            runner=VTARunner(check=False),
            final_repeat=1,
        )
    t_heron = time.perf_counter() - t0
    best = GemmParams.from_assignment(res.assignment)
    heron_cycles = round(res.latency_s * clock)
    exact = check_bit_exact(compute, best)
    t0 = time.perf_counter()
    ex = exhaustive(geometry)
    t_ex = time.perf_counter() - t0
    rand = [random_search(geometry, trials, seed=s) for s in range(seeds)]
    rand_cycles = [r.cycles for r in rand]
    rand_mean = float(np.mean(rand_cycles)) if INVALID not in rand_cycles else INVALID
    macs = geometry.macs
    peak = 256  # MACs per cycle (vta.md §2.1)
    return {
        "case": case,
        "op": CASES[case][0],
        "shape": ",".join(map(str, CASES[case][1])),
        "trials": trials,
        "heronlike_cycles": heron_cycles,
        "heronlike_pct_peak": round(100 * macs / peak / heron_cycles, 2),
        "heronlike_bit_exact": exact,
        "heronlike_valid": f"{res.valid}/{res.trials_run}",
        "heronlike_params": _short(best),
        "autotvm_space_size": space_size(geometry),
        "autotvm_exhaustive_cycles": int(ex.cycles),
        "autotvm_exhaustive_invalid": ex.invalid,
        "autotvm_exhaustive_params": _short(ex.best) if ex.best else "",
        "autotvm_random_cycles_mean": round(rand_mean),
        "autotvm_random_invalid_mean": round(float(np.mean([r.invalid for r in rand])), 1),
        "ratio_vs_exhaustive": round(ex.cycles / heron_cycles, 3),
        "ratio_vs_random": round(rand_mean / heron_cycles, 3),
        "heronlike_s": round(t_heron, 1),
        "exhaustive_s": round(t_ex, 1),
    }


def _short(p: GemmParams) -> str:
    parts = [f"tm={p.tile_m}", f"tn={p.tile_n}", f"tk={p.tile_k}", f"vt={p.vthreads}"]
    parts += [f"order={p.order}", f"fold={p.fold}"]
    if p.tile_h > 1 or p.tile_w > 1:
        parts += [f"th={p.tile_h}", f"tw={p.tile_w}"]
    return " ".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    stamp = {"cpu": cpu_model(), "date": datetime.date.today().isoformat()}
    for case in args.cases.split(","):
        row = {**run_case(case, args.trials), **stamp}
        rows.append(row)
        print(row, flush=True)
    geo = {
        k: math.exp(np.mean([math.log(r[k]) for r in rows]))
        for k in ("ratio_vs_exhaustive", "ratio_vs_random")
    }
    rows.append(
        {
            "case": "geomean",
            **{k: round(v, 3) for k, v in geo.items()},
            "trials": args.trials,
            **stamp,
        }
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fields = list(rows[0].keys())
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    print(
        f"geomean AutoTVM/heronlike: exhaustive {geo['ratio_vs_exhaustive']:.3f}, "
        f"random {geo['ratio_vs_random']:.3f}; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
