"""The benchmark suite: heronlike against TVM MetaSchedule, PyTorch and numpy, in one run.

For each case of Heron's DL Boost shape tables (ASPLOS'23 artifact ``tests/figure8/configs``;
notes heron_repo.md §7.2), on this machine, one after the other (no two tuners or timings
overlap):

1. heronlike: ``heronlike.tune(compute, "dlboost", trials=T, explorer=...)``; latency = the best
   kernel re-measured after tuning, valid rate = valid / trials run, tuning wall time.
2. TVM MetaSchedule (:mod:`benchmarks.metaschedule`): the same plain TE compute, the same trial
   budget, its default rules, with heronlike's VNNI intrinsic registered as ``dot_16x4_vnni``;
   its best kernel is re-measured by heronlike's runner with the same settings as heronlike's
   final re-measure and checked against the numpy reference.
3. PyTorch CPU and numpy (:mod:`heronlike.baselines`), each in a fresh process with the same
   thread count; the implementation used is named in ``pytorch_impl`` / ``numpy_impl``.

Writes ``<out>/suite-<timestamp>.csv`` and ``.png`` (speedups, log scale), prints a table with
geometric-mean speedups. A case whose operator is not in :mod:`heronlike.ops` yet is reported
as skipped, as is a tuner that rejects the shape (its message is kept).

    python benchmarks/suite.py                        # the default subset, default budget
    python benchmarks/suite.py --cases G1,C2D2 --trials 32
    python benchmarks/suite.py --cases gemm:128,128,128 --trials 8   # any shape, our API order
    python benchmarks/suite.py --full --no-metaschedule
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from heronlike.ops import OPERATORS

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script: make ``benchmarks.*`` importable
    sys.path.insert(0, str(REPO_ROOT))

#: the argument names of each heronlike.ops builder, in its positional order (dtype excluded)
API_ARGS: dict[str, tuple[str, ...]] = {name: args for name, (_, args) in OPERATORS.items()}

# Heron's DL Boost cases, each as (operator, arguments in *Heron's* order for that operator),
# converted to heronlike's API order by heron_to_params. Heron's orders differ per operator:
#   GEMM (M, K, N)                 -> gemm(M, N, K)
#   BMM  (B, M, K, N)              -> bmm(B, M, N, K)
#   C1D  (N, W, CO, CI, KW, s, p, d)             -> c1d(N, W, CI, CO, KW, s, p, d)  (CO first!)
#   C2D / DIL (N, H, W, CI, CO, KH, KW, s, p, d) -> same order
#   C3D  (N, D, H, W, CO, CI, KD, KH, KW, s, p, d) -> c3d(N, D, H, W, CI, CO, ...)  (CO first!)
#   T2D  (N, H, W, CI, CO, KH, KW, s, p, d, output_padding) -> same order
#   GEMV (M, K), SCAN (M, N, K)    -> same order
# G3 and G5 use the true N = 1000: Heron rounded it up to 1008 to fit its 16-wide tiles.
HERON_CASES: dict[str, tuple[str, tuple[int, ...]]] = {
    "G1": ("gemm", (1024, 1024, 1024)),
    "G2": ("gemm", (4096, 4096, 4096)),
    "G3": ("gemm", (32, 2048, 1000)),
    "G4": ("gemm", (32, 4096, 4096)),
    "G5": ("gemm", (32, 4096, 1000)),
    "B1": ("bmm", (12, 512, 64, 512)),
    "B2": ("bmm", (12, 512, 512, 64)),
    "B3": ("bmm", (16, 512, 64, 512)),
    "B4": ("bmm", (16, 512, 512, 64)),
    "B5": ("bmm", (96, 2048, 128, 2048)),
    "C1D1": ("c1d", (1, 892, 512, 1024, 1, 1, 0, 1)),
    "C1D2": ("c1d", (1, 892, 1024, 512, 1, 1, 0, 1)),
    "C1D3": ("c1d", (1, 892, 512, 512, 3, 1, 4, 2)),
    "C1D4": ("c1d", (1, 892, 512, 512, 3, 1, 8, 4)),
    "C1D5": ("c1d", (1, 892, 512, 512, 3, 1, 16, 8)),
    "C2D1": ("c2d", (1, 56, 56, 64, 64, 3, 3, 1, 1, 1)),
    "C2D2": ("c2d", (1, 56, 56, 64, 64, 1, 1, 1, 0, 1)),
    "C2D3": ("c2d", (1, 28, 28, 128, 128, 3, 3, 1, 1, 1)),
    "C2D4": ("c2d", (1, 28, 28, 128, 256, 1, 1, 2, 0, 1)),
    "C2D5": ("c2d", (1, 14, 14, 256, 256, 3, 3, 1, 1, 1)),
    "C2D6": ("c2d", (1, 14, 14, 256, 512, 1, 1, 2, 0, 1)),  # all 512 channels (Heron: 480)
    "C3D1": ("c3d", (1, 8, 56, 56, 64, 64, 3, 3, 3, 1, 1, 1)),
    "C3D2": ("c3d", (1, 8, 56, 56, 64, 128, 1, 1, 1, 2, 0, 1)),
    "C3D3": ("c3d", (1, 4, 28, 28, 128, 128, 3, 3, 3, 1, 1, 1)),
    "C3D4": ("c3d", (1, 4, 28, 28, 128, 256, 1, 1, 1, 2, 0, 1)),
    "C3D5": ("c3d", (1, 2, 14, 14, 256, 256, 3, 3, 3, 1, 1, 1)),
    "C3D6": ("c3d", (1, 2, 14, 14, 256, 512, 1, 1, 1, 2, 0, 1)),
    "D1": ("dil", (1, 56, 56, 64, 64, 3, 3, 1, 1, 2)),
    "D2": ("dil", (1, 56, 56, 64, 64, 1, 1, 1, 0, 2)),
    "D3": ("dil", (1, 28, 28, 128, 128, 3, 3, 1, 1, 2)),
    "D4": ("dil", (1, 28, 28, 128, 256, 1, 1, 2, 0, 2)),
    "D5": ("dil", (1, 14, 14, 256, 256, 3, 3, 1, 1, 2)),
    "D6": ("dil", (1, 14, 14, 256, 512, 1, 1, 2, 0, 2)),
    "T1": ("t2d", (1, 56, 56, 64, 64, 3, 3, 1, 1, 1, 0)),
    "T2": ("t2d", (1, 56, 56, 64, 64, 1, 1, 1, 0, 1, 0)),
    "T3": ("t2d", (1, 28, 28, 128, 128, 3, 3, 1, 1, 1, 0)),
    "T4": ("t2d", (1, 28, 28, 128, 256, 1, 1, 2, 0, 1, 0)),
    "T5": ("t2d", (1, 14, 14, 256, 256, 3, 3, 1, 1, 1, 0)),
    "T6": ("t2d", (1, 14, 14, 256, 512, 1, 1, 2, 0, 1, 0)),
    "GV1": ("gemv", (512, 16)),
    "GV2": ("gemv", (1024, 256)),
    "GV3": ("gemv", (256, 1024)),
    "GV4": ("gemv", (512, 256)),
    "GV5": ("gemv", (1024, 1024)),
    "S1": ("scan", (16, 512, 128)),
    "S2": ("scan", (1024, 16, 256)),
    "S3": ("scan", (256, 1024, 256)),
    "S4": ("scan", (512, 256, 16)),
    "S5": ("scan", (1024, 1024, 1024)),
}

#: the default subset (issue 4): GEMM G1, G3, G5, BMM B1, C2D1, C2D2, one C1D, one GEMV
DEFAULT_CASES = ("G1", "G3", "G5", "B1", "C2D1", "C2D2", "C1D3", "GV5")
#: chosen so that the default subset finishes within about 30 minutes on 2 cores
#: (MetaSchedule about 1 s per trial, heronlike about 0.25 s, plus fixed costs per case)
DEFAULT_TRIALS = 100

# time_evaluator settings: per trial (both tuners) and for the final re-measure (both tuners'
# best kernels; heronlike.tune re-measures with number = max(number, 10), repeat = final_repeat)
TRIAL_NUMBER, TRIAL_REPEAT, MIN_REPEAT_MS = 3, 5, 10.0
FINAL_NUMBER, FINAL_REPEAT = 10, 20


def heron_to_params(op: str, heron_args: Sequence[int]) -> dict[str, int]:
    """Keyword arguments of ``heronlike.ops.<op>`` from Heron's argument order (see above)."""
    a = list(heron_args)
    if op == "gemm":
        M, K, N = a
        return {"M": M, "N": N, "K": K}
    if op == "bmm":
        B, M, K, N = a
        return {"B": B, "M": M, "N": N, "K": K}
    if op == "c1d":
        a[2], a[3] = a[3], a[2]  # (.., CO, CI, ..) -> (.., CI, CO, ..)
    elif op == "c3d":
        a[4], a[5] = a[5], a[4]
    return dict(zip(API_ARGS[op], a, strict=True))


