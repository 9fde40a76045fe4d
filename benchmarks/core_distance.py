"""Tiles of one case timed in turn, each turn labelled by how far apart the two cores then were.

On a 2-vCPU Zen 5 VM the hypervisor runs the two vCPUs on nearby cores in some seconds and on
distant ones in others (a cache line's round trip between them reads about 100 ns or about
380 ns, :func:`benchmarks.peak.core_round_trip_ns`), switching back and forth within one
process. A parallel kernel of about 13 µs can then read 13 µs in one turn and 25 µs in the next,
depending on how its parallel loop splits the work (docs/results.md, "Parallel kernels and the
distance between the cores"). This script times several tiles of one case in the same process
and the same turns, so every tile meets every state alike:

* ``--base``: a tile of DL Boost's space, knobs by suffix (all of them);
* ``--point NAME:KNOBS``: a variant, ``KNOBS`` overriding the base's (empty: the base itself).

Tiles are points of the case's target with ``-split-axis-ops=0`` (:data:`WHOLE_SPACE`), so
also orders the default space leaves out (the default base walks C2D2's rows, split over the
two threads, in its innermost cache-tile loop).

Every tile is built, checked against the reference and then timed with the harness's
interleaved samples (:func:`heronlike.baselines.interleaved_samples`: one sample of each tile
per turn, at least 10 ms each, the order rotated), for ``--turns`` turns. Before each turn the
core-to-core round trip is measured (the suite's harness worker,
:func:`benchmarks.suite._tvm_kernels_worker`, does all of this); a turn is far when it exceeds
twice the lowest of the run (:data:`benchmarks.suite.FAR_ROUND_TRIP_RATIO`).

One row per tile: its parallel tasks (``P``), the median of its samples in near and in far
turns, their ratio, and the turns of each state.

    python benchmarks/core_distance.py          # C2D2: its tuned tile and three other splits

Writes ``benchmarks/results/core_distance-<cpu>-<date>.csv``.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import suite  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.space import Space, generate_space  # noqa: E402

DEFAULT_CASES = ("C2D2",)
#: the target option under which the tiles are looked up: every loop order, also those the
#: default space leaves out of small stages (``SplitAxisNotInnermost`` in
#: :mod:`heronlike.rules.parallel`, which this script's measurements motivated; the default
#: base is one of them)
WHOLE_SPACE = "-split-axis-ops=0"
#: C2D2's tile in the fair table of 2026-12-05: 2 parallel tasks of 28 output rows each, the
#: rows innermost of the spatial loops
DEFAULT_BASE = (
    "order@S1.v_i0=3,order@S1.v_i1=2,order@S1.v_i2=1,unroll=64,v_ci.R0=2,v_ci.R1=8,"
    "v_i0.S0=2,v_i0.S1=28,v_i0.S2=1,v_i1.S0=1,v_i1.S1=8,v_i1.S2=7,v_i2.S0=1,v_i2.S1=2,"
    "v_i2.S2=2,v_n.S0=1,v_n.S1=1,v_n.S2=1,v_rh.R0=1,v_rh.R1=1,v_rw.R0=1,v_rw.R1=1,"
    "write_back.pos=1"
)
#: the same tile with the parallel split moved: 8 row blocks, the channels, the columns
DEFAULT_POINTS = (
    "rows_2:",
    "rows_8:v_i0.S0=8,v_i0.S1=7",
    "channels_2:v_i0.S0=1,v_i0.S1=56,v_i2.S0=2,v_i2.S1=1",
    "columns_2:v_i0.S0=1,v_i0.S1=56,v_i1.S0=2,v_i1.S1=4",
)


def varied_point(space: Space, base: str, changes: str) -> dict[str, int]:
    """The point of ``space`` whose knobs are ``base``'s (``suffix=value`` pairs naming every
    knob) with ``changes``'s (same form, may be empty) put over them.

    Raises:
        ValueError: a suffix that names no knob or several, a knob ``base`` leaves out, or
            knobs that name no point of the space (a broken constraint)."""
    knobs: dict[str, int] = {}
    for text in (base, changes):
        for item in filter(None, (t.strip() for t in text.split(","))):
            suffix, _, value = item.partition("=")
            found = [k for k in space.csp.knobs if k.endswith("." + suffix.strip())]
            if len(found) != 1:
                raise ValueError(f"{suffix!r} names {len(found)} knobs of {space.csp.knobs}")
            knobs[found[0]] = int(value)
    missing = sorted(set(space.csp.knobs) - set(knobs))
    if missing:
        raise ValueError(f"the base leaves out the knobs {missing}")
    point = space.csp.complete(knobs)
    if point is None:
        raise ValueError(f"{changes or base} is no point of the space: {knobs}")
    return point


def time_in_turns(
    libraries: list[str], args_path: Path, expected_path: Path, turns: int, threads: int
) -> tuple[list[list[float]], list[float]]:
    """The suite's harness worker (:func:`benchmarks.suite._tvm_kernels_worker`) in one fresh
    process on ``threads`` threads: each library loaded, its arguments of ``args_path`` placed
    as round 0 places them, its outputs poisoned, run once and compared with
    ``expected_path``; then ``turns`` interleaved samples of each (seconds per call), the
    core-to-core round trip (ns) measured before each turn. Returns ``(samples per library,
    round trip per turn)``.

    Raises:
        RuntimeError: a library's output differs from the reference (or it failed to run), or
            the round trip could not be measured (one CPU, no gcc)."""
    from heronlike.measure import run_in_subprocess

    results, share = run_in_subprocess(
        suite._worker("_tvm_kernels_worker"),
        [(library, str(args_path)) for library in libraries],
        str(expected_path),
        turns,
        (),
        None,
        0,
        timeout_s=3600,
        num_threads=threads,
    )
    bad = [f"{lib}: {msg}" for lib, (_, ok, msg) in zip(libraries, results, strict=True) if not ok]
    if bad:
        raise RuntimeError("; ".join(bad))
    if "round_trip_ns" not in share:
        raise RuntimeError("the core-to-core round trip was not measured before every turn")
    return [samples for samples, _, _ in results], share["round_trip_ns"]


def one_case(spec: str, a, mode: suite.Mode, work: Path) -> list[dict]:  # noqa: ANN001
    """One row per ``--point`` of case ``spec``, all timed in one process."""
    import numpy as np

    case = suite.case_compute(spec, "int8", mode)
    space = generate_space(case.compute, f"{case.target} {WHOLE_SPACE}")
    named = dict(text.split(":", 1) for text in a.point)
    points = {name: varied_point(space, a.base, changes) for name, changes in named.items()}
    kernels, expected = suite.build_programs(
        {name: space.program(p) for name, p in points.items()}, space, work
    )
    args_path, exp_path = work / "args.npz", work / "expected.npz"
    first = next(iter(kernels.values()))[1]
    np.savez(args_path, **{f"arg{i}": x for i, x in enumerate(first)})
    np.savez(exp_path, **{f"arg{i}": x for i, x in expected.items()})
    threads = space.target.cores
    samples, trips = time_in_turns(
        [str(kernels[name][0]) for name in points], args_path, exp_path, a.turns, threads
    )
    far_ns = suite.FAR_ROUND_TRIP_RATIO * min(trips)
    near_turns = sum(t <= far_ns for t in trips)
    rows = []
    for (name, point), seconds in zip(points.items(), samples, strict=True):
        near = [s * 1e6 for s, t in zip(seconds, trips, strict=True) if t <= far_ns]
        far = [s * 1e6 for s, t in zip(seconds, trips, strict=True) if t > far_ns]
        row = dict(
            case=case.name,
            shape_run=suite._params_text(case.params),
            target=space.target.key,
            tile=name,
            changes=named[name],
            parallel_tasks=next((v for k, v in point.items() if k.endswith(".P")), None),
            near_us=statistics.median(near) if near else None,
            far_us=statistics.median(far) if far else None,
            far_over_near=_ratio(far, near),
            near_turns=near_turns,
            far_turns=len(trips) - near_turns,
            round_trip_near_ns=statistics.median([t for t in trips if t <= far_ns]),
            round_trip_far_ns=statistics.median([t for t in trips if t > far_ns])
            if near_turns < len(trips)
            else None,
            threads=threads,
            base=a.base,
            **machine_stamp(),
        )
        rows.append(row)
        print(f"[{case.name}] {name:12s} P={row['parallel_tasks']}: near {_us(row['near_us'])}, "
              f"far {_us(row['far_us'])} ({row['near_turns']} near / {row['far_turns']} far "
              "turns)", flush=True)  # fmt: skip
    return rows


def _ratio(far: list[float], near: list[float]) -> float | None:
    """The far samples' median over the near samples' (None without both)."""
    return statistics.median(far) / statistics.median(near) if near and far else None


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} µs"


def main(argv: Sequence[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--base", default=DEFAULT_BASE, help="the base tile, every knob by suffix")
    p.add_argument(
        "--point",
        action="append",
        default=None,
        help="NAME:KNOBS, a tile as the base with KNOBS (by suffix) changed; repeatable "
        f"(default: {' '.join(DEFAULT_POINTS)})",
    )
    p.add_argument("--turns", type=int, default=2000, help="samples of each tile, in turn")
    a = p.parse_args(argv)
    a.point = a.point or list(DEFAULT_POINTS)
    if any(":" not in t for t in a.point):
        p.error("each --point is NAME:KNOBS (KNOBS may be empty)")
    suite.run_per_case(a, one_case, "core_distance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
