"""Whole models end to end, float32 on ``llvm``: heronlike's compiled model beside ONNX Runtime,
PyTorch eager, TVM MetaSchedule (``tune_relax`` at the same total trials) and TVM's untuned
build, all in one run on this machine.

Per model (ResNet-50 batch 1 224x224, BERT-base sequence 128; random weights, from
:mod:`benchmarks.models.torch_nets`):

1. **heronlike**: :func:`heronlike.model.tune_model` with ``--trials`` in total (records in
   ``<out>/<model>-heronlike.sqlite``: a rerun resumes), :func:`heronlike.model.compile_model`,
   exported, loaded back and checked against PyTorch.
2. **MetaSchedule**: ``tune_relax`` on the *same fused module* (the same tasks) with the same
   total trials (``max_trials_global``), its evolutionary search and XGBoost model, applied with
   ``MetaScheduleApplyDatabase`` and lowered by the same passes as heronlike's (so only the
   schedules differ); ``--ms-trials 0`` skips it.
3. **TVM untuned**: the fused module lowered as it is (TVM's default loop nests).
4. **ONNX Runtime**: the same model exported to ONNX (TorchScript exporter), 2 intra-op threads
   (``--threads``), all graph optimisations, sequential execution.
5. **PyTorch eager**: ``torch.set_num_threads(--threads)``, ``no_grad``.

**One timing policy**: each engine runs ``--warmup`` untimed calls then ``--repeat`` timed calls
of one inference each on the same inputs (stopping after 60 s, at least 3 calls: TVM's untuned
build takes seconds a call); the column is the median (seconds). Outputs are
compared with PyTorch's (max abs error and relative to PyTorch's max abs output).

Also measured: tuning wall time and trials of each tuner, and the trials (and seconds) until its
**estimate** (``sum(weight x best task latency)``) came within 5% of its final estimate; per task,
heronlike's best latency beside MetaSchedule's (``<stem>-tasks.csv``) and, by anchor operator
(convolutions, matmuls, pooling ...), each tuner's weighted sum beside ONNX Runtime's profiled
kernel time (``<stem>-ops.csv``); peak resident memory of a
fresh process that loads the compiled model and runs it 10 times, beside one that does the same
with ONNX Runtime; the exported library's size beside the weights' bytes.

Writes ``<out>/models_e2e-<model>-t<trials>-<cpu>-<date>.csv`` (one row per engine; every row
names the CPU and date), ``…-tasks.csv``, ``…-ops.csv`` and a ``.png`` bar chart.

    python benchmarks/models_e2e.py --model resnet50 --trials 400
    python benchmarks/models_e2e.py --model bert --trials 200 --ms-trials 0
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from heronlike.host import machine_slug, machine_stamp  # noqa: E402

ENGINES = ("heronlike", "metaschedule", "tvm_untuned", "onnxruntime", "pytorch")


def median_latency(
    call: Callable[[], Any], warmup: int, repeat: int, max_s: float = 60.0
) -> tuple[float, int]:
    """The one timing policy: ``warmup`` untimed calls, then the median of ``repeat`` timed
    calls (seconds), stopping early (after at least 3) once ``max_s`` seconds are spent, so a
    model that runs unscheduled loops (seconds per call) is timed in bounded time. Returns the
    median and the number of timed calls."""
    for i in range(warmup):
        t0 = time.perf_counter()
        call()
        if i == 0 and time.perf_counter() - t0 > max_s / 20:
            break  # seconds a call (unscheduled loops): one warm-up call is enough
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeat and (len(times) < 3 or time.perf_counter() - start < max_s):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), len(times)


def converged_at(curve: list[tuple[int, float, float]], tol: float = 0.05) -> tuple[int, float]:
    """``(trials, seconds)`` of the first point of ``curve`` (trials, seconds, estimate) whose
    estimate is within ``tol`` of the final one."""
    final = curve[-1][2]
    for trials, seconds, est in curve:
        if est <= final * (1 + tol):
            return trials, seconds
    return curve[-1][0], curve[-1][1]


def _error(out: np.ndarray, ref: np.ndarray) -> tuple[float, float]:
    err = float(np.abs(out.astype(np.float64) - ref).max())
    return err, err / max(float(np.abs(ref).max()), 1e-30)


def _peak_rss_mb(code: str, threads: int) -> float:
    """Peak resident memory (MiB) of a fresh Python process running ``code``."""
    env = dict(os.environ, TVM_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    # VmHWM of /proc, not getrusage's ru_maxrss: a child keeps its forking parent's high-water
    # mark across execve, and this benchmark's process holds PyTorch and the model
    wrapped = code + (
        "\nimport re\n"
        "status = open('/proc/self/status').read()\n"
        "print('RSS', re.search(r'VmHWM:\\s+(\\d+)', status).group(1))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", wrapped], capture_output=True, text=True, env=env, timeout=600
    )
    match = re.search(r"RSS (\d+)", out.stdout)
    if not match:
        raise RuntimeError(f"memory probe failed: {out.stderr[-2000:]}")
    return int(match.group(1)) / 1024


def run_heronlike(args: Any, mod: Any, inputs: list[np.ndarray], out_dir: Path) -> dict[str, Any]:
    import heronlike.model as hm

    records = out_dir / f"{args.model}-heronlike.sqlite"
    curve: list[tuple[int, float, float]] = []
    from heronlike.records import Records
    from heronlike.target import get_target

    tunable = [t for t in hm.extract_tasks(mod, "llvm") if t.tunable]
    n_tasks = len(tunable)
    seen: set[str] = set()  # tasks with a valid kernel: the estimate covers them
    if records.exists():  # a resumed run: tasks tuned before count from the start
        with Records(records) as db:
            key = get_target("llvm").key
            seen = {t.name for t in tunable if db.best(t.workload_key, key) is not None}

    def progress(info: Any) -> None:
        if info.best_latency_s is not None:
            seen.add(info.name)
        if len(seen) == n_tasks:  # an estimate only once every task has a kernel
            curve.append((info.trials_done, info.elapsed_s, info.estimate_s))
        print(
            f"  heronlike [{info.trials_done}/{info.trials_total}] {info.elapsed_s:6.0f} s "
            f"{info.name[:60]}: estimate {info.estimate_s * 1e3:.2f} ms",
            flush=True,
        )

    t0 = time.perf_counter()
    result = hm.tune_model(
        mod,
        "llvm",
        trials=args.trials,
        records=records,
        explorer=args.explorer,
        seed=args.seed,
        batch_size=args.batch_size,
        progress=progress,
    )
    tune_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = hm.compile_model(mod, "llvm", records)
    compile_s = time.perf_counter() - t0
    lib = compiled.export_library(out_dir / f"{args.model}-heronlike.so")
    loaded = hm.load(lib)
    return dict(
        run=lambda: loaded(*inputs),
        tune_s=tune_s,
        compile_s=compile_s,
        trials=result.trials_done,
        curve=curve,
        tasks={t.name.split(" ")[0]: t.best_latency_s for t in result.tasks},
        weights={t.name.split(" ")[0]: t.weight for t in result.tasks},
        # every fused function's name -> the name its task goes by (MetaSchedule may name a
        # task by another of its functions)
        alias={f: c.functions[0] for c in compiled.choices for f in c.functions},
        library=lib,
        choices=compiled.choices,
    )


def run_metaschedule(args: Any, fused: Any, inputs: list[np.ndarray], out_dir: Path) -> dict:
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    from benchmarks.ms_build import fast_build
    from heronlike.model.pipeline import build
    from heronlike.target import get_target

    tgt = get_target("llvm")
    target = tvm.target.Target(tgt.tvm_target())
    work_dir = out_dir / f"{args.model}-metaschedule-t{args.ms_trials}"
    # MetaSchedule's task scheduler gives a task num_trials_per_iter trials at a time and
    # never touches a task again before every task had its first iteration: with the default
    # 64 and fewer than 64 x tasks trials, some tasks would get no trial (an unscheduled,
    # serial kernel); so per iteration: the budget over the tasks, 8 to 64, a multiple of 8
    n_tasks = len(ms.relax_integration.extract_tasks(fused, target))
    per_iter = int(min(64, max(8, args.ms_trials // n_tasks // 8 * 8)))
    t0 = time.perf_counter()
    db = ms.relax_integration.tune_relax(
        fused,
        params={},
        target=target,
        work_dir=str(work_dir),
        max_trials_global=args.ms_trials,
        num_trials_per_iter=per_iter,
        builder=ms.builder.LocalBuilder(max_workers=tgt.cores, timeout_sec=60, f_build=fast_build),
        runner=ms.runner.LocalRunner(
            timeout_sec=30,
            evaluator_config=ms.runner.EvaluatorConfig(
                number=3, repeat=5, min_repeat_ms=10, enable_cpu_cache_flush=False
            ),
        ),
        seed=args.seed,
    )
    tune_s = time.perf_counter() - t0
    with target, db:
        applied = relax.transform.MetaScheduleApplyDatabase(enable_warning=False)(fused)
    ex = build(applied, tgt)
    vm = relax.VirtualMachine(ex, tvm.cpu())
    tensors = [tvm.runtime.tensor(x, tvm.cpu()) for x in inputs]
    # per task: its best median run time; the records in commit order give the estimate curve
    import tvm_ffi

    weight_of, name_of = {}, {}
    for task in ms.relax_integration.extract_tasks(fused, target):
        key = tvm_ffi.structural_hash(task.dispatched[0])
        weight_of[key], name_of[key] = task.weight, task.task_name
    best: dict[int, float] = {}
    curve: list[tuple[int, float, float]] = []
    records = db.get_all_tuning_records()
    for i, rec in enumerate(records):
        secs = [float(x) for x in (rec.run_secs or [])]
        key = tvm_ffi.structural_hash(rec.workload.mod)
        if not secs or max(secs) > 1e9 or key not in weight_of:
            continue
        best[key] = min(best.get(key, float("inf")), statistics.median(secs))
        if len(best) == len(weight_of):  # an estimate only once every task has a kernel
            est = sum(weight_of[k] * v for k, v in best.items())
            curve.append((i + 1, tune_s * (i + 1) / len(records), est))
    return dict(
        run=lambda: vm["main"](*tensors),
        tune_s=tune_s,
        trials=len(records),
        tasks={name_of[k]: v for k, v in best.items()},
        curve=curve,
    )


#: ONNX Runtime node types (after its graph fusions) by the anchor operator of our tasks
ORT_CLASSES = {
    "Conv": "conv2d", "FusedConv": "conv2d", "NhwcFusedConv": "conv2d", "QLinearConv": "conv2d",
    "Gemm": "matmul", "MatMul": "matmul", "FusedMatMul": "matmul", "FusedGemm": "matmul",
    "MaxPool": "max_pool2d", "GlobalAveragePool": "mean", "ReduceMean": "mean",
    "Softmax": "softmax", "LayerNormalization": "layer_norm",
    "SkipLayerNormalization": "layer_norm", "Gather": "take",
}  # fmt: skip


def anchor_class(task_name: str) -> str:
    """``fused_conv2d16_add10_relu7 ...`` -> ``conv2d``: a task's anchor operator, digits off."""
    first = task_name.split(" ")[0].removeprefix("fused_")
    head = re.sub(r"\d+$", "", first.split("_")[0])
    for known in ("conv2d", "matmul", "max_pool2d", "layer_norm", "softmax", "mean", "take"):
        if first.startswith(known):
            return known
    return head or "other"


