"""``target="llvm"`` on float32 workloads a TVM user tunes: heronlike vs TVM's unscheduled
build vs MetaSchedule at equal trials, every kernel timed by one harness.

Per case, one after the other (nothing overlaps):

1. heronlike: ``heronlike.tune(compute, "llvm", trials=T)`` (VNNI stages where the CPU has it,
   the general rule set for the rest; on a CPU without AVX512-VNNI every stage is general);
   its best kernel is exported as a shared library. Weights it re-lays out
   (``PackVectorOperand``) are packed once, outside the timing.
2. TVM's unscheduled build: ``tvm.compile`` of the compute's default schedule for the same
   TVM target (``-mcpu``, ``-num-cores``), which is what a TVM user gets without tuning.
3. MetaSchedule (:class:`benchmarks.metaschedule.MetaScheduleWorker`): the same compute (plain
   weights), the same trial budget, its default rules for the target.

**One harness** times the three kernels once all three are built: one
:class:`heronlike.measure.LocalRunner` (one worker process, ``TVM_NUM_THREADS`` = the target's
cores, ``time_evaluator`` with ``number=10, repeat=20, min_repeat_ms=10``, the median of the
repeats, warm caches: the inputs stay in place between calls), in ``--rounds`` interleaved
rounds (:func:`time_interleaved`: each round times every kernel, the order rotated; a column is
the median over rounds, ``ratio_to_ms_lo``/``_hi`` the range of the per-round ratios), on the
same input arrays, each output checked against the reference (``numpy.einsum`` in float64 for a
single multiply-accumulate stage, otherwise TVM's unscheduled build on the generic ``llvm``
target; tolerance 1e-3 as in ``tune``). Timing each kernel right after its own tune, minutes
apart, let a shared machine's load change between the columns (a 2-core Zen 3 shared with
other jobs showed ratios off by up to 2x).

Writes ``benchmarks/results/llvm_float32[-quick]-<cpu>-<date>.csv`` (the CPU model from
``/proc/cpuinfo`` and the date are also columns) and prints a table with geometric means.

    python benchmarks/llvm_float32.py                       # every case, 64 trials per tuner
    python benchmarks/llvm_float32.py --quick --cases matmul,softmax
    python benchmarks/llvm_float32.py --cases conv2d --trials 32 --no-metaschedule
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from heronlike.host import cpu_model, machine_slug

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make ``benchmarks.*`` importable
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.csv_rows import write_rows  # noqa: E402
from benchmarks.suite import (  # noqa: E402
    FINAL_NUMBER,
    FINAL_REPEAT,
    MIN_REPEAT_MS,
    TRIAL_NUMBER,
    TRIAL_REPEAT,
    _fmt,
    _short,
    geomean,
)

DEFAULT_TRIALS = 64
QUICK_TRIALS = 8
DEFAULT_ROUNDS = 5


# ------------------------------------------------------------------------------------------------
# workloads: the heronlike.ops builders where they exist, plain TE for the rest


def softmax(M: int, N: int) -> list[Any]:
    """Row softmax in three reductions/maps: ``mx = max_j X``, ``E = exp(X - mx)``,
    ``S = sum_j E``, ``Y = E / S``. ``[X (M, N), Y (M, N)]``."""
    from tvm import te

    X = te.placeholder((M, N), "float32", name="X")
    k = te.reduce_axis((0, N), name="k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="mx")
    E = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="E")
    k2 = te.reduce_axis((0, N), name="k2")
    S = te.compute((M,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    Y = te.compute((M, N), lambda i, j: E[i, j] / S[i], name="Y")
    return [X, Y]


def layer_norm(M: int, N: int, eps: float = 1e-5) -> list[Any]:
    """Layer norm over the last axis: mean and mean of squares (two reductions), then
    ``(X - mean) * rsqrt(var + eps) * gamma + beta``. ``[X, gamma, beta, Y]``."""
    from tvm import te

    X = te.placeholder((M, N), "float32", name="X")
    gamma = te.placeholder((N,), "float32", name="gamma")
    beta = te.placeholder((N,), "float32", name="beta")
    k = te.reduce_axis((0, N), name="k")
    s = te.compute((M,), lambda i: te.sum(X[i, k], axis=k), name="s")
    k2 = te.reduce_axis((0, N), name="k2")
    sq = te.compute((M,), lambda i: te.sum(X[i, k2] * X[i, k2], axis=k2), name="sq")

    def norm(i: Any, j: Any) -> Any:
        mean = s[i] / N
        var = sq[i] / N - mean * mean
        return (X[i, j] - mean) * te.rsqrt(var + eps) * gamma[j] + beta[j]

    Y = te.compute((M, N), norm, name="Y")
    return [X, gamma, beta, Y]


def conv2d_nchw(N: int, CI: int, H: int, W: int, CO: int, K: int, pad: int) -> list[Any]:
    """TOPI's ``conv2d_nchw`` (stride 1): ``[X (N, CI, H, W), W (CO, CI, K, K), Y]``."""
    from tvm import te, topi

    X = te.placeholder((N, CI, H, W), "float32", name="X")
    Wt = te.placeholder((CO, CI, K, K), "float32", name="W")
    return [X, Wt, topi.nn.conv2d_nchw(X, Wt, 1, pad, 1)]


