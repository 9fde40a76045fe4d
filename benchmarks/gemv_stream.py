"""A matrix-vector product's streaming order against DL Boost's micro-kernel order, point by point.

A GEMV ``y = A x`` reads each element of its matrix once: no output tile reuses it
(:attr:`heronlike.dag.Stage.streamed_reads`). DL Boost tiles it as every other stage: the
micro-kernel order ``S0 S1 R0 R1 S2 T`` (the register tile of ``|S2|`` row blocks innermost, so
``|S2|`` runs of the matrix, a whole row block apart, are read at once) into a write-back buffer
copied out at ``S0`` or ``S1`` (the knob ``<stage>.write_back.pos``). :class:`StreamingTarget`
is DL Boost with the two rule options it leaves off: the output kept as the accumulator (no
write-back; :class:`~heronlike.rules.cache_stage.AddCacheStage`'s ``streamed=False``) and the
knob ``<stage>.stream`` (:class:`~heronlike.rules.tiling.MultiLevelTiling`'s ``stream_order``):
0 keeps the micro-kernel order, 1 orders the tile ``S0 S1 R0 S2 R1 T`` (``R1`` inside the tile:
the packed matrix read in one contiguous run per row block, as MetaSchedule's best GV5 kernel
reads it).

For each case: ``--points`` distinct random points of the streaming space (RandSAT,
``--seed``); the split factors and unroll depth of each built three ways: by DL Boost (once per
write-back position, the faster kept: "dlboost"), and with the knob at 0 ("micro") and at 1
("stream"); every output checked against the reference; all kernels timed by the suite's
harness (:func:`benchmarks.suite.time_tvm_kernels`: fresh processes, the kernels in turn,
``--rounds`` rounds, the median of all samples). One row per case: the geomean over the points of
``dlboost_us / stream_us`` and of ``dlboost_us / micro_us``, the first's smallest and largest
value, each way's best point and how many points lie within 10 % of the best of all; and one row
per ``--point`` (a point named by its split factors and unroll depth, timed in the same
processes; left out of a case it is no point of). "dlboost" takes the faster of two kernels per
point, which favours it by about the harness's noise.

With ``--tune-seeds``, the two rule sets are compared in tunes instead: each case tuned with
either at the suite's quick budget (``--trials``, ``--batch``: 16 trials in batches of 8) once
per seed, each in its own records file, and every tune's best kernel timed by the same harness
in the same processes. One row per case and seed, the geomean of ``dlboost_us / streaming_us``
printed per case.

    python benchmarks/gemv_stream.py                       # GV1..GV5 (int8, DL Boost)
    python benchmarks/gemv_stream.py --cases GV5 --point S0=8,S1=1,S2=8,R0=8,R1=32,unroll=512
    python benchmarks/gemv_stream.py --tune-seeds 0,1,2    # in tunes
    python benchmarks/gemv_stream.py --cases GV2 --alias --point <knobs, as above>

With ``--alias``, each ``--point`` is built by DL Boost and streamed, and both are timed with the
output placed 0, 64, 256, 1024 and 2048 bytes past the vector's offset in a 4 KiB page (one
buffer holds all three arguments; ``time_evaluator`` in ``--rounds`` fresh processes): a kernel
that updates its output in memory while it loads the vector slows down where the two alias.

Writes ``benchmarks/results/gemv_stream-<cpu>-<date>.csv`` (``gemv_stream_tuned-…``,
``gemv_stream_alias-…``).
"""

from __future__ import annotations

import copy
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import suite  # noqa: E402
from heronlike.dla_targets.dlboost import DLBoostTarget  # noqa: E402
from heronlike.host import machine_stamp  # noqa: E402
from heronlike.rules.base import Rule  # noqa: E402
from heronlike.rules.cache_stage import AddCacheStage  # noqa: E402
from heronlike.rules.tiling import MultiLevelTiling  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import Space, generate_space  # noqa: E402

DEFAULT_CASES = ("GV1", "GV2", "GV3", "GV4", "GV5")


#: the streaming order: the register tile above ``R1`` (MetaSchedule's ``SSRSRS`` without its
#: innermost spatial level)
STREAM_ORDER = ("S0", "S1", "R0", "S2", "R1", "T")


