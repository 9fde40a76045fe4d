"""What fusing the sub-pixel transposed convolution's placement stage into the product's tiles
buys (:func:`rules.general.reads_in_blocks`), one tuned schedule at a time.

For each case (T4 and T6 of Heron's DL Boost table by default: 1 x 1 taps, stride 2): one tune
(16 trials in rounds of 8), then its ``--top`` fastest distinct schedules of the product ``P``
built twice, identical but for the placement stage ``Y``: ``fused`` (computed at the product's
tile, the write-back position the search may choose: both are built) and ``separate`` (its own
parallel loop nest after the whole product, as every schedule was before the rule; the rule's
condition switched off for this one space). All are timed by the suite's harness
(``suite.time_tvm_kernels``: fresh processes, each output checked against the reference,
3 warm-up calls, median of 15 samples of at least 10 ms, rounds with the order rotated).

    python benchmarks/fused_placement.py                    # T4, T6
    python benchmarks/fused_placement.py --cases T4 --top 2

Writes ``benchmarks/results/fused_placement-<cpu>-<date>.csv``: per case and schedule, the
separate latency, the fused one at each position and ``speedup`` (separate / best fused).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import heronlike  # noqa: E402
from benchmarks import suite  # noqa: E402
from heronlike.csp import In  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import Space, generate_space  # noqa: E402

DEFAULT_CASES = ("T4", "T6")
POSITION = "P.write_back.pos"


def separate_space(compute, target: str) -> Space:  # noqa: ANN001
    """``compute``'s space with the placement stage left in its own loop nest: the space every
    schedule had before :func:`reads_in_blocks` (its condition answers no while it is built)."""
    import heronlike.dla_targets.dlboost as dlboost

    rules = sys.modules[dlboost.FuseEpilogue.__module__]
    condition = rules.reads_in_blocks
    rules.reads_in_blocks = lambda stage, anchor: False
    try:
        return generate_space(compute, target)
    finally:
        rules.reads_in_blocks = condition


def with_knobs(space: Space, knobs: dict[str, int], seed: int) -> dict[str, int]:
    """A full assignment of ``space`` with ``knobs`` (those it has) pinned.

    Raises:
        RuntimeError: no assignment satisfies them.
    """
    pinned = [In(k, (v,)) for k, v in knobs.items() if k in space.csp.vars]
    found = RandSAT(space.csp, seed=seed).sample(1, extra=pinned)
    if not found:
        raise RuntimeError(f"no assignment of the space with {knobs}")
    return found[0]


def one_case(spec: str, a: argparse.Namespace, mode, work: Path) -> list[dict]:  # noqa: ANN001
    case = suite.case_compute(spec, "int8", mode)
    name, op, run_params, compute = case.name, case.op, case.params, case.compute
    r = heronlike.tune(
        compute,
        mode.target,
        trials=a.trials,
        batch_size=a.batch,
        seed=a.seed,
        records=work / "records.sqlite",
        work_dir=work,
    )
    fused = r.space
    if POSITION not in fused.csp.vars:
        raise RuntimeError(f"{name}: the placement stage is not fused in this space")
    separate = separate_space(compute, mode.target)
    knob_names = [v for v, var in fused.csp.vars.items() if var.knob and v != POSITION]
    db = heronlike.Records(work / "records.sqlite")
    try:
        trials = [t for w in db.workloads() for t in db.trials(w["workload_key"], w["target_key"])]
    finally:
        db.close()
    schedules: list[dict[str, int]] = []
    for t in sorted((t for t in trials if t.ok), key=lambda t: t.latency_s):
        knobs = {k: t.assignment[k] for k in knob_names}
        if knobs not in schedules:
            schedules.append(knobs)
        if len(schedules) == a.top:
            break
    rows = []
    lo, hi = fused.csp.vars[POSITION].lo, fused.csp.vars[POSITION].hi
    for rank, knobs in enumerate(schedules):
        programs = {"separate": separate.program(with_knobs(separate, knobs, a.seed))}
        for pos in range(lo, hi + 1):
            assignment = with_knobs(fused, {**knobs, POSITION: pos}, a.seed)
            programs[f"fused{pos}"] = fused.program(assignment)
        ms = suite.time_programs(programs, fused, a.rounds, work)
        best = min(v for k, v in ms.items() if k != "separate")
        row = dict(
            case=name,
            op=op,
            shape_run=suite._params_text(run_params),
            target=r.target_key,
            trials=a.trials,
            seed=a.seed,
            schedule_rank=rank,
            separate_ms=ms["separate"] * 1e3,
            **{f"{k}_ms": v * 1e3 for k, v in ms.items() if k != "separate"},
            speedup=ms["separate"] / best,
            threads=fused.target.cores,
            **machine_stamp(),
        )
        print(
            f"[{name} #{rank}] separate {row['separate_ms']:.4f} ms, best fused "
            f"{best * 1e3:.4f} ms: {row['speedup']:.3f}x",
            flush=True,
        )
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--top", type=int, default=3, help="fastest distinct schedules per case")
    p.add_argument("--rounds", type=int, default=3, help="harness rounds, order rotated")
    a = p.parse_args(argv)
    suite.run_per_case(a, one_case, "fused_placement")
    return 0


if __name__ == "__main__":
    sys.exit(main())
