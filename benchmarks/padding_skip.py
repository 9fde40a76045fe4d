"""What skipping the zero padding (:mod:`heronlike.postproc`) buys, one tuned schedule at a time.

For each padded convolution of Heron's DL Boost table: one tune (CGA, 16 trials in rounds of 8
by default), then the schedule it returned built four ways, identical but for the padding
guards: ``none`` (the schedule's own program, every padding tap multiplied), ``outer`` (guards
outside the unrolled register tile), ``all`` (also inside it, in one branch-free version of the
loop nest per way a tile reads the padding) and ``all_one_version`` (the same guards in the
one loop nest), whatever the tune picked. The four are timed by the suite's harness
(``suite.time_tvm_kernels``: a fresh process, each output checked against the reference, 3
warm-up calls, the median of 15 samples of at least 10 ms), in interleaved rounds (the order
rotated), the median over the rounds. Per row: ``zero_share`` (share of the padded input
that is padding), ``knob`` (whether the space has the ``skip_padding`` knob: since
2026-12-06 a finish knob, which the tune settles by measuring its two fastest candidates with
``all`` guards; before, a knob of the search), the place the tune picked, the four
latencies and ``outer_speedup`` / ``all_speedup`` / ``all_one_version_speedup`` against
``none``.

    python benchmarks/padding_skip.py                       # the 10 padded cases
    python benchmarks/padding_skip.py --cases C3D5 --trials 8
    python benchmarks/padding_skip.py --dtype float32       # the general rule set

``--dtype int8`` (default) tunes on the suite's mode (DL Boost where the CPU has VNNI; the
padding stage feeds the intrinsic); ``--dtype float32`` on ``llvm``, whose general rule set
inlines the padding stage into the convolution (the guards then test the update's own
``if_then_else``). Writes ``benchmarks/results/padding_skip-<cpu>-<date>.csv``
(``padding_skip_float32-…`` for float32).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import tvm  # noqa: E402

import heronlike  # noqa: E402
from benchmarks import suite  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.postproc import (  # noqa: E402
    GUARD_PLACES,
    postprocess,
    skip_annotations,
    with_guard_place,
    zero_share,
)

DEFAULT_CASES = ("C3D5", "C3D3", "C3D1", "C2D5", "C2D1", "D5", "D1", "T5", "T3", "C1D3")


def variants(space, assignment) -> dict[str, tvm.IRModule]:
    """The schedule of ``assignment`` as ``none`` / ``outer`` / ``all`` programs, and
    ``all_one_version`` (``all`` guards without the interior version).

    Raises:
        RuntimeError: the schedule has not exactly one padding annotation.
    """
    out = {"none": space.apply(assignment).mod}
    found = skip_annotations(out["none"]["main"])
    if len(found) != 1:
        raise RuntimeError(f"expected one block to skip padding in, found {found}")
    for place in GUARD_PLACES:
        out[place] = postprocess(with_guard_place(out["none"], place))
    one = postprocess(with_guard_place(out["none"], "all"), boundary_version=False)
    out["all_one_version"] = one
    return out


def one_case(spec: str, a: argparse.Namespace, mode, work: Path) -> dict:
    case = suite.case_compute(spec, a.dtype, mode)
    r = heronlike.tune(
        case.compute,
        case.target,
        trials=a.trials,
        batch_size=a.batch,
        seed=a.seed,
        records=work / "records.sqlite",
        work_dir=work,
    )
    space = r.space
    knob = next((v for v in space.csp.vars if v.endswith(".skip_padding")), None)
    picked = GUARD_PLACES[r.assignment[knob]] if knob else "outer"
    programs = variants(space, r.assignment)
    ms = suite.time_programs(programs, space, a.rounds, work)
    ((_, _, buffers),) = skip_annotations(programs["none"]["main"])
    row = dict(
        case=case.name,
        op=case.op,
        shape_run=suite._params_text(case.params),
        dtype=a.dtype,
        target=r.target_key,
        trials=a.trials,
        seed=a.seed,
        zero_share=max(zero_share(space.dag.func, b) for b in buffers),
        knob=knob is not None,
        picked=picked,
        none_ms=ms["none"] * 1e3,
        outer_ms=ms["outer"] * 1e3,
        all_ms=ms["all"] * 1e3,
        all_one_version_ms=ms["all_one_version"] * 1e3,
        outer_speedup=ms["none"] / ms["outer"],
        all_speedup=ms["none"] / ms["all"],
        all_one_version_speedup=ms["none"] / ms["all_one_version"],
        threads=space.target.cores,
        **machine_stamp(),
    )
    print(
        f"[{case.name}] zeros {row['zero_share']:.0%}, picked {picked}: none "
        f"{row['none_ms']:.4f} ms, outer {row['outer_speedup']:.3f}x, "
        f"all {row['all_speedup']:.3f}x (one version {row['all_one_version_speedup']:.3f}x)",
        flush=True,
    )
    return row


def main(argv: list[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=4, help="interleaved timing rounds")
    p.add_argument(
        "--dtype",
        choices=("int8", "float32"),
        default="int8",
        help="int8: the suite's mode (DL Boost on a VNNI CPU); float32: llvm's general rules",
    )
    a = p.parse_args(argv)
    suite.run_per_case(
        a, one_case, "padding_skip" if a.dtype == "int8" else f"padding_skip_{a.dtype}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
