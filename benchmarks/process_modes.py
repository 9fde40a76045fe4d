"""One tile built parallel and serial, each timed from its first call on in many fresh processes.

A kernel of a few microseconds on 2 threads can read a different time in every process: on a
2-vCPU Zen 5 VM the fair table's GEMV rows flipped between tables, the same kernel reading
1.3-1.5 µs in some harness processes and 2.2-2.6 µs in others with the same placement in memory
(docs/results.md, "Matrix-vector products: the streaming order, measured and left off"). This
script separates the kernel from the process: for each case, ``--point`` (knobs by suffix, in
DL Boost's space) is built twice, as given (its parallel loop on every core) and serially (the
knob ``<stage>.serial`` at 1, the parallel factor ``S0`` folded into ``S1``: the same tile and
loop order on one core, with no parallel launch). Each kernel is checked against the reference
and then timed in ``--processes`` fresh processes of its own, parallel and serial alternating,
every process placing the arguments alike (the harness's placement of round 0,
:func:`benchmarks.suite.placed_tensors`). Each process takes ``--repeats`` measurements of
``--calls`` calls one after the other from the kernel's first timed call
(``time_evaluator``), and then times TVM's parallel launch (:func:`benchmarks.peak.
measure_parallel_launch`).

One row per process: the median of its first 5 measurements, the median, fastest and slowest
of the rest (the steady state), and its launch. A kernel whose steady medians split into
groups across processes, while its serial twin's do not, is slowed by how the process's two
threads run, not by its code or its arguments' placement.

    python benchmarks/process_modes.py                 # GV2, 12 processes per kernel
    python benchmarks/process_modes.py --cases GV5 --point S0=8,S1=1,S2=8,R0=8,R1=32,unroll=512

Writes ``benchmarks/results/process_modes-<cpu>-<date>.csv``.
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
from benchmarks.gemv_stream import given_point  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.space import Space, generate_space  # noqa: E402

DEFAULT_CASES = ("GV2",)
#: GV2's tile in the table's tunes: 8 parallel tasks of 4 blocks of 2 row blocks
DEFAULT_POINT = "S0=8,S1=4,S2=2,R0=4,R1=16,unroll=64,write_back.pos=0,serial=0"
#: measurements at the start of a process reported apart from the steady state
FIRST = 5
#: measurements left out of the steady state (the first ones)
SETTLE = 10


def serial_twin(point: dict[str, int], space: Space) -> dict[str, int]:
    """``point`` run on one core: the knob ``<stage>.serial`` at 1 and the parallel split
    factor ``S0`` folded into ``S1`` (same tile, same loop order, one parallel iteration).

    Raises:
        ValueError: the space has no ``serial`` knob (a stage too large to run serially),
            several ``S0`` or ``S1`` knobs (a stage tiled along more than one spatial axis: a
            GEMV has one), or the folded factors name no point of it."""

    def knob(suffix: str) -> str:
        found = [k for k in space.csp.knobs if k.endswith(suffix)]
        if len(found) != 1:
            raise ValueError(f"{suffix!r} names {len(found)} knobs of {space.csp.knobs}")
        return found[0]

    serial = knob(".serial")  # first: a stage too large to run serially has none
    s0, s1 = knob(".S0"), knob(".S1")
    knobs = {k: point[k] for k in space.csp.knobs}
    knobs.update({s0: 1, s1: point[s0] * point[s1], serial: 1})
    twin = space.csp.complete(knobs)
    if twin is None:
        raise ValueError(f"{knobs} is no point of the space")
    return twin


def series_worker(
    library: str, args_path: str, expected_path: str, calls: int, repeats: int, threads: int
) -> tuple[list[float], float]:
    """Harness child: load ``library``, place the arguments of ``args_path`` as the harness's
    round 0 does, poison the outputs, run once and compare with ``expected_path``
    (:func:`benchmarks.suite.poisoned_arguments`, :func:`~benchmarks.suite.output_problems`); then
    ``repeats`` measurements of ``calls`` calls (seconds per call, in order) and TVM's parallel
    launch on ``threads`` threads (seconds).

    Raises:
        RuntimeError: the kernel's output differs from the reference."""
    import numpy as np
    import tvm

    from benchmarks.peak import measure_parallel_launch

    with np.load(expected_path) as z:
        expected = {int(k[3:]): z[k] for k in z.files}
    dev = tvm.cpu()
    mod = tvm.runtime.load_module(library)
    tensors, _spacers = suite.placed_tensors(suite.poisoned_arguments(args_path, expected), dev, 0)
    mod["main"](*tensors)
    bad = suite.output_problems(tensors, expected)
    if bad:
        raise RuntimeError(f"{library}: {'; '.join(bad)}")
    timer = mod.time_evaluator("main", dev, number=calls, repeat=repeats)
    series = list(timer(*tensors).results)
    return series, measure_parallel_launch(threads)


