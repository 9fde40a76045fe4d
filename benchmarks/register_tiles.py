"""One int8 GEMM schedule with different register tiles, timed side by side (issue 25).

Every program shares the schedule of a good G1 kernel (8 × 2 parallel tiles, the
reduction split 64 × 4 × 4, the cache-tile order, write-back and unroll depth) and differs
only in its register tile ``m × n`` (``m`` rows by ``n`` vectors of 16 columns: ``m·n``
``vpdpbusd`` accumulators), the cache tile taking up the rest. Built on the target with
``-accumulators=0 -split-axis-ops=0`` (:data:`WHOLE_SPACE`) so that tiles below the
latency-hiding count (:class:`heronlike.rules.latency.HideLatency`) and, on shapes smaller than
G1, the schedule's order (its rows, split over the threads, innermost:
``SplitAxisNotInnermost`` in :mod:`heronlike.rules.parallel`) are points of the space; timed
by the suite's harness (fresh processes, outputs checked, the order rotated each round),
PyTorch's int8 paths timed in the same processes and turns (its oneDNN capped at AVX512-VNNI
on a CPU with AMX, as in the suite), its fastest kept.

    python benchmarks/register_tiles.py                        # G1 (GEMM 1024^3), 10 tiles
    taskset -c 0 python benchmarks/register_tiles.py           # ... on one core
    python benchmarks/register_tiles.py --cases "gemm:512,512,512" --tiles 8x2,4x2 --rounds 3

``--from-records R`` starts from the case's best schedule in the records file ``R`` (a tune's,
e.g. the suite's ``<case>/heronlike/records.sqlite``) instead: its parallel, reduction, order,
write-back and unroll knobs kept, only the register tile changed (:func:`tuned_knobs`), to see
whether a tune's kernel lost to a tile it did not try. It takes a batched product (BMM) too,
its batch tile kept (``m`` rows of one matrix)::

    python benchmarks/register_tiles.py --cases G4 --tiles 4x4,8x2,2x8,16x1,8x1,4x2 \
        --from-records benchmarks/out/<suite run>/G4/heronlike/records.sqlite
    python benchmarks/register_tiles.py --cases B1 --tiles 2x4,4x2,8x1,1x8,2x2,4x1 \
        --from-records <records of a B1 tune>

On a CPU without AVX512-VNNI the tiles are of the general mode's exact ``vpmaddwd`` intrinsic
(AVX2: ``n`` vectors of 8 columns, each call widening its 16 bytes of B to int16 and reading A
from the kernel's int16 copy), and PyTorch runs its default (FBGEMM/oneDNN on ``vpmaddubsw``).
``--compare-widen-a`` times each tile twice in the same rounds, A read from the int16 copy
(``-widen-a=1``, :class:`heronlike.rules.widen.WidenOperand`) and widened in every call
(``-widen-a=0``); ``--target`` picks another target, such as the AVX2 kernels on a newer CPU:

    python benchmarks/register_tiles.py --tiles 2x4,1x8,4x2,8x1 --compare-widen-a
    python benchmarks/register_tiles.py --target "llvm -mcpu=znver3" --compare-widen-a

Writes ``benchmarks/results/register_tiles-<cpu>-<date>.csv`` (``register_tiles_vpmaddwd-…``
in the general mode, ``…_widen_a…`` with ``--compare-widen-a``, ``…-<mcpu>-…`` with
``--target``; ``…-1core-…`` when this process may run on one core only, as under
``taskset -c 0``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import suite  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.space import generate_space  # noqa: E402
from heronlike.target import get_target  # noqa: E402

TILES = "16x1,8x2,4x4,2x8,8x1,4x2,2x4,4x1,2x2,1x1"


def knobs(
    params: dict[str, int], m: int, n: int, tile: tuple[int, int] = (16, 4)
) -> dict[str, int]:
    """The G1-like schedule of a GEMM ``M × N × K`` with an ``m × n`` register tile.

    Args:
        tile: the intrinsic's ``(lanes, k)``: ``(16, 4)`` for ``vpdpbusd`` zmm, ``(8, 2)``
            for the AVX2 ``vpmaddwd`` of the general mode (:attr:`benchmarks.suite.Mode.tile`).

    Raises:
        ValueError: the shape is not split that way (``M`` by ``8·m``, ``N`` by
            ``2·lanes·n``, ``K`` by ``4·k``).
    """
    M, N, K = params["M"], params["N"], params["K"]
    lanes, k = tile
    if M % (8 * m) or N % (2 * lanes * n) or K % (4 * k):
        raise ValueError(f"GEMM {M}x{N}x{K} has no {m}x{n} tile under 8 x 2 parallel tiles")
    return {
        "C.v_i.S0": 8,
        "C.v_i.S1": M // 8 // m,
        "C.v_i.S2": m,
        "C.v_j.S0": 2,
        "C.v_j.S1": N // (2 * lanes) // n,
        "C.v_j.S2": n,
        "C.v_k.R0": K // (4 * k),
        "C.v_k.R1": 4,
        "C.order@S1.v_i": 2,
        "C.order@S1.v_j": 1,
        "C.write_back.pos": 0,
        "C.unroll": 64,
    }


#: the target options under which every listed schedule is a point of the space
WHOLE_SPACE = "-accumulators=0 -split-axis-ops=0"

#: the stage's knobs a register tile sweep keeps from a tuned schedule (the rest is derived)
TUNED_KNOBS = re.compile(
    r"^C\.(v_[bijk]\.(S\d|R\d)|order@S1\.v_[bij]|write_back\.pos|unroll|widened_copy)$"
)


def tuned_knobs(assignment: dict[str, int], m: int, n: int) -> dict[str, int]:
    """A tuned GEMM or BMM schedule (``assignment``, e.g. the best of a records file) with its
    register tile made ``m × n`` (rows by vectors; a BMM's batch tile kept): its parallel,
    reduction, order, write-back, unroll and widened-copy knobs kept, and each spatial axis's
    cache tile (``S1``) taking what its register tile (``S2``) gives up.

    Raises:
        ValueError: the schedule's tile of an axis (``S1 × S2``) is not split that way.
    """
    out = {k: v for k, v in assignment.items() if TUNED_KNOBS.match(k)}
    for axis, size in (("v_i", m), ("v_j", n)):
        tile = out[f"C.{axis}.S1"] * out[f"C.{axis}.S2"]
        if tile % size:
            raise ValueError(f"the schedule's {axis} tile {tile} has no register tile of {size}")
        out[f"C.{axis}.S1"], out[f"C.{axis}.S2"] = tile // size, size
    return out


def one_case(spec: str, a: argparse.Namespace, mode, work: Path) -> list[dict]:
    case = suite.case_compute(spec, "int8", mode)
    tuned_only = case.op == "bmm" and getattr(a, "from_records", None)
    if case.op != "gemm" and not tuned_only:
        raise ValueError(
            f"{spec}: register_tiles.py times GEMMs (and BMMs --from-records), not {case.op}"
        )
    target = f"{mode.target} {WHOLE_SPACE}"
    spaces = {"": generate_space(case.compute, target)}
    if getattr(a, "compare_widen_a", False):
        spaces = {sfx: generate_space(case.compute, target + opt) for sfx, opt in WIDEN_A.items()}
    space = next(iter(spaces.values()))
    tiles = [tuple(int(v) for v in t.split("x")) for t in a.tiles.split(",")]
    tuned = None
    if getattr(a, "from_records", None):  # the tuned schedule of the case, not G1's
        from heronlike.tuning import apply_best

        tuned = apply_best(a.from_records, case.compute, mode.target).assignment
    programs = {}
    for suffix, sp in spaces.items():
        for m, n in tiles:
            point = sp.csp.complete(
                tuned_knobs(tuned, m, n)
                if tuned is not None
                else knobs(case.params, m, n, mode.tile or (16, 4))
            )
            if point is None:
                raise ValueError(f"{spec}: the {m}x{n} tile is no point of {sp.target.key}")
            programs[f"{m}x{n}{suffix}"] = sp.program(point)
    notes: dict[str, str] = {}
    seconds = suite.time_programs(
        programs, space, a.rounds, work, torch_case=(case.op, case.params), notes=notes
    )
    torch_s, torch_path = seconds.pop("pytorch", None), notes.get("pytorch", "")
    best = min(seconds.values())
    ops_count = 2 * case.params.get("B", 1) * case.params["M"] * case.params["N"] * case.params["K"]
    rows = []
    for (m, n), suffix in ((t, x) for x in spaces for t in tiles):
        s = seconds[f"{m}x{n}{suffix}"]
        rows.append(
            dict(
                case=case.name,
                shape_run=suite._params_text(case.params),
                tile=f"{m}x{n}",
                base="the tuned schedule" if tuned is not None else "G1's schedule",
                intrinsic=mode.mnemonic,
                a_operand=_a_operand(spaces[suffix]),
                accumulators=m * n,
                ms=s * 1e3,
                gops=ops_count / s / 1e9,
                vs_best=best / s,
                pytorch_ms=torch_s * 1e3 if torch_s else None,
                pytorch_path=torch_path,
                pytorch_isa_cap=os.environ.get("ONEDNN_MAX_CPU_ISA", ""),
                vs_pytorch=torch_s / s if torch_s else None,
                rounds=a.rounds,
                threads=space.target.cores,
                target=spaces[suffix].target.key,
                **machine_stamp(),
            )
        )
        print(
            f"[{case.name}] {m}x{n}{suffix}: {m * n:2d} accumulators, {s * 1e3:7.3f} ms, "
            f"{best / s:5.2f} of the best, {rows[-1]['vs_pytorch'] or 0:5.2f}x PyTorch",
            flush=True,
        )
    return rows


#: ``--compare-widen-a``: the program key suffix and target option of each way of reading A
WIDEN_A = {" (A pre-widened)": " -widen-a=1", " (A widened in the call)": " -widen-a=0"}


def _a_operand(space) -> str:
    """How the space's tensorized stage reads its A operand: its dtype there."""
    (match,) = space.matches.values()
    return match.a.dtype


def main(argv: list[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, ("G1",))
    p.add_argument("--tiles", default=TILES, help="register tiles m x n, comma-separated")
    p.add_argument(
        "--compare-widen-a",
        action="store_true",
        help="time each vpmaddwd tile twice: A pre-widened (-widen-a=1) and widened in the call",
    )
    p.add_argument("--rounds", type=int, default=5, help="harness rounds")
    p.add_argument(
        "--from-records",
        type=Path,
        default=None,
        help="keep the best schedule of this records file for the case (one case) and vary "
        "only its register tile, instead of G1's schedule",
    )
    a = p.parse_args(argv)
    # PyTorch on VNNI too, not AMX
    mode = suite.cap_pytorch_isa(suite.resolve_mode("auto", a.target))
    if mode.mnemonic is None:
        print("this CPU has neither AVX512-VNNI nor AVX2: no int8 intrinsic", file=sys.stderr)
        return 1
    # one core (taskset -c 0) gets its own file: the threads are the target's, the affinity's
    one_core = len(os.sched_getaffinity(0)) == 1
    name = "register_tiles" if mode.name == "vnni" else f"register_tiles_{mode.mnemonic}"
    name += "_widen_a" if a.compare_widen_a else ""
    name += "_tuned" if a.from_records else ""
    if a.target:  # another CPU's code on this one: the file names its -mcpu
        name += f"-{get_target(a.target).mcpu}"
    _, path = suite.run_per_case(a, one_case, f"{name}-1core" if one_core else name)
    return 0 if path else 1


if __name__ == "__main__":
    sys.exit(main())
