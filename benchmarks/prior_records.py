"""Records of random programs to fit a schedule prior on (``benchmarks/prior_fit.py``).

A prior ranks the first round's RandSAT samples before the cost model has data
(:mod:`heronlike.prior`). To fit one without the bias of a search's choices, this script tunes
each case with the ``rand`` explorer and no prior (``--trials`` RandSAT programs, the seed
fixed), so each workload's trials are a uniform sample of its space, and writes every trial to
one records file. ``--dtype int8`` tunes the DL Boost rules (the case padded to the intrinsic,
as the suite runs it), ``float32`` the general rule set (``llvm``); the DL Boost prior ranks
both, so fit it on both. Resumable: a case whose workload already has ``--trials`` trials in the
file is not tuned again (the tune's budget counts them).

    python benchmarks/prior_records.py --out prior.sqlite --dtype int8 \\
        --cases G1,G4,B1,B2,B3,B4,C1D1,C1D3,C1D5,C2D1,C2D2,C2D3,C2D4,C2D5,C2D6,C3D2,C3D3,C3D5
    python benchmarks/prior_records.py --out prior.sqlite --dtype float32 --cases G1,G3,B1
    python benchmarks/prior_fit.py prior.sqlite --current dlboost

The DL Boost prior of 2026-11-29 (``dla_targets/dlboost.py``) was fitted on such records of 46
cases, 24 trials each (docs/results.md, "The schedule prior on the micro-kernel order").
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import heronlike  # noqa: E402
from benchmarks import suite  # noqa: E402


def record_case(spec: str, dtype: str, mode: suite.Mode, a: argparse.Namespace) -> str:
    """Tune one case with random programs into ``a.out``; a line saying what it recorded."""
    case = suite.case_compute(spec, dtype, mode)
    start = time.perf_counter()
    r = heronlike.tune(
        case.compute,
        case.target,
        trials=a.trials,
        batch_size=a.batch,
        explorer="rand",
        prior=False,
        seed=a.seed,
        records=a.out,
        finalists=1,
    )
    return (
        f"{case.name} {dtype}: {r.valid} of {r.trials_run} trials valid, best "
        f"{r.latency_s * 1e3:.3f} ms, {time.perf_counter() - start:.0f} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases", required=True, help="the suite's cases: G1,C2D1 or gemm:64,64,64;C2D1"
    )
    p.add_argument("--dtype", choices=("int8", "float32"), default="int8")
    p.add_argument("--out", type=Path, required=True, help="records file (SQLite)")
    p.add_argument("--trials", type=int, default=24, help="random programs per case")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    mode = suite.resolve_mode("auto")
    failed = 0
    for spec in suite.split_cases(a.cases):
        try:
            print(record_case(spec, a.dtype, mode, a), flush=True)
        except heronlike.HeronlikeError as err:  # a case this target cannot hold: say so, go on
            failed += 1
            print(f"{spec} {a.dtype}: not recorded: {type(err).__name__}: {err}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