def conv2d_bias_relu(N: int, H: int, W: int, CI: int, CO: int, K: int, pad: int) -> list[Any]:
    """NHWC conv2d (:func:`heronlike.ops.c2d`) + per-channel bias + ReLU, one compute."""
    from tvm import te

    from heronlike import ops

    X, Wt, Y = ops.c2d(N, H, W, CI, CO, K, K, 1, pad, dtype="float32")
    bias = te.placeholder((CO,), "float32", name="bias")
    Z = te.compute(Y.shape, lambda n, h, w, c: te.max(Y[n, h, w, c] + bias[c], 0.0), name="Z")
    return [X, Wt, bias, Z]


def _op(name: str) -> Callable[..., list[Any]]:
    def build(*args: int) -> list[Any]:
        from heronlike import ops

        return getattr(ops, name)(*args, dtype="float32")

    return build


#: case -> (builder, full arguments, --quick arguments)
WORKLOADS: dict[str, tuple[Callable[..., list[Any]], tuple[int, ...], tuple[int, ...]]] = {
    "matmul": (_op("gemm"), (512, 512, 512), (64, 64, 64)),
    "bmm": (_op("bmm"), (12, 128, 128, 64), (4, 32, 32, 32)),
    "conv1d": (_op("c1d"), (1, 256, 64, 64, 3, 1, 1, 1), (1, 32, 16, 16, 3, 1, 1, 1)),
    "conv2d": (_op("c2d"), (1, 28, 28, 64, 64, 3, 3, 1, 1, 1), (1, 8, 8, 16, 16, 3, 3, 1, 1, 1)),
    "conv2d_nchw": (conv2d_nchw, (1, 64, 28, 28, 64, 3, 1), (1, 16, 8, 8, 16, 3, 1)),
    "conv3d": (
        _op("c3d"),
        (1, 8, 14, 14, 32, 32, 3, 3, 3, 1, 1, 1),
        (1, 4, 6, 6, 8, 16, 3, 3, 3, 1, 1, 1),
    ),
    "depthwise": (
        _op("depthwise_c2d"),
        (1, 56, 56, 64, 3, 3, 1, 1, 1),
        (1, 8, 8, 16, 3, 3, 1, 1, 1),
    ),
    "t2d": (
        _op("t2d"),
        (1, 14, 14, 64, 32, 3, 3, 2, 1, 1, 1),
        (1, 6, 6, 8, 16, 3, 3, 2, 1, 1, 1),
    ),
    "softmax": (softmax, (256, 1024), (32, 128)),
    "layer_norm": (layer_norm, (256, 1024), (32, 128)),
    "conv2d_bias_relu": (conv2d_bias_relu, (1, 28, 28, 64, 64, 3, 1), (1, 8, 8, 16, 16, 3, 1)),
}


# ------------------------------------------------------------------------------------------------
# one case


#: the kernels of a case, in the order a round times them
KERNELS = ("heronlike", "unscheduled", "ms")