class StreamingTarget(DLBoostTarget):
    """The DL Boost / ``llvm`` target with the rule options it leaves off: a stage that streams
    its matrix keeps its output as the accumulator and gets the order knob ``<stage>.stream``
    (:data:`STREAM_ORDER`); every other stage is tiled as by DL Boost."""

    def schedule_rules(self) -> Sequence[Rule]:
        rules = []
        for rule in super().schedule_rules():
            if isinstance(rule, MultiLevelTiling | AddCacheStage):
                rule = copy.copy(rule)
                if isinstance(rule, MultiLevelTiling):
                    rule.stream_order = STREAM_ORDER
                else:
                    rule.streamed = False
            rules.append(rule)
        return rules


def spaces(compute: object, target: str) -> tuple[Space, Space]:
    """``(streaming, dlboost)`` spaces of ``compute`` on ``target`` (:class:`StreamingTarget`'s
    rules for the first)."""
    dlboost = generate_space(compute, target)
    return generate_space(compute, StreamingTarget(**dlboost.target.options)), dlboost


def _knob(space: Space, suffix: str) -> str | None:
    found = [k for k in space.csp.knobs if k.endswith(suffix)]
    return found[0] if len(found) == 1 else None


def three_ways(point: dict[str, int], streaming: Space, dlboost: Space) -> dict[str, dict]:
    """``point``'s split factors and unroll depth as ``"micro"`` and ``"stream"`` (the
    streaming space's knob at 0 and 1) and as ``"dlboost S0"``, ``"dlboost S1"`` (DL Boost's
    rules, once per write-back position): name -> assignment; empty when the spaces lack either
    knob or the factors name no point in one of them."""
    pick, position = _knob(streaming, ".stream"), _knob(dlboost, ".write_back.pos")
    if pick is None or position is None:
        return {}
    shared = {k: point[k] for k in streaming.csp.knobs if k != pick}
    if set(shared) | {position} != set(dlboost.csp.knobs):
        return {}
    out = {}
    for name, space, extra in (
        ("micro", streaming, {pick: 0}),
        ("stream", streaming, {pick: 1}),
        *((f"dlboost S{p}", dlboost, {position: p}) for p in dlboost.csp.candidates(position)),
    ):
        a = space.csp.complete({**shared, **extra})
        if a is None:
            return {}
        out[name] = a
    return out


def given_point(text: str, space: Space) -> dict[str, int]:
    """The point of ``space`` that ``text`` names by knob suffix and value
    (``"S0=8,S1=1,S2=8,R0=8,R1=32,unroll=512"``; the knob ``stream``, if left out, is 0; any
    other knob left out must be fixed by the rest).

    Raises:
        ValueError: a suffix matches no knob or several, or the values name no point."""
    knobs = {k: 0 for k in space.csp.knobs if k.endswith(".stream")}
    for item in text.split(","):
        suffix, _, value = item.partition("=")
        found = [k for k in space.csp.knobs if k.endswith("." + suffix.strip())]
        if len(found) != 1:
            raise ValueError(f"{suffix!r} names {len(found)} knobs of {space.csp.knobs}")
        knobs[found[0]] = int(value)
    point = space.csp.complete(knobs)
    if point is None:
        raise ValueError(f"{text} is no point of the space")
    return point