def one_case(spec: str, a, mode: suite.Mode, work: Path) -> list[dict]:  # noqa: ANN001
    """One row per process: ``a.processes`` for each of the parallel and the serial kernel of
    ``a.point`` on case ``spec``, alternating."""
    import numpy as np

    from heronlike.measure import run_in_subprocess

    case = suite.case_compute(spec, "int8", mode)
    space = generate_space(case.compute, case.target)
    parallel = given_point(a.point, space)
    ways = {"parallel": parallel, "serial": serial_twin(parallel, space)}
    kernels, expected = suite.build_programs(
        {name: space.program(p) for name, p in ways.items()}, space, work
    )
    args_path, exp_path = work / "args.npz", work / "expected.npz"
    np.savez(args_path, **{f"arg{i}": x for i, x in enumerate(kernels["parallel"][1])})
    np.savez(exp_path, **{f"arg{i}": x for i, x in expected.items()})
    threads = space.target.cores
    rows = []
    for process in range(2 * a.processes):
        name = ("parallel", "serial")[process % 2]
        series, launch = run_in_subprocess(
            series_worker,
            str(kernels[name][0]),
            str(args_path),
            str(exp_path),
            a.calls,
            a.repeats,
            threads,
            timeout_s=600,
            num_threads=threads,
        )
        us = [s * 1e6 for s in series]
        steady = us[SETTLE:]
        row = dict(
            case=case.name,
            shape_run=suite._params_text(case.params),
            target=space.target.key,
            point=a.point,
            kernel=name,
            process=process // 2,
            first_us=statistics.median(us[:FIRST]),
            steady_us=statistics.median(steady),
            steady_low_us=min(steady),
            steady_high_us=max(steady),
            launch_us=launch * 1e6,
            calls=a.calls,
            repeats=a.repeats,
            threads=threads,
            **machine_stamp(),
        )
        rows.append(row)
        print(f"[{case.name}] {name:8s} process {process // 2:2d}: first {row['first_us']:5.2f} "
              f"steady {row['steady_us']:5.2f} ({row['steady_low_us']:.2f}-"
              f"{row['steady_high_us']:.2f}) us, launch {row['launch_us']:.2f} us",
              flush=True)  # fmt: skip
    for name in ways:
        got = sorted(r["steady_us"] for r in rows if r["kernel"] == name)
        print(f"[{case.name}] {name}: steady medians {' '.join(f'{v:.2f}' for v in got)} us")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--point", default=DEFAULT_POINT, help="the tile, knobs by suffix")
    p.add_argument("--processes", type=int, default=12, help="fresh processes per kernel")
    p.add_argument("--calls", type=int, default=1000, help="calls per measurement")
    p.add_argument("--repeats", type=int, default=200, help="measurements per process")
    a = p.parse_args(argv)
    if a.repeats <= SETTLE:
        p.error(f"--repeats must exceed {SETTLE}")
    suite.run_per_case(a, one_case, "process_modes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