def time_interleaved(
    runner: Any, kernels: dict[str, tuple[Path, Path, Path]], rounds: int
) -> dict[str, Any]:
    """Time the kernels of one case in ``rounds`` interleaved rounds.

    Each round runs every kernel once through ``runner`` (its output checked, then
    ``time_evaluator``'s median), the order rotated by one kernel per round; a kernel's latency
    is the median over the rounds. On a machine shared with other work, load that changes
    during a case then slows every column alike instead of the one measured at that moment,
    so the ratios hold where the absolute times do not.

    Args:
        kernels: column (of :data:`KERNELS`) -> (shared library, args ``.npz``, expected
            ``.npz``).
        rounds: at least 1.

    Returns:
        ``<column>_s`` (seconds, median over rounds) and ``<column>_status`` (``"ok"`` or the
        first failure) per column, and ``ratio_to_ms_lo`` / ``ratio_to_ms_hi``, the smallest
        and largest per-round ratio of MetaSchedule's latency to heronlike's.
    """
    import statistics

    from heronlike.measure import RunInput

    names = [k for k in KERNELS if k in kernels]
    lat: dict[str, list[float]] = {k: [] for k in names}
    status = dict.fromkeys(names, "ok")
    per_round: list[dict[str, float]] = []
    for r in range(rounds):
        order = [k for k in names[r % len(names) :] + names[: r % len(names)] if status[k] == "ok"]
        inputs = [RunInput(*(str(p) for p in kernels[k]), 1e-3) for k in order]
        got: dict[str, float] = {}
        for k, run in zip(order, runner.run(inputs), strict=True):
            if run.ok:
                got[k] = run.latency_s
                lat[k].append(run.latency_s)
            else:
                status[k] = f"{run.error_kind}: {run.error_msg}"[:300]
        per_round.append(got)
    out: dict[str, Any] = {}
    for k in names:
        ok = status[k] == "ok" and lat[k]
        out[f"{k}_s"] = statistics.median(lat[k]) if ok else None
        out[f"{k}_status"] = status[k]
    ratios = [g["ms"] / g["heronlike"] for g in per_round if "ms" in g and "heronlike" in g]
    if ratios:
        out["ratio_to_ms_lo"], out["ratio_to_ms_hi"] = min(ratios), max(ratios)
    return out