def parse_case(spec: str) -> tuple[str, str, dict[str, int], str]:
    """``(name, op, params, source)`` for a Heron case name or ``op:a,b,c`` in our API order.

    Raises:
        ValueError: for an unknown case name, operator or a wrong number of arguments.
    """
    if ":" in spec:
        op, _, rest = spec.partition(":")
        if op not in API_ARGS:
            raise ValueError(f"unknown operator {op!r}; known: {', '.join(API_ARGS)}")
        values = [int(v) for v in rest.split(",") if v.strip()]
        if len(values) != len(API_ARGS[op]):
            names = ",".join(API_ARGS[op])
            raise ValueError(f"{spec!r}: {op} takes {len(API_ARGS[op])} arguments ({names})")
        return spec, op, dict(zip(API_ARGS[op], values, strict=True)), "custom"
    if spec not in HERON_CASES:
        raise ValueError(f"unknown case {spec!r}; known: {', '.join(HERON_CASES)}")
    op, heron_args = HERON_CASES[spec]
    return spec, op, heron_to_params(op, heron_args), "heron " + ",".join(map(str, heron_args))


# ------------------------------------------------------------------------------------------------
# one case


def _short(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return f"{type(err).__name__}: {lines[-1] if lines else ''}"[:300]


def _pct(flop: float, latency: float | None, peak: float | None) -> float | None:
    return 100.0 * flop / latency / peak if latency and peak else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num and den else None


def _dirname(name: str) -> str:
    """A folder name for a case (``gemm:128,128,128`` -> ``gemm_128_128_128``)."""
    return "".join(ch if ch.isalnum() or ch in "-." else "_" for ch in name)


def run_heronlike(compute: Any, args: argparse.Namespace, paths: dict[str, Path], name: str):
    """Tune with heronlike; returns a dict of CSV fields."""
    import heronlike

    t0 = time.perf_counter()
    try:
        r = heronlike.tune(
            compute,
            args.target,
            trials=args.trials,
            explorer=args.explorer,
            seed=args.seed,
            records=paths["records"],
            work_dir=paths["work"] / _dirname(name) / "heronlike",
            number=TRIAL_NUMBER,
            repeat=TRIAL_REPEAT,
            min_repeat_ms=MIN_REPEAT_MS,
            final_repeat=FINAL_REPEAT,
        )
    except heronlike.UnsupportedShapeError as err:
        return {"heronlike_status": f"skipped: {_short(err)}"}
    except Exception as err:  # noqa: BLE001 - one failing case must not stop the suite
        return {"heronlike_status": f"error: {_short(err)}"}
    wall = time.perf_counter() - t0
    return {
        "heronlike_status": "ok" if r.latency_s and r.correct else "no correct kernel",
        "heronlike_ms": r.latency_s * 1e3 if r.latency_s else None,
        "heronlike_correct": r.correct,
        "heronlike_trials": r.trials_run,
        "heronlike_valid_rate": r.valid / r.trials_run if r.trials_run else None,
        "heronlike_tune_s": wall,
    }


def run_metaschedule(dag: Any, op: str, tgt: Any, worker: Any, args, paths, name: str) -> dict:
    """Tune with MetaSchedule, then re-measure and check its best kernel with heronlike's
    runner under the final re-measure settings; returns a dict of CSV fields.

    With ``--ms-weights packed`` (default) MetaSchedule's compute takes the weight in the VNNI
    layout (:func:`benchmarks.metaschedule.pack_func_weight`) when the operator and shape allow
    it, as heronlike's kernels do (weight packing is a one-time step outside the timing for
    both); otherwise the plain compute. ``ms_weights`` says which.
    """
    import numpy as np
    import tvm

    from benchmarks.metaschedule import pack_func_weight, pack_weight
    from heronlike.measure import LocalRunner, RunInput
    from heronlike.reference import random_inputs, reference_outputs, save_npz

    work = paths["work"] / _dirname(name) / "metaschedule"
    func, dims = dag.func, None
    if args.ms_weights == "packed":
        func, dims = pack_func_weight(dag.func, op)
    layout = "plain" if dims is None else "packed (VNNI tiles, n//16 .. k//4, n%16, k%4)"
    res = worker.tune(
        tvm.IRModule({"main": func}),
        tgt.tvm_target(),
        trials=args.trials,
        work_dir=work,
        seed=args.seed,
        trials_per_iter=args.ms_trials_per_iter,
        number=TRIAL_NUMBER,
        repeat=TRIAL_REPEAT,
        min_repeat_ms=MIN_REPEAT_MS,
    )
    row: dict[str, Any] = {
        "ms_weights": layout,
        "ms_trials": res.trials_run,
        "ms_valid_rate": res.valid / res.trials_run if res.trials_run else None,
        "ms_tune_s": res.wall_s,
    }
    if res.artifact_path is None:
        row["ms_status"] = f"error: {res.error}"
        return row
    arrays = random_inputs(dag, np.random.default_rng(args.seed))
    expected = reference_outputs(dag, arrays)
    if dims is not None:
        pos, n_dim, k_dim = dims
        arrays[pos] = pack_weight(arrays[pos], n_dim, k_dim)
    args_path = save_npz(work / "args.npz", {f"arg{i}": a for i, a in enumerate(arrays)})
    exp_path = save_npz(work / "expected.npz", {f"arg{i}": a for i, a in expected.items()})
    floating = any(np.issubdtype(a.dtype, np.floating) for a in expected.values())
    with LocalRunner(
        num_threads=tgt.cores,
        number=FINAL_NUMBER,
        repeat=FINAL_REPEAT,
        min_repeat_ms=MIN_REPEAT_MS,
        timeout_s=120,
    ) as runner:
        (run,) = runner.run(
            [RunInput(res.artifact_path, str(args_path), str(exp_path), 1e-3 if floating else 0)]
        )
    row["ms_correct"] = run.error_kind != "wrong_result"
    if run.ok:
        row["ms_status"] = "ok"
        row["ms_ms"] = run.latency_s * 1e3
    else:
        row["ms_status"] = f"{run.error_kind}: {run.error_msg}"[:300]
    return row


def run_case(spec: str, args: argparse.Namespace, paths, tgt, worker) -> dict[str, Any]:
    """Every measurement of one case, as one CSV row."""
    from heronlike import ops
    from heronlike.baselines import numpy_op, torch_op
    from heronlike.dag import ComputeDAG

    name, op, params, source = parse_case(spec)
    row: dict[str, Any] = {
        "case": name,
        "op": op,
        "params": " ".join(f"{k}={v}" for k, v in params.items()),
        "source": source,
        "dtype": "int8 (u8 x s8 -> s32)",
        "trials": args.trials,
    }
    if not hasattr(ops, op):
        skip = "skipped: operator not available"
        row.update(heronlike_status=skip, ms_status=skip, pytorch_impl=skip, numpy_impl=skip)
        return row
    try:
        compute = getattr(ops, op)(**params, dtype="int8")
        dag = ComputeDAG.from_compute(compute)
    except Exception as err:  # noqa: BLE001 - e.g. an extent the operator rejects
        bad = f"error: {_short(err)}"
        row.update(heronlike_status=bad, ms_status=bad, pytorch_impl=bad, numpy_impl=bad)
        return row
    row["gop"] = dag.flop() / 1e9
    row["threads"] = tgt.cores  # every tuner and baseline of the case runs on this many
    print(f"[{name}] {op} {row['params']}: heronlike ({args.trials} trials) ...", flush=True)
    row.update(run_heronlike(compute, args, paths, name))
    if args.no_metaschedule:
        row["ms_status"] = "not run (--no-metaschedule)"
    else:
        print(f"[{name}] MetaSchedule ({args.trials} trials) ...", flush=True)
        try:
            row.update(run_metaschedule(dag, op, tgt, worker, args, paths, name))
        except Exception as err:  # noqa: BLE001
            row["ms_status"] = f"error: {_short(err)}"
    print(f"[{name}] PyTorch and numpy ...", flush=True)
    t, row["pytorch_impl"] = torch_op(op, params, threads=tgt.cores)
    row["pytorch_ms"] = t * 1e3 if t else None
    t, row["numpy_impl"] = numpy_op(op, params, threads=tgt.cores)
    row["numpy_ms"] = t * 1e3 if t else None
    h = row.get("heronlike_ms")
    row["speedup_vs_ms"] = _ratio(row.get("ms_ms"), h)
    row["speedup_vs_pytorch"] = _ratio(row.get("pytorch_ms"), h)
    row["speedup_vs_numpy"] = _ratio(row.get("numpy_ms"), h)
    peak = tgt.peak_ops_per_s()
    for who in ("heronlike", "ms", "pytorch"):
        lat = row.get(f"{who}_ms")
        row[f"{who}_pct_peak"] = _pct(dag.flop(), lat / 1e3 if lat else None, peak)
    print(f"[{name}] {_summary(row)}", flush=True)
    return row


# ------------------------------------------------------------------------------------------------
# output

COLUMNS = (
    "case", "op", "params", "source", "dtype", "trials", "gop",
    "heronlike_ms", "ms_ms", "pytorch_ms", "numpy_ms",
    "speedup_vs_ms", "speedup_vs_pytorch", "speedup_vs_numpy",
    "heronlike_pct_peak", "ms_pct_peak", "pytorch_pct_peak",
    "heronlike_valid_rate", "ms_valid_rate", "heronlike_trials", "ms_trials",
    "heronlike_tune_s", "ms_tune_s", "heronlike_correct", "ms_correct",
    "heronlike_status", "ms_status", "ms_weights", "pytorch_impl", "numpy_impl",
    "cpu_model", "cpu_signature", "threads", "date",
)  # fmt: skip


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def _summary(row: dict[str, Any]) -> str:
    return (
        f"heronlike {_fmt(row.get('heronlike_ms'))} ms ({row.get('heronlike_status')}), "
        f"MetaSchedule {_fmt(row.get('ms_ms'))} ms ({row.get('ms_status')}), "
        f"PyTorch {_fmt(row.get('pytorch_ms'))} ms, numpy {_fmt(row.get('numpy_ms'))} ms"
    )


def geomean(values: Sequence[float | None]) -> float | None:
    """Geometric mean of the positive values (None when there are none)."""
    xs = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in xs) / len(xs)) if xs else None


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    """One row per case, :data:`COLUMNS` in order (empty cell = not measured); every row names
    the machine (CPU model and family/model/stepping, threads) and the date."""
    from heronlike.host import machine_stamp

    machine = machine_stamp()
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            row = {**machine, **row}
            writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMNS})