def one_case(spec: str, a, mode: suite.Mode, work: Path) -> list[dict]:  # noqa: ANN001
    case = suite.case_compute(spec, "int8", mode)
    streaming, dlboost = spaces(case.compute, case.target)
    if str(streaming.template) == str(dlboost.template):
        print(f"[{case.name}] no stage streams its matrix: nothing to compare", flush=True)
        return []
    sampled = RandSAT(streaming.csp, seed=a.seed).sample(a.points)
    points = {f"p{i}": pt for i, pt in enumerate(sampled)}
    for i, text in enumerate(a.point or ()):
        try:
            points[f"g{i}"] = given_point(text, streaming)
        except ValueError as err:  # a point of another shape
            print(f"[{case.name}] --point {text}: {err}", flush=True)
    programs: dict[str, object] = {}
    kept: list[str] = []
    for name, point in points.items():
        ways = three_ways(point, streaming, dlboost)
        if ways:
            kept.append(name)
            for way, assignment in ways.items():
                space = dlboost if way.startswith("dlboost") else streaming
                programs[f"{name}_{way}"] = space.program(assignment)
    if not programs:
        raise RuntimeError(f"{case.name}: no point of the streaming space is one of DL Boost")
    # both spaces take the same packed layout: DL Boost's serves both
    us = {k: v * 1e6 for k, v in suite.time_programs(programs, dlboost, a.rounds, work).items()}
    old = {p: min(v for k, v in us.items() if k.startswith(f"{p}_dlboost")) for p in kept}
    micro = {p: us[f"{p}_micro"] for p in kept}
    new = {p: us[f"{p}_stream"] for p in kept}
    best = min([*old.values(), *micro.values(), *new.values()])
    for p in kept:
        print(f"  {p:<4s} dlboost {old[p]:8.3f} us  micro {micro[p]:8.3f} us  stream "
              f"{new[p]:8.3f} us  {old[p] / new[p]:5.2f}x", flush=True)  # fmt: skip
    groups = {f"{a.points} random": [p for p in kept if p.startswith("p")]}
    for i, text in enumerate(a.point or ()):
        groups[text] = [f"g{i}"] if f"g{i}" in kept else []
    rows = []
    for label, names in groups.items():
        if not names:
            continue
        ratios = [old[p] / new[p] for p in names]
        row = dict(
            case=case.name,
            op=case.op,
            shape_run=suite._params_text(case.params),
            target=dlboost.target.key,
            points=label,
            seed=a.seed,
            geomean_speedup=suite.geomean(ratios),
            min_speedup=min(ratios),
            max_speedup=max(ratios),
            geomean_micro_speedup=suite.geomean([old[p] / micro[p] for p in names]),
            best_dlboost_us=min(old[p] for p in names),
            best_micro_us=min(micro[p] for p in names),
            best_stream_us=min(new[p] for p in names),
            within10pct_dlboost=sum(old[p] <= 1.1 * best for p in names),
            within10pct_micro=sum(micro[p] <= 1.1 * best for p in names),
            within10pct_stream=sum(new[p] <= 1.1 * best for p in names),
            rounds=a.rounds,
            threads=dlboost.target.cores,
            **machine_stamp(),
        )
        rows.append(row)
        print(
            f"[{case.name}] {label}: stream {row['geomean_speedup']:.2f}x DL Boost (geomean; "
            f"{row['min_speedup']:.2f}x to {row['max_speedup']:.2f}x), micro "
            f"{row['geomean_micro_speedup']:.2f}x; best {row['best_dlboost_us']:.3f} / "
            f"{row['best_micro_us']:.3f} / {row['best_stream_us']:.3f} us",
            flush=True,
        )
    return rows