def run_case(name: str, args: argparse.Namespace, tgt: Any, runner: Any, ms: Any, out: Path):
    """Every measurement of one case, as one CSV row."""
    import numpy as np
    import tvm

    import heronlike
    from heronlike.dag import ComputeDAG
    from heronlike.reference import random_inputs, reference_outputs, save_npz

    build, full, quick = WORKLOADS[name]
    shape = quick if args.quick else full
    compute = build(*shape)
    dag = ComputeDAG.from_compute(compute)
    work = out / name
    work.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {
        "case": name,
        "shape": ",".join(map(str, shape)),
        "gflop": dag.flop() / 1e9,
        "trials": args.trials,
        "rounds": args.rounds,
    }
    arrays = random_inputs(dag, np.random.default_rng(args.seed))
    expected = reference_outputs(dag, arrays)
    plain_args = save_npz(work / "args.npz", {f"arg{i}": a for i, a in enumerate(arrays)})
    plain_exp = save_npz(work / "expected.npz", {f"arg{i}": a for i, a in expected.items()})
    kernels: dict[str, tuple[Path, Path, Path]] = {}

    # 1. heronlike
    print(f"[{name}] {row['shape']}: heronlike ({args.trials} trials) ...", flush=True)
    t0 = time.perf_counter()
    try:
        r = heronlike.tune(
            compute,
            args.target,
            trials=args.trials,
            seed=args.seed,
            records=out / "records.sqlite",
            work_dir=work / "heronlike",
            number=TRIAL_NUMBER,
            repeat=TRIAL_REPEAT,
            min_repeat_ms=MIN_REPEAT_MS,
            final_repeat=FINAL_REPEAT,
        )
        row["heronlike_tune_s"] = time.perf_counter() - t0
        row["heronlike_valid"] = f"{r.valid}/{r.trials_run}"
        if r.kernel is None:
            row["heronlike_status"] = "no valid candidate"
        else:
            space = r.kernel.space
            packed = space.prepare_args(arrays)
            want = space.prepare_args([expected.get(i, a) for i, a in enumerate(arrays)])
            outs = {i for i, p in enumerate(space.logical.params) if p.name in dag.outputs}
            h_args = save_npz(work / "h_args.npz", {f"arg{i}": a for i, a in enumerate(packed)})
            h_exp = save_npz(work / "h_expected.npz", {f"arg{i}": want[i] for i in outs})
            so = r.kernel.export_library(work / "heronlike.so")
            kernels["heronlike"] = (so, h_args, h_exp)
            row["heronlike_packed"] = ",".join(sorted(space.packed)) or "-"
    except heronlike.HeronlikeError as err:
        row["heronlike_status"] = f"error: {_short(err)}"

    # 2. TVM's unscheduled build, same TVM target
    print(f"[{name}] unscheduled build ...", flush=True)
    try:
        lib = tvm.compile(
            tvm.IRModule({"main": dag.func}), target=tvm.target.Target(tgt.tvm_target())
        )
        so = work / "unscheduled.so"
        lib.export_library(str(so))
        kernels["unscheduled"] = (so, plain_args, plain_exp)
    except Exception as err:  # noqa: BLE001 - a failing baseline is data
        row["unscheduled_status"] = f"error: {_short(err)}"

    # 3. MetaSchedule, same trials, plain compute
    if ms is None:
        row["ms_status"] = "not run (--no-metaschedule)"
    else:
        print(f"[{name}] MetaSchedule ({args.trials} trials) ...", flush=True)
        res = ms.tune(
            tvm.IRModule({"main": dag.func}),
            tgt.tvm_target(),
            trials=args.trials,
            work_dir=work / "metaschedule",
            seed=args.seed,
            trials_per_iter=min(32, args.trials),
            number=TRIAL_NUMBER,
            repeat=TRIAL_REPEAT,
            min_repeat_ms=MIN_REPEAT_MS,
        )
        row["ms_tune_s"] = res.wall_s
        row["ms_valid"] = f"{res.valid}/{res.trials_run}"
        if res.artifact_path is None:
            row["ms_status"] = f"error: {res.error}"
        else:
            kernels["ms"] = (Path(res.artifact_path), plain_args, plain_exp)

    # 4. time the kernels that came out, interleaved
    print(f"[{name}] timing {', '.join(kernels)} in {args.rounds} rounds ...", flush=True)
    row.update(time_interleaved(runner, kernels, args.rounds))

    h, u, m = row.get("heronlike_s"), row.get("unscheduled_s"), row.get("ms_s")
    row["speedup_vs_unscheduled"] = u / h if h and u else None
    row["ratio_to_ms"] = m / h if h and m else None  # > 1: heronlike faster
    print(f"[{name}] {_summary(row)}", flush=True)
    return row


def _summary(row: dict[str, Any]) -> str:
    def ms(key: str) -> str:
        v = row.get(key)
        return f"{v * 1e3:.4g} ms" if v else "-"

    return (
        f"heronlike {ms('heronlike_s')} ({row.get('heronlike_status')}), unscheduled "
        f"{ms('unscheduled_s')}, MetaSchedule {ms('ms_s')} ({row.get('ms_status')}); "
        f"x unscheduled {_fmt(row.get('speedup_vs_unscheduled'))}, "
        f"x MS {_fmt(row.get('ratio_to_ms'))}"
    )


# ------------------------------------------------------------------------------------------------
# output