def ort_profile(session_args: tuple[Any, ...], feed: dict[str, Any], runs: int) -> dict[str, float]:
    """Seconds per inference by operator class (:data:`ORT_CLASSES`) from ONNX Runtime's own
    profiler over ``runs`` runs (kernel time only; the session's overhead is not in it)."""
    import onnxruntime as ort

    path, opts = session_args
    opts.enable_profiling = True
    sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    for _ in range(runs):
        sess.run(None, feed)
    trace = Path(sess.end_profiling())
    out: dict[str, float] = {}
    for ev in json.loads(trace.read_text()):
        if ev.get("cat") != "Node" or not ev.get("name", "").endswith("_kernel_time"):
            continue
        kind = ORT_CLASSES.get(ev.get("args", {}).get("op_name", ""), "other")
        out[kind] = out.get(kind, 0.0) + float(ev["dur"]) * 1e-6 / runs
    trace.unlink(missing_ok=True)
    return out


def run_untuned(fused: Any, inputs: list[np.ndarray]) -> Callable[[], Any]:
    import tvm
    from tvm import relax

    from heronlike.model.pipeline import build
    from heronlike.target import get_target

    ex = build(fused, get_target("llvm"))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    tensors = [tvm.runtime.tensor(x, tvm.cpu()) for x in inputs]
    return lambda: vm["main"](*tensors)