def write_chart(rows: list[dict[str, Any]], path: Path, title: str) -> bool:
    """Grouped bars of heronlike's speedup over each baseline per case, log scale."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ModuleNotFoundError:
        return False
    series = (("MetaSchedule", "speedup_vs_ms"), ("PyTorch", "speedup_vs_pytorch"),
              ("numpy", "speedup_vs_numpy"))  # fmt: skip
    cases = [r["case"] for r in rows]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(cases) + 1.5), 3.2), dpi=100)
    width = 0.8 / len(series)
    for i, (label, key) in enumerate(series):
        xs = [j + (i - 1) * width for j in range(len(cases))]
        ys = [r.get(key) or 0.0 for r in rows]
        ax.bar(xs, [y if y > 0 else float("nan") for y in ys], width, label=f"vs {label}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(cases)), cases, rotation=30, fontsize=8)
    ax.set_ylabel("heronlike speedup (×)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def print_table(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Print the results and return the geometric-mean speedups."""
    head = ("case", "heronlike ms", "MS ms", "PyTorch ms", "numpy ms", "×MS", "×PyTorch",
            "×numpy", "valid H/MS", "tune s H/MS")  # fmt: skip
    lines = [head]
    for r in rows:
        lines.append(
            (
                r["case"],
                _fmt(r.get("heronlike_ms")),
                _fmt(r.get("ms_ms")),
                _fmt(r.get("pytorch_ms")),
                _fmt(r.get("numpy_ms")),
                _fmt(r.get("speedup_vs_ms")),
                _fmt(r.get("speedup_vs_pytorch")),
                _fmt(r.get("speedup_vs_numpy")),
                f"{_fmt(r.get('heronlike_valid_rate'), 2)}/{_fmt(r.get('ms_valid_rate'), 2)}",
                f"{_fmt(r.get('heronlike_tune_s'), 3)}/{_fmt(r.get('ms_tune_s'), 3)}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for line in lines:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
    means = {
        key: geomean([r.get(key) for r in rows])
        for key in ("speedup_vs_ms", "speedup_vs_pytorch", "speedup_vs_numpy")
    }
    print(
        "geomean speedup of heronlike: "
        + ", ".join(
            f"vs {who} {_fmt(means[k])} (over {sum(1 for r in rows if r.get(k))} cases)"
            for who, k in (
                ("MetaSchedule", "speedup_vs_ms"),
                ("PyTorch", "speedup_vs_pytorch"),
                ("numpy", "speedup_vs_numpy"),
            )
        )
    )
    for r in rows:
        notes = [f"{k}: {r[k]}" for k in ("heronlike_status", "ms_status") if r.get(k) != "ok"]
        notes += [f"pytorch: {r.get('pytorch_impl')}", f"numpy: {r.get('numpy_impl')}"]
        print(f"  {r['case']}: " + "; ".join(str(n) for n in notes))
    return means


# ------------------------------------------------------------------------------------------------
# command line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--cases",
        default=",".join(DEFAULT_CASES),
        help="comma-separated Heron case names (G1, B1, C2D1, C1D3, GV5, ...) or op:a,b,c "
        "in heronlike.ops argument order (e.g. gemm:128,128,128); separate op specs by ';'",
    )
    p.add_argument("--full", action="store_true", help="every case of Heron's DL Boost tables")
    p.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help="budget of each tuner")
    p.add_argument("--explorer", default=None, help="heronlike explorer (default: cga)")
    p.add_argument("--no-metaschedule", action="store_true", help="skip the MetaSchedule tunes")
    p.add_argument("--ms-trials-per-iter", type=int, default=32, help="MetaSchedule round size")
    p.add_argument(
        "--ms-weights",
        choices=("packed", "plain"),
        default="packed",
        help="weight layout of MetaSchedule's compute: packed = the VNNI tile layout where the "
        "operator and shape allow it (its VNNI rule needs it), plain = the operator's own",
    )
    p.add_argument(
        "--ms-unguarded",
        action="store_true",
        help="register heronlike's VNNI intrinsic for MetaSchedule without the compact-tile "
        "guard (MetaSchedule may then tensorize strided weight tiles into wrong kernels)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", default="dlboost")
    p.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "out"), help="output folder")
    args = p.parse_args(argv)
    if args.trials < 1:
        p.error("--trials must be at least 1")
    if args.explorer is None:
        from heronlike.explore import EXPLORERS

        args.explorer = "cga" if "cga" in EXPLORERS else "random"
    if args.full:
        args.case_list = list(HERON_CASES)
    else:
        sep = ";" if ";" in args.cases or ":" in args.cases else ","
        args.case_list = [c.strip() for c in args.cases.split(sep) if c.strip()]
    for spec in args.case_list:
        try:
            parse_case(spec)
        except ValueError as err:
            p.error(str(err))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite; returns the process exit status."""
    args = parse_args(argv)
    import heronlike
    from benchmarks.metaschedule import MetaScheduleWorker

    tgt = heronlike.get_target(args.target)
    tgt.check_host()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "records": out / f"suite-{stamp}.sqlite",
        "work": out / f"suite-{stamp}",
        "csv": out / f"suite-{stamp}.csv",
        "png": out / f"suite-{stamp}.png",
    }
    print(
        f"target {tgt.key}, {tgt.cores} cores, {args.trials} trials per tuner, explorer "
        f"{args.explorer}, cases {','.join(args.case_list)}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    t0 = time.perf_counter()
    rows = []
    worker = (
        None
        if args.no_metaschedule
        else MetaScheduleWorker(cores=tgt.cores, guard=not args.ms_unguarded)
    )
    try:
        for spec in args.case_list:
            rows.append(run_case(spec, args, paths, tgt, worker))
            write_csv(rows, paths["csv"])  # keep what is done if a later case is killed
    finally:
        if worker is not None:
            worker.close()
    print()
    means = print_table(rows)
    from heronlike.host import cpu_model, cpu_signature

    title = (
        f"heronlike ({args.explorer}), {args.trials} trials, {tgt.cores} cores of "
        f"{cpu_model()} ({cpu_signature()}), {time.strftime('%Y-%m-%d')}\ngeomean speedup "
        f"vs MS {_fmt(means['speedup_vs_ms'])}, vs PyTorch {_fmt(means['speedup_vs_pytorch'])}"
    )
    chart = write_chart(rows, paths["png"], title)
    print(f"wrote {paths['csv']}" + (f" and {paths['png']}" if chart else ""))
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