def tuned_case(spec: str, a, mode: suite.Mode, work: Path) -> list[dict]:  # noqa: ANN001
    """One row per seed of ``a.tune_seeds``: the best kernel of a tune of ``spec`` with DL Boost's
    rules and with :class:`StreamingTarget`'s, at ``a.trials`` trials in batches of ``a.batch``,
    both timed by the harness in turn."""
    import heronlike

    case = suite.case_compute(spec, "int8", mode)
    streaming, dlboost = spaces(case.compute, case.target)
    if str(streaming.template) == str(dlboost.template):
        print(f"[{case.name}] no stage streams its matrix: nothing to compare", flush=True)
        return []
    arrays, expected = _arrays(dlboost)
    pick = _knob(streaming, ".stream")
    kernels: dict[str, tuple[Path, list]] = {}
    tuned: dict[str, tuple[float, int | None]] = {}
    for seed in (int(x) for x in a.tune_seeds.split(",")):
        for side, target in (("streaming", streaming.target), ("dlboost", dlboost.target)):
            name = f"s{seed}_{side}"
            (work / name).mkdir()
            r = heronlike.tune(
                case.compute,
                target,
                trials=a.trials,
                batch_size=a.batch,
                seed=seed,
                records=work / name / "records.sqlite",
                work_dir=work / name,
                finalists=suite.FINALISTS,
            )
            if r.kernel is None or not r.correct or not r.latency_s:
                raise RuntimeError(f"{case.name} {name}: no correct kernel")
            so = r.kernel.export_library(work / name / "best.so")
            kernels[name] = (so, r.space.prepare_args(arrays))
            tuned[name] = (r.latency_s * 1e6, (r.assignment or {}).get(pick) if pick else None)
            print(f"[{case.name}] seed {seed} {side}: {tuned[name][0]:.3f} us", flush=True)
    us = {k: v[0] * 1e6 for k, v in _timed(kernels, expected, work, dlboost, a.rounds).items()}
    rows = []
    for seed in sorted({int(k[1:].split("_")[0]) for k in us}):
        new, old = us[f"s{seed}_streaming"], us[f"s{seed}_dlboost"]
        rows.append(
            dict(
                case=case.name,
                op=case.op,
                shape_run=suite._params_text(case.params),
                target=dlboost.target.key,
                seed=seed,
                trials=a.trials,
                batch=a.batch,
                dlboost_us=old,
                streaming_us=new,
                speedup=old / new,
                streaming_picked=tuned[f"s{seed}_streaming"][1],
                dlboost_tuning_us=tuned[f"s{seed}_dlboost"][0],
                streaming_tuning_us=tuned[f"s{seed}_streaming"][0],
                rounds=a.rounds,
                threads=dlboost.target.cores,
                **machine_stamp(),
            )
        )
        print(f"  seed {seed}: dlboost {old:8.3f} us  streaming {new:8.3f} us  {old / new:5.2f}x "
              f"(stream={rows[-1]['streaming_picked']})", flush=True)  # fmt: skip
    print(
        f"[{case.name}] tuned {len(rows)} times: streaming "
        f"{suite.geomean([r['speedup'] for r in rows]):.2f}x DL Boost (geomean)",
        flush=True,
    )
    return rows


#: ``--alias``: where the output starts relative to the vector, modulo 4 KiB (bytes)
ALIAS_OFFSETS = (0, 64, 256, 1024, 2048)