def _numpy(value: Any) -> np.ndarray:
    """The first output of an engine's call as numpy (a VM tuple, a tensor, a list)."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "numpy"):
        return value.numpy()
    return _numpy(value[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["resnet50", "bert"], default="resnet50")
    ap.add_argument("--trials", type=int, default=400, help="heronlike's total trial budget")
    ap.add_argument("--ms-trials", type=int, default=None, help="MetaSchedule's (default: same)")
    ap.add_argument("--explorer", default="cga")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    ap.add_argument("--work", type=Path, default=REPO_ROOT / "benchmarks" / "out")
    args = ap.parse_args()
    if args.ms_trials is None:
        args.ms_trials = args.trials
    os.environ.setdefault("TVM_NUM_THREADS", str(args.threads))

    import torch

    import heronlike.model as hm
    from benchmarks.models.torch_nets import MODELS
    from heronlike.model.tasks import fused_module

    torch.set_num_threads(args.threads)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    net, example = MODELS[args.model]()
    inputs = [a.numpy() for a in example]
    with torch.no_grad():
        ref = net(*example).numpy().astype(np.float64)
    onnx_path = work / f"{args.model}.onnx"
    if not onnx_path.exists():
        torch.onnx.export(net, example, str(onnx_path), dynamo=False, input_names=["x"])
    mod = hm.from_torch(net, example)
    fused, _ = fused_module(mod, "llvm", shapes=None)
    weights_bytes = sum(p.numel() * p.element_size() for p in net.state_dict().values())

    rows: dict[str, dict[str, Any]] = {e: {"engine": e} for e in ENGINES}
    print(f"== heronlike: {args.trials} trials", flush=True)
    h = run_heronlike(args, mod, inputs, work)
    rows["heronlike"].update(tune_s=h["tune_s"], trials=h["trials"])
    if h["curve"]:
        rows["heronlike"]["trials_to_5pct"], rows["heronlike"]["seconds_to_5pct"] = converged_at(
            h["curve"]
        )
    ms_res = None
    if args.ms_trials:
        print(f"== MetaSchedule: {args.ms_trials} trials", flush=True)
        ms_res = run_metaschedule(args, fused, inputs, work)
        ms_res["tasks"] = {h["alias"].get(n, n): v for n, v in ms_res["tasks"].items()}
        rows["metaschedule"].update(tune_s=ms_res["tune_s"], trials=ms_res["trials"])
        if ms_res["curve"]:
            rows["metaschedule"]["trials_to_5pct"], rows["metaschedule"]["seconds_to_5pct"] = (
                converged_at(ms_res["curve"])
            )
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    feed = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
    untuned = run_untuned(fused, inputs)

    calls: dict[str, Callable[[], Any]] = {
        "heronlike": h["run"],
        "onnxruntime": lambda: sess.run(None, feed)[0],
        "pytorch": lambda: net(*example),
        "tvm_untuned": untuned,
    }
    if ms_res is not None:
        calls["metaschedule"] = ms_res["run"]
    print("== timing", flush=True)
    with torch.no_grad():
        for engine, call in calls.items():
            out = _numpy(call())
            rows[engine]["max_abs_err"], rows[engine]["rel_err"] = _error(out, ref)
            rows[engine]["latency_s"], rows[engine]["timed_runs"] = median_latency(
                call, args.warmup, args.repeat
            )
            print(f"  {engine:13s} {rows[engine]['latency_s'] * 1e3:10.2f} ms", flush=True)
    print("== memory", flush=True)
    rows["heronlike"]["peak_rss_mb"] = _peak_rss_mb(
        "import numpy as np, heronlike.model as hm\n"
        f"m = hm.load({str(h['library'])!r})\n"
        "xs = m.random_inputs()\n"
        "for _ in range(10): m(*xs)\n",
        args.threads,
    )
    rows["onnxruntime"]["peak_rss_mb"] = _peak_rss_mb(
        "import numpy as np, onnxruntime as ort\n"
        "o = ort.SessionOptions(); o.intra_op_num_threads = "
        f"{args.threads}\n"
        f"s = ort.InferenceSession({str(onnx_path)!r}, o, providers=['CPUExecutionProvider'])\n"
        f"feed = {{i.name: np.zeros(i.shape, np.float32 if 'float' in i.type else np.int64) "
        "for i in s.get_inputs()}\n"
        "for _ in range(10): s.run(None, feed)\n",
        args.threads,
    )
    rows["heronlike"]["library_mb"] = Path(h["library"]).stat().st_size / 2**20
    rows["heronlike"]["weights_mb"] = weights_bytes / 2**20

    stamp = machine_stamp()
    cpu = machine_slug()
    stem = f"models_e2e-{args.model}-t{args.trials}-{cpu}-{stamp['date']}"
    args.out.mkdir(parents=True, exist_ok=True)
    fields = [
        "model", "engine", "latency_s", "speedup_vs_onnxruntime", "max_abs_err", "rel_err",
        "timed_runs", "tune_s", "trials", "trials_to_5pct", "seconds_to_5pct", "peak_rss_mb",
        "library_mb", "weights_mb", "threads", "cpu_model", "cpu_signature", "date",
    ]  # fmt: skip
    ort_lat = rows["onnxruntime"]["latency_s"]
    with open(args.out / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for engine in ENGINES:
            r = rows[engine]
            if "latency_s" not in r:
                continue
            r.update(model=args.model, threads=args.threads, **stamp)
            r["speedup_vs_onnxruntime"] = ort_lat / r["latency_s"]
            w.writerow(r)
    with open(args.out / f"{stem}-tasks.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["model", "task", "weight", "heronlike_s", "metaschedule_s", "cpu_model", "date"]
        )
        ms_tasks = ms_res["tasks"] if ms_res else {}
        for name, lat in h["tasks"].items():
            w.writerow(
                [args.model, name, h["weights"][name], lat, ms_tasks.get(name), stamp["cpu_model"],
                 stamp["date"]]
            )  # fmt: skip
    # where the time goes, by anchor operator: each tuner's sum of weight x task latency
    # beside ONNX Runtime's profiled kernel time
    ort_opts = ort.SessionOptions()
    ort_opts.intra_op_num_threads = args.threads
    ort_opts.inter_op_num_threads = 1
    by_class = {"onnxruntime": ort_profile((onnx_path, ort_opts), feed, 20)}
    for tuner, lat, weights in (
        ("heronlike", h["tasks"], h["weights"]),
        ("metaschedule", ms_res["tasks"] if ms_res else {}, h["weights"]),
    ):
        sums: dict[str, float] = {}
        for name, t in lat.items():
            if t is not None and name in weights:
                sums[anchor_class(name)] = sums.get(anchor_class(name), 0.0) + weights[name] * t
        by_class[tuner] = sums
    with open(args.out / f"{stem}-ops.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "operator", "heronlike_s", "metaschedule_s", "onnxruntime_s",
                    "cpu_model", "date"])  # fmt: skip
        classes = sorted(set().union(*by_class.values()))
        for c in classes:
            w.writerow(
                [args.model, c] + [by_class[e].get(c) for e in ("heronlike", "metaschedule",
                 "onnxruntime")] + [stamp["cpu_model"], stamp["date"]]
            )  # fmt: skip
    (work / f"{stem}-choices.json").write_text(
        json.dumps([c.__dict__ for c in h["choices"]], indent=1)
    )
    _plot(args, rows, stem, stamp)
    print(f"wrote {args.out / stem}.csv, -tasks.csv, -ops.csv")


def _plot(args: Any, rows: dict[str, dict[str, Any]], stem: str, stamp: dict[str, str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot")
        return
    engines = [e for e in ENGINES if "latency_s" in rows[e]]
    ms = [rows[e]["latency_s"] * 1e3 for e in engines]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.barh(engines, ms, color=["C0" if e == "heronlike" else "C7" for e in engines])
    ax.set_xscale("log")
    ax.set_xlabel("latency per inference, ms (median; log scale)")
    for y, v in enumerate(ms):
        ax.text(v, y, f" {v:.1f}", va="center")
    ax.set_title(
        f"{args.model}, batch 1, float32, {args.threads} threads\n"
        f"{stamp['cpu_model']} ({stamp['cpu_signature']}), {stamp['date']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(args.out / f"{stem}.png", dpi=120)


if __name__ == "__main__":
    main()
