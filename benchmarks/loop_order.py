"""The register micro-kernel order against Ansor's order, on the same random points of one CSP.

:class:`heronlike.rules.tiling.MultiLevelTiling` orders a tiled stage's loops
``S0 S1 R0 R1 S2 T``: the register tile ``S2`` innermost, below the reduction loop ``R1``
(heronlike 0.2.0). Before, it used ``S0 S1 R0 S2 R1 T`` (Ansor's ``SSRSRS`` without its
innermost spatial level, Ansor §4.1; "the Ansor order" here), where each accumulator of the
register tile gets its own ``R1`` loop. Both orders have the same CSP (the
order changes no loop extent and no footprint), so one assignment names one point in each.

For each case: ``--points`` distinct random assignments (RandSAT, ``--seed``), each built in
both orders, every output checked against the reference, all ``2 × points`` kernels timed by
the suite's harness (:func:`benchmarks.suite.time_tvm_kernels`: fresh processes, 3 warm-up
calls, 15 samples of at least 10 ms each, the kernels in turn, ``--rounds`` rounds with the
order rotated; the median of all samples). One row per case: the geomean over the points of
``ansor_ms / microkernel_ms``, the smallest and largest ratio, each order's best point and how
many of its points lie within 2× of the best point of either order. The threads are the
target's cores (``taskset`` restricts them).

    python benchmarks/loop_order.py                        # G1 and C2D1 (int8, DL Boost)
    python benchmarks/loop_order.py --cases G1,C2D3 --dtype float32   # llvm's general rules
    taskset -c 0 python benchmarks/loop_order.py          # one core (a VM's quiet one)

Writes ``benchmarks/results/loop_order-<cpu>-<date>.csv`` (``loop_order_float32-…``).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import suite  # noqa: E402
from heronlike.dla_targets.dlboost import DLBoostTarget  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.rules.base import Rule  # noqa: E402
from heronlike.rules.tiling import MultiLevelTiling  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import Space, generate_space  # noqa: E402

DEFAULT_CASES = ("G1", "C2D1")
#: Ansor's SSRSRS order without its innermost spatial level: the register tile above R1
ANSOR_ORDER = ("S0", "S1", "R0", "S2", "R1", "T")


class AnsorOrderTarget(DLBoostTarget):
    """The DL Boost / ``llvm`` target with every :class:`MultiLevelTiling` in
    :data:`ANSOR_ORDER` (the rules heronlike used before 0.2.0); everything else the same."""

    def schedule_rules(self) -> Sequence[Rule]:
        rules = []
        for rule in super().schedule_rules():
            if isinstance(rule, MultiLevelTiling):
                rule = copy.copy(rule)
                rule.order = ANSOR_ORDER
            rules.append(rule)
        return rules


def spaces(compute: object, target: str) -> tuple[Space, Space]:
    """``(micro-kernel, Ansor)`` spaces of ``compute`` on ``target``.

    Raises:
        RuntimeError: the two CSPs differ (the order would then not be the only change).
    """
    micro = generate_space(compute, target)
    ansor = generate_space(compute, AnsorOrderTarget(**micro.target.options))
    if str(micro.csp) != str(ansor.csp):
        raise RuntimeError("the two orders gave different CSPs")
    return micro, ansor


def _tile(assignment: dict[str, int]) -> str:
    """The register tile and inner reduction extents of a point, as text."""
    keep = (".S2", ".R1", ".V", ".unroll")
    return " ".join(f"{k}={v}" for k, v in assignment.items() if k.endswith(keep))


def one_case(spec: str, a: argparse.Namespace, mode: suite.Mode, work: Path) -> dict:
    case = suite.case_compute(spec, a.dtype, mode)
    micro, ansor = spaces(case.compute, case.target)
    points = RandSAT(micro.csp, seed=a.seed).sample(a.points)
    programs = {}
    for i, point in enumerate(points):
        for order, space in (("micro", micro), ("ansor", ansor)):
            programs[f"p{i}_{order}"] = space.program(point)
    # both spaces share one layout and reference: the micro-kernel space's serves both
    seconds = suite.time_programs(programs, micro, a.rounds, work)
    ms = {k: v * 1e3 for k, v in seconds.items()}
    micro_ms = [ms[f"p{i}_micro"] for i in range(len(points))]
    ansor_ms = [ms[f"p{i}_ansor"] for i in range(len(points))]
    ratios = [o / n for o, n in zip(ansor_ms, micro_ms, strict=True)]
    best = min(micro_ms + ansor_ms)
    for i, point in enumerate(points):
        print(
            f"  p{i:<3d} {_tile(point):60.60s} ansor {ansor_ms[i]:9.3f} ms  micro-kernel "
            f"{micro_ms[i]:9.3f} ms  {ratios[i]:6.2f}x",
            flush=True,
        )
    row = dict(
        case=case.name,
        op=case.op,
        shape_run=suite._params_text(case.params),
        dtype=a.dtype,
        target=micro.target.key,
        points=len(points),
        seed=a.seed,
        geomean_speedup=suite.geomean(ratios),
        min_speedup=min(ratios),
        max_speedup=max(ratios),
        best_ansor_ms=min(ansor_ms),
        best_micro_ms=min(micro_ms),
        within2x_ansor=sum(t <= 2 * best for t in ansor_ms),
        within2x_micro=sum(t <= 2 * best for t in micro_ms),
        threads=micro.target.cores,
        **machine_stamp(),
    )
    print(
        f"[{case.name}] {row['points']} points: micro-kernel order {row['geomean_speedup']:.2f}x "
        f"(geomean; {row['min_speedup']:.2f}x to {row['max_speedup']:.2f}x); best "
        f"{row['best_ansor_ms']:.3f} -> {row['best_micro_ms']:.3f} ms; within 2x of the best "
        f"{row['within2x_ansor']} -> {row['within2x_micro']}",
        flush=True,
    )
    return row


def main(argv: Sequence[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--points", type=int, default=24, help="random points per case")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3, help="harness rounds")
    p.add_argument("--dtype", choices=("int8", "float32"), default="int8")
    a = p.parse_args(argv)
    stem = "loop_order" if a.dtype == "int8" else f"loop_order_{a.dtype}"
    suite.run_per_case(a, one_case, stem)
    return 0


if __name__ == "__main__":
    sys.exit(main())