def alias_worker(
    kernels: list[str], args_path: str, expected: Any, offsets: list[int]
) -> list[list[float]]:
    """Harness child of ``--alias``: the arguments of ``args_path`` (``x``, ``A``, ``y``) placed
    in one buffer, ``x`` at a page start, ``A`` on pages of its own, ``y`` at each of
    ``offsets`` (bytes past a page start); every kernel timed at each placement
    (``time_evaluator``: 20 measurements of 200 calls, the median), its output compared with
    ``expected`` (an array of ``y``'s shape) first. Returns seconds per call,
    ``[offset][kernel]``.

    Raises:
        RuntimeError: a kernel's output differs from ``expected``."""
    import statistics

    import numpy as np
    import tvm

    with np.load(args_path) as z:
        x, A, y = (z[f"arg{i}"] for i in range(3))
    page = 4096
    a_at = -(-x.nbytes // page) * page  # A on the pages after x's
    y_page = a_at + -(-A.nbytes // page) * page  # y on the page after A's
    big = np.zeros(y_page + page + y.nbytes + 2 * page, np.uint8)
    base = (-big.ctypes.data) % page

    def place(a: np.ndarray, at: int) -> np.ndarray:
        view = big[base + at : base + at + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        return view

    dev = tvm.cpu()
    mods = [tvm.runtime.load_module(k) for k in kernels]
    inputs = [tvm.runtime.from_dlpack(place(x, 0)), tvm.runtime.from_dlpack(place(A, a_at))]
    out = []
    for off in offsets:  # only y moves
        y_view = place(y, y_page + off)
        tensors = [*inputs, tvm.runtime.from_dlpack(y_view)]
        row = []
        for kernel, mod in zip(kernels, mods, strict=True):
            y_view[...] = 0x5A5A5A5A  # poison: the kernel must write every output
            mod["main"](*tensors)
            if not np.array_equal(y_view, expected):
                raise RuntimeError(f"{kernel}: wrong result with y at +{off} bytes")
            timer = mod.time_evaluator("main", dev, number=200, repeat=20)
            row.append(statistics.median(timer(*tensors).results))
        out.append(row)
    return out


def alias_case(spec: str, a, mode: suite.Mode, work: Path) -> list[dict]:  # noqa: ANN001
    """One row per ``--point`` and output offset: the point built by DL Boost (each write-back
    position) and streamed (the knob at 1), timed with the output ``offset`` bytes past the
    vector's page offset, in ``a.rounds`` fresh processes (the median of their medians)."""
    import numpy as np

    from heronlike.measure import run_in_subprocess

    case = suite.case_compute(spec, "int8", mode)
    streaming, dlboost = spaces(case.compute, case.target)
    rows = []
    for text in a.point or ():
        try:
            ways = three_ways(given_point(text, streaming), streaming, dlboost)
        except ValueError as err:
            print(f"[{case.name}] --point {text}: {err}", flush=True)
            continue
        ways.pop("micro")
        programs = {
            name: (dlboost if name.startswith("dlboost") else streaming).program(w)
            for name, w in ways.items()
        }
        kernels, expected = suite.build_programs(programs, dlboost, work)
        args = work / "alias_args.npz"
        first = next(iter(kernels.values()))[1]
        np.savez(args, **{f"arg{i}": x for i, x in enumerate(first)})
        names = list(kernels)
        runs = [
            run_in_subprocess(
                alias_worker,
                [str(kernels[n][0]) for n in names],
                str(args),
                expected[2],
                list(ALIAS_OFFSETS),
                timeout_s=600,
                num_threads=dlboost.target.cores,
            )
            for _ in range(a.rounds)
        ]
        for i, off in enumerate(ALIAS_OFFSETS):
            us = {
                n: statistics.median(run[i][j] for run in runs) * 1e6 for j, n in enumerate(names)
            }
            old = min(v for n, v in us.items() if n.startswith("dlboost"))
            rows.append(
                dict(
                    case=case.name,
                    shape_run=suite._params_text(case.params),
                    target=dlboost.target.key,
                    point=text,
                    y_minus_x_mod_4k=off,
                    dlboost_us=old,
                    stream_us=us["stream"],
                    speedup=old / us["stream"],
                    processes=a.rounds,
                    threads=dlboost.target.cores,
                    **machine_stamp(),
                )
            )
            print(f"[{case.name}] y - x = {off:4d} mod 4096: dlboost {old:7.3f} us  "
                  f"stream {us['stream']:7.3f} us", flush=True)  # fmt: skip
    return rows


def _arrays(space: Space) -> tuple[list, dict]:
    """The random inputs (seed 0, in their logical layout) and numpy's outputs (by argument
    position) that :func:`benchmarks.suite.build_programs` times a space's kernels on."""
    import numpy as np

    from heronlike.reference import random_inputs, reference_outputs

    arrays = random_inputs(space.logical, np.random.default_rng(0))
    return arrays, reference_outputs(space.logical, arrays)


def _timed(kernels: dict, expected: dict, work: Path, space: Space, rounds: int) -> dict:
    """:func:`benchmarks.suite.time_tvm_kernels` on ``kernels``, every one correct.

    Raises:
        RuntimeError: a kernel failed or differs from the reference."""
    results = suite.time_tvm_kernels(kernels, expected, work, space.target.cores, rounds)
    for name, (seconds, correct, message) in results.items():
        if seconds is None or not correct:
            raise RuntimeError(f"{name}: {message or 'wrong result'}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--points", type=int, default=16, help="random points per case")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3, help="harness rounds")
    p.add_argument(
        "--point",
        action="append",
        help="a point to add by knob suffix, e.g. S0=8,S1=1,S2=8,R0=8,R1=32,unroll=512 (a row "
        "of its own; repeatable)",
    )
    p.add_argument("--tune-seeds", default=None, help="compare tunes, one per seed (0,1,2)")
    p.add_argument(
        "--alias",
        action="store_true",
        help="time each --point with the output at several offsets from the vector (mod 4 KiB)",
    )
    a = p.parse_args(argv)
    if a.alias:
        suite.run_per_case(a, alias_case, "gemv_stream_alias")
    elif a.tune_seeds:
        suite.run_per_case(a, tuned_case, "gemv_stream_tuned")
    else:
        suite.run_per_case(a, one_case, "gemv_stream")
    return 0


if __name__ == "__main__":
    sys.exit(main())