COLUMNS = (
    "case", "shape", "gflop", "trials", "heronlike_ms", "unscheduled_ms", "ms_ms",
    "speedup_vs_unscheduled", "ratio_to_ms", "ratio_to_ms_lo", "ratio_to_ms_hi", "rounds",
    "heronlike_valid", "ms_valid",
    "heronlike_tune_s", "ms_tune_s", "heronlike_packed", "heronlike_status",
    "unscheduled_status", "ms_status", "target", "threads", "cpu", "date",
)  # fmt: skip


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """One row per case, :data:`COLUMNS` in order, each latency also in milliseconds."""

    def cells(row: dict[str, Any]) -> dict[str, Any]:
        ms = {f"{key}_ms": row[f"{key}_s"] * 1e3 if row.get(f"{key}_s") else None
              for key in ("heronlike", "unscheduled", "ms")}  # fmt: skip
        return {**row, **ms}

    write_rows(path, (cells(row) for row in rows), COLUMNS)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = ("case", "heronlike ms", "unscheduled ms", "MS ms", "x unsched", "x MS",
            "valid H", "valid MS", "tune s H/MS")  # fmt: skip
    lines = [head]
    for r in rows:
        lines.append(
            (
                r["case"],
                _fmt(r["heronlike_s"] * 1e3 if r.get("heronlike_s") else None),
                _fmt(r["unscheduled_s"] * 1e3 if r.get("unscheduled_s") else None),
                _fmt(r["ms_s"] * 1e3 if r.get("ms_s") else None),
                _fmt(r.get("speedup_vs_unscheduled")),
                _fmt(r.get("ratio_to_ms")),
                str(r.get("heronlike_valid", "-")),
                str(r.get("ms_valid", "-")),
                f"{_fmt(r.get('heronlike_tune_s'), 3)}/{_fmt(r.get('ms_tune_s'), 3)}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
    for key, what in (("speedup_vs_unscheduled", "unscheduled"), ("ratio_to_ms", "MetaSchedule")):
        n = sum(1 for r in rows if r.get(key))
        mean = _fmt(geomean([r.get(key) for r in rows]))
        print(f"geomean speed-up of heronlike over {what}: {mean} ({n} cases)")
    for r in rows:
        bad = [f"{k}: {r.get(k)}" for k in ("heronlike_status", "unscheduled_status", "ms_status")]
        bad = [b for b in bad if not b.endswith(": ok")]
        if bad:
            print(f"  {r['case']}: " + "; ".join(bad))


# ------------------------------------------------------------------------------------------------
# command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases", default=",".join(WORKLOADS), help="comma-separated: " + ", ".join(WORKLOADS)
    )
    p.add_argument("--quick", action="store_true", help=f"small shapes, {QUICK_TRIALS} trials")
    p.add_argument("--trials", type=int, default=None, help=f"per tuner (default {DEFAULT_TRIALS})")
    p.add_argument("--no-metaschedule", action="store_true", help="skip the MetaSchedule tunes")
    p.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help=f"interleaved timing rounds per case (default {DEFAULT_ROUNDS})",
    )
    p.add_argument("--target", default="llvm")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"), help="CSV folder")
    args = p.parse_args(argv)
    if args.trials is None:
        args.trials = QUICK_TRIALS if args.quick else DEFAULT_TRIALS
    if args.trials < 1:
        p.error("--trials must be at least 1")
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    args.case_list = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in args.case_list if c not in WORKLOADS]
    if unknown:
        p.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(WORKLOADS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import heronlike
    from benchmarks.metaschedule import MetaScheduleWorker
    from heronlike.measure import LocalRunner

    tgt = heronlike.get_target(args.target)
    tgt.check_host()
    cpu, date = cpu_model(), time.strftime("%Y-%m-%d")
    stem = f"llvm_float32{'-quick' if args.quick else ''}-{machine_slug()}-{date}"
    results = Path(args.out)
    results.mkdir(parents=True, exist_ok=True)
    csv_path = results / f"{stem}.csv"
    work = REPO_ROOT / "benchmarks" / "out" / f"{stem}-{time.strftime('%H%M%S')}"
    print(
        f"{cpu}; target {tgt.key}; {tgt.cores} threads; {args.trials} trials per tuner; "
        f"cases {','.join(args.case_list)}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    runner = LocalRunner(
        num_threads=tgt.cores,
        number=FINAL_NUMBER,
        repeat=FINAL_REPEAT,
        min_repeat_ms=MIN_REPEAT_MS,
        timeout_s=120,
    )
    ms = None if args.no_metaschedule else MetaScheduleWorker(cores=tgt.cores)
    try:
        for name in args.case_list:
            row = run_case(name, args, tgt, runner, ms, work)
            row.update(target=tgt.key, threads=tgt.cores, cpu=cpu, date=date)
            rows.append(row)
            write_csv(rows, csv_path)  # keep what is done if a later case is killed
    finally:
        runner.close()
        if ms is not None:
            ms.close()
    print()
    print_table(rows)
    print(f"wrote {csv_path}; total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
