"""Space sizes per operator and target, beside Heron's Table 5 (issue 13, item 1).

For GEMM, BMM, C1D, C2D and C3D (the first case of each in heron_repo.md §7.2, the DL Boost
shapes; Heron's Table 5 counts its TensorCore spaces) on the ``dlboost`` (int8), ``llvm``
(float32, the general rule set) and ``cuda -tensorcore`` (float16) targets: variables,
constraints, knobs by topology (split factors, loop orders, categorical choices, other) and
log10 of the valid knob assignments (:func:`heronlike.space_stats.space_size`). Space generation
needs no accelerator, so every row is produced on any machine.

Usage::

    python benchmarks/space_sizes.py [--samples 2000] [--out benchmarks/results/space_sizes.csv]
"""

from __future__ import annotations

import argparse
import csv
import datetime
from dataclasses import asdict
from pathlib import Path

from heronlike import ops
from heronlike.host import cpu_model
from heronlike.space import generate_space
from heronlike.space_stats import space_size

# operator -> (Heron Table 5 variables, constraints) for its TensorCore spaces
HERON_TABLE5 = {
    "gemm": (173, 372),
    "bmm": (236, 529),
    "c1d": (236, 547),
    "c2d": (304, 702),
    "c3d": (363, 861),
}

CASES = {
    "gemm": lambda dt: ops.gemm(1024, 1024, 1024, dt),  # G1 (M, N, K)
    "bmm": lambda dt: ops.bmm(12, 512, 512, 64, dt),  # B1 (B, M, K=64, N=512)
    "c1d": lambda dt: ops.c1d(1, 892, 512, 512, 3, 1, 4, 2, dt),  # C1D3
    "c2d": lambda dt: ops.c2d(1, 56, 56, 64, 64, 3, 3, 1, 1, 1, dt),  # C2D1
    "c3d": lambda dt: ops.c3d(1, 8, 56, 56, 64, 64, 3, 3, 3, 1, 1, 1, dt),  # C3D1
}

TARGETS = {"dlboost": "int8", "llvm": "float32", "cuda -tensorcore": "float16"}


def rows(samples: int) -> list[dict]:
    """One row per (operator, target): :class:`~heronlike.space_stats.SpaceSize` fields plus
    Heron's Table 5 counts for the operator."""
    out = []
    for op, build in CASES.items():
        for target, dtype in TARGETS.items():
            try:
                space = generate_space(build(dtype), target)
            except Exception as err:  # a target that cannot hold the case: say which and why
                out.append({"operator": op, "target": target, "dtype": dtype, "error": str(err)})
                continue
            size = space_size(space.csp, samples=samples)
            heron_vars, heron_cons = HERON_TABLE5[op]
            out.append(
                {
                    "operator": op,
                    "target": target,
                    "dtype": dtype,
                    **asdict(size),
                    "heron_variables": heron_vars,
                    "heron_constraints": heron_cons,
                    "error": "",
                }
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--out", default="benchmarks/results/space_sizes.csv")
    args = ap.parse_args()
    table = rows(args.samples)
    stamp = f"{cpu_model()}, {datetime.date.today().isoformat()}"
    fields = sorted(
        {k for r in table for k in r},
        key=lambda k: list(table[0]).index(k) if k in table[0] else 99,
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        f.write(f"# space sizes; generated on {stamp} (space generation is machine-independent)\n")
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(table)
    for r in table:
        if r.get("error"):
            print(f"{r['operator']:5} {r['target']:17} error: {r['error']}")
            continue
        print(
            f"{r['operator']:5} {r['target']:17} vars {r['variables']:4} "
            f"(Heron {r['heron_variables']}) "
            f"cons {r['constraints']:4} (Heron {r['heron_constraints']}) knobs {r['knobs']:3} "
            f"[split {r['split_knobs']}, order {r['order_knobs']}, cat {r['categorical_knobs']}, "
            f"other {r['other_knobs']}] log10 valid "
            f"{'<=' if r['upper_bound'] else '~'}{r['log10_valid']:.1f} "
            f"(structured {r['log10_structured']:.1f}, valid share {r['valid_fraction']:.3f})"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
