"""Quantized (int8) models end to end: heronlike's compiled int8 model beside ONNX Runtime's int8
run of the same file, and beside both float32 models, all in one run on this machine (issue 23).

Per model (ResNet-50 batch 1 224x224 or BERT-base sequence 128; random weights, from
:mod:`benchmarks.models.torch_nets`):

1. The float32 ONNX file (TorchScript exporter, opset 17) and its quantization by ONNX
   Runtime's own tools: ``--quantize qdq`` is ``quantize_static`` in QDQ format, u8 activations,
   s8 per-channel weights, calibrated on 8 random inputs (what ONNX Runtime recommends for
   CPUs); ``--quantize dynamic`` is ``quantize_dynamic`` (s8 weights, ``DynamicQuantizeLinear``
   + ``MatMulInteger``: what transformers usually get).
2. **heronlike int8**: :func:`heronlike.model.tune_model` on the quantized file with ``--trials``
   in total, on ``--target`` (default ``llvm``: on a CPU with AVX512-VNNI the integer layers go
   onto ``vpdpbusd``, without it onto ``vpmaddwd`` (AVX-512BW or AVX2), the rest to the general
   rule set), then
   :func:`~heronlike.model.compile_model`.
   Records in ``<work>/<model>-<quantize>-int8.sqlite`` (a rerun resumes).
3. **heronlike float32**: the same on the float file, on ``llvm``, ``--float-trials`` (default
   the same), records ``<work>/<model>-float.sqlite``.
4. **ONNX Runtime int8 and float32**: the two files, ``--threads`` intra-op threads, all graph
   optimizations, sequential execution.

**One timing policy** (:func:`benchmarks.models_e2e.median_latency`): ``--warmup`` untimed
calls, then the median of ``--repeat`` timed calls, all engines on the same inputs, one after the
other in this process; TVM's thread pool and ONNX Runtime both get ``--threads`` threads.

**Agreement** (the rule of ``tests/test_quantize.py``): heronlike's int8 output against ONNX
Runtime's reference execution of the same file (graph optimizations off: each QDQ operator as
the ONNX specification defines it), in LSB of the output's scale where the output is quantized:
the share within 1 LSB and the share equal. A deep network amplifies the rare .5-tie flips
of a requantise step (one flipped value changes the next layer's sums), so for BERT the rule
is also checked **layer by layer** (``--layers``): each encoder layer is cut out of the QDQ
file (``onnx.utils.extract_model``) and both engines run it on the same input, ONNX Runtime's
own value of that layer's input.

**Per task**: heronlike's best latency, GOP/s and % of this machine's measured peak
(:func:`benchmarks.peak.measure_peaks` on ``--threads`` threads: for a task tensorized onto the
int8 intrinsic the kernel of its instruction, ``vpdpbusd`` with VNNI, else ``vpmaddwd``; the
fp32 FMA kernel for every other task, the float layers of an int8 model included; named in the
row).

Writes ``<out>/models_int8-<model>-<quantize>-t<trials>-<cpu>-<date>.csv`` (one row per engine,
every row naming the CPU and date), ``...-tasks.csv``, ``...-layers.csv`` (``--layers``) and a
``.png`` bar chart (with matplotlib).

    python benchmarks/models_int8.py --model resnet50 --trials 400
    python benchmarks/models_int8.py --model bert --quantize qdq --trials 300 --layers
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from benchmarks.models_e2e import median_latency  # noqa: E402
from heronlike.host import machine_slug, machine_stamp  # noqa: E402

ENGINES = ("heronlike_int8", "onnxruntime_int8", "heronlike_float32", "onnxruntime_float32")

#: where each model's layers end, for the layer-by-layer agreement: the quantized output of
#: each block (BERT: each encoder layer's final LayerNorm; the embeddings' LayerNorm before)
LAYER_OUTPUTS = {
    "bert": r"^/bert/(embeddings|encoder/layer\.\d+/output)/LayerNorm/"
    r"LayerNormalization_output_0_QuantizeLinear_Output$",
}


# ------------------------------------------------------------------------------------------------
# files


def quantize(
    fp32: Path, out: Path, how: str, sample: Callable[[int], dict[str, np.ndarray]]
) -> None:
    """Quantize ``fp32`` into ``out`` with ONNX Runtime's tools (``how``: ``"qdq"`` or
    ``"dynamic"``); ``sample(i)`` gives the i-th calibration input."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    if how == "dynamic":
        quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8)
        return

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self._it = iter(range(8))

        def get_next(self) -> dict[str, np.ndarray] | None:
            i = next(self._it, None)
            return None if i is None else sample(i)

    quantize_static(
        str(fp32),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )


def ort_session(path: Path, threads: int, *, reference: bool = False) -> Any:
    """An ONNX Runtime CPU session: ``threads`` intra-op threads, sequential; all graph
    optimizations, or none (``reference``: each operator as the ONNX specification says)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if reference:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def output_scale(path: Path) -> float | None:
    """The scale of the graph output's ``DequantizeLinear`` (one LSB), None if the output is
    not quantized."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    init = {i.name: i for i in model.graph.initializer}
    producer = {o: n for n in model.graph.node for o in n.output}
    node = producer.get(model.graph.output[0].name)
    if node is None or node.op_type != "DequantizeLinear" or node.input[1] not in init:
        return None
    return float(onnx.numpy_helper.to_array(init[node.input[1]]).reshape(()))


# ------------------------------------------------------------------------------------------------
# agreement


def agreement(got: np.ndarray, want: np.ndarray, lsb: float | None) -> dict[str, float]:
    """``got`` against ``want``: max |difference| and its share of ``want``'s range; where the
    values are quantized (``lsb``), the shares within 1 LSB and equal, and the largest gap in
    LSB."""
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    out = {"max_abs_err": float(diff.max()), "rel_err": float(diff.max() / np.abs(want).max())}
    if lsb:
        steps = diff / lsb
        out.update(
            within_1lsb=float((steps <= 1.0 + 1e-3).mean()),
            equal=float((steps < 0.5).mean()),
            max_lsb=float(steps.max()),
        )
    return out


def layer_agreement(
    int8: Path, pattern: str, feed: dict[str, np.ndarray], target: str, work: Path
) -> list[dict[str, Any]]:
    """Each layer of ``int8`` (between consecutive tensors whose names match ``pattern``) cut
    out and run by heronlike (untuned) and by ONNX Runtime's reference, on ONNX Runtime's own
    value of the layer's input; a row per layer with :func:`agreement` in LSB of its output.
    The model's graph inputs stay inputs of every layer (BERT's attention mask is computed
    from the token ids inside each)."""
    import onnx
    from onnx.utils import extract_model

    import heronlike.model as hm

    model = onnx.load(str(int8))
    bounds = [o for n in model.graph.node for o in n.output if re.search(pattern, o)]
    if len(bounds) < 2:
        raise ValueError(f"fewer than two tensors of {int8.name} match {pattern!r}")
    graph_inputs = [i.name for i in model.graph.input]
    # ONNX Runtime's reference values of every boundary
    probe = work / f"{int8.stem}-probe.onnx"
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(b) for b in bounds)
    onnx.save(model, str(probe))
    values = dict(zip(bounds, ort_session(probe, 1, reference=True).run(bounds, feed)))
    scales = _quantize_scales(int8, bounds)
    rows = []
    for i, (first, last) in enumerate(zip(bounds, bounds[1:])):
        part = work / f"{int8.stem}-layer{i}.onnx"
        extract_model(str(int8), str(part), [first, *graph_inputs], [last])
        _set_input_shape(part, first, values[first].shape)
        sub_feed = {first: values[first], **feed}
        want = ort_session(part, 1, reference=True).run(None, sub_feed)[0]
        compiled = hm.compile_model(part, target)
        got = np.asarray(compiled(*(sub_feed[n] for n in [first, *graph_inputs])))
        # a QuantizeLinear output holds the integer codes themselves: its LSB is 1
        lsb = 1.0 if np.issubdtype(want.dtype, np.integer) else scales[last]
        index = re.search(r"layer\.(\d+)", last)
        row = {"layer": index.group(1) if index else i, "output": last}
        row.update(agreement(got, want, lsb))
        rows.append(row)
        print(
            f"  layer {row['layer']}: {row['equal']:.4%} equal, {row['within_1lsb']:.4%} "
            f"within 1 LSB, at most {row['max_lsb']:.0f} LSB apart",
            flush=True,
        )
    return rows


def _set_input_shape(path: Path, name: str, shape: tuple[int, ...]) -> None:
    """Give input ``name`` of the ONNX file a concrete shape (a cut-out layer's input has
    the exporter's symbolic dimensions)."""
    import onnx

    model = onnx.load(str(path))
    for inp in model.graph.input:
        if inp.name == name:
            dims = inp.type.tensor_type.shape.dim
            for dim, size in zip(dims, shape):
                dim.Clear()
                dim.dim_value = int(size)
    onnx.save(model, str(path))


def _quantize_scales(path: Path, names: list[str]) -> dict[str, float]:
    """The scale of each ``QuantizeLinear`` output in ``names``."""
    import onnx

    model = onnx.load(str(path))
    init = {i.name: i for i in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        if node.op_type == "QuantizeLinear" and node.output[0] in names:
            out[node.output[0]] = float(onnx.numpy_helper.to_array(init[node.input[1]]).reshape(()))
    return out


# ------------------------------------------------------------------------------------------------
# heronlike


def tune_and_compile(
    model: Path, target: str, trials: int, records: Path, args: Any
) -> dict[str, Any]:
    """Tune ``model`` (an ONNX file) on ``target``, compile it with the records, export and load
    it back. Returns the call, the tuning time (seconds) and per task its weight, FLOP and
    best latency."""
    import heronlike.model as hm

    t0 = time.perf_counter()
    result = None
    if trials > 0:  # 0: compile untuned (every task gets its default schedule)
        result = hm.tune_model(
            model,
            target,
            trials=trials,
            records=records,
            explorer=args.explorer,
            seed=args.seed,
            batch_size=args.batch_size,
        )
    tune_s = time.perf_counter() - t0
    compiled = hm.compile_model(model, target, records if result else None)
    print(compiled.summary(), flush=True)
    loaded = hm.load(compiled.export_library(records.with_suffix(".so")))
    found = hm.extract_tasks(model, target)
    flop = {t.workload_key: t.flop for t in found}
    tensorized = {
        t.workload_key
        for t in found
        if t.space is not None and any(s.op == "tensorize" for s in t.space.template.steps)
    }
    tasks = [
        dict(
            task=t.name,
            weight=t.weight,
            flop=flop.get(t.workload_key, 0.0),
            tensorized=t.workload_key in tensorized,
            trials=getattr(t, "trials", 0),
            best_latency_s=getattr(t, "best_latency_s", None),
        )
        for t in (result.tasks if result else found)
    ]
    return dict(
        model=loaded,
        tune_s=tune_s,
        trials=result.trials_done if result else 0,
        estimate_s=result.estimate_s if result else None,
        tasks=tasks,
        target_key=compiled.target_key,
        quantization=compiled.quantization,
    )


def in_model_latency(model: Any, *inputs: Any, runs: int = 10) -> dict[str, float]:
    """Per task, the median seconds of one call of its kernel inside ``model`` (a compiled
    model), from :meth:`heronlike.model.CompiledModel.profile`: what the task costs where it
    runs, beside its ``best_latency_s`` timed alone."""
    total: dict[str, list[float]] = {}
    for c in model.profile(*inputs, runs=runs).calls:
        if c.task is not None and c.calls:
            seconds, calls = total.get(c.task, [0.0, 0])
            total[c.task] = [seconds + c.seconds, calls + c.calls]
    return {task: seconds / calls for task, (seconds, calls) in total.items()}


def measure_peak(threads: int) -> dict[str, tuple[str, float]]:
    """This machine's measured peaks on ``threads`` threads, by precision: ``"int8"`` the
    kernel of the instruction the int8 tasks run on, chosen as the target chooses it
    (``vpdpbusd`` with VNNI, else ``vpmaddwd`` on AVX-512BW, else on AVX2), ``"float32"`` the
    fp32 FMA kernel. Values are ``(kernel, op/s)``."""
    from benchmarks.peak import measure_peaks

    wanted = {
        "int8": ["vnni_u8s8_avx512", "vnni_u8s8_avx", "pmaddwd_s16_avx512", "pmaddwd_s16_avx2"],
        "float32": ["fma_f32_avx512", "fma_f32_avx2"],
    }
    try:
        rows = measure_peaks(
            threads=[threads], repeats=3, kernels=[n for names in wanted.values() for n in names]
        )
    except Exception as err:  # noqa: BLE001 - % of peak is then unknown
        print(f"peak not measured: {err}", flush=True)
        return {}
    by_kernel = {str(r["kernel"]): float(r["ops_per_s"]) for r in rows}
    out = {}
    for precision, names in wanted.items():
        for name in names:
            if name in by_kernel:
                out[precision] = (name, by_kernel[name])
                break
    return out


# ------------------------------------------------------------------------------------------------
# main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["resnet50", "bert"], default="resnet50")
    ap.add_argument("--quantize", choices=["qdq", "dynamic"], default="qdq")
    ap.add_argument(
        "--trials", type=int, default=400, help="heronlike int8's trial budget (0: untuned)"
    )
    ap.add_argument("--float-trials", type=int, default=None, help="float32's (default: same)")
    ap.add_argument(
        "--target",
        default="llvm",
        help="heronlike int8's target (llvm: VNNI for the integer layers where the CPU has it)",
    )
    ap.add_argument("--layers", action="store_true", help="also check agreement layer by layer")
    ap.add_argument("--explorer", default="cga")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "benchmarks" / "results")
    ap.add_argument("--work", type=Path, default=REPO_ROOT / "benchmarks" / "out")
    args = ap.parse_args()
    if args.float_trials is None:
        args.float_trials = args.trials
    os.environ.setdefault("TVM_NUM_THREADS", str(args.threads))

    import torch

    from benchmarks.models.torch_nets import MODELS

    torch.set_num_threads(args.threads)
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    net, example = MODELS[args.model]()
    fp32 = work / f"{args.model}-float.onnx"
    if not fp32.exists():
        torch.onnx.export(
            net, example, str(fp32), input_names=["x"], opset_version=17, dynamo=False
        )
    x0 = example[0]

    def sample(i: int) -> dict[str, np.ndarray]:
        g = torch.Generator().manual_seed(100 + i)
        if x0.dtype == torch.int64:  # token ids
            return {"x": torch.randint(0, 30522, tuple(x0.shape), generator=g).numpy()}
        return {"x": torch.randn(*x0.shape, generator=g).numpy()}

    int8 = work / f"{args.model}-{args.quantize}.onnx"
    if not int8.exists():
        print(f"== quantizing ({args.quantize}) with ONNX Runtime's tools", flush=True)
        quantize(fp32, int8, args.quantize, sample)
    feed = {"x": x0.numpy()}

    print(f"== heronlike int8 on {args.target}: {args.trials} trials", flush=True)
    h8 = tune_and_compile(
        int8, args.target, args.trials, work / f"{args.model}-{args.quantize}-int8.sqlite", args
    )
    print(f"== heronlike float32 on llvm: {args.float_trials} trials", flush=True)
    h32 = tune_and_compile(
        fp32, "llvm", args.float_trials, work / f"{args.model}-float.sqlite", args
    )
    ort8, ort32 = ort_session(int8, args.threads), ort_session(fp32, args.threads)
    calls: dict[str, Callable[[], Any]] = {
        "heronlike_int8": lambda: h8["model"](feed["x"]),
        "onnxruntime_int8": lambda: ort8.run(None, feed)[0],
        "heronlike_float32": lambda: h32["model"](feed["x"]),
        "onnxruntime_float32": lambda: ort32.run(None, feed)[0],
    }
    rows: dict[str, dict[str, Any]] = {e: {"engine": e} for e in ENGINES}
    reference = ort_session(int8, 1, reference=True).run(None, feed)[0]
    float_ref = np.asarray(calls["onnxruntime_float32"]())
    lsb = output_scale(int8)
    print("== timing", flush=True)
    for engine, call in calls.items():
        out = np.asarray(call())
        want = reference if engine.endswith("int8") else float_ref
        rows[engine].update(agreement(out, want, lsb if engine.endswith("int8") else None))
        rows[engine]["float_rel_err"] = agreement(out, float_ref, None)["rel_err"]
        rows[engine]["latency_s"], rows[engine]["timed_runs"] = median_latency(
            call, args.warmup, args.repeat
        )
        print(f"  {engine:20s} {rows[engine]['latency_s'] * 1e3:10.2f} ms", flush=True)
    for engine, h in (("heronlike_int8", h8), ("heronlike_float32", h32)):
        rows[engine].update(tune_s=h["tune_s"], trials=h["trials"], estimate_s=h["estimate_s"])
        in_model = in_model_latency(h["model"], feed["x"])
        for t in h["tasks"]:
            t["in_model_latency_s"] = in_model.get(t["task"])
    rows["heronlike_int8"]["target"] = h8["target_key"]
    rows["heronlike_float32"]["target"] = "llvm"
    q = h8["quantization"]
    rows["heronlike_int8"]["integer_layers"] = len(q.get("integer", []))
    rows["heronlike_int8"]["float_layers"] = len(q.get("float", []))

    layer_rows: list[dict[str, Any]] = []
    if args.layers and args.model in LAYER_OUTPUTS and args.quantize == "qdq":
        print("== layer by layer", flush=True)
        layer_rows = layer_agreement(int8, LAYER_OUTPUTS[args.model], feed, args.target, work)

    peaks = measure_peak(args.threads)
    stamp = machine_stamp()
    cpu = machine_slug()
    stem = f"models_int8-{args.model}-{args.quantize}-t{args.trials}-{cpu}-{stamp['date']}"
    args.out.mkdir(parents=True, exist_ok=True)
    fields = [
        "model", "quantize", "engine", "target", "latency_s", "speedup_vs_onnxruntime_int8",
        "speedup_vs_own_float32", "within_1lsb", "equal", "max_lsb", "max_abs_err", "rel_err",
        "float_rel_err", "integer_layers", "float_layers", "timed_runs", "tune_s", "trials",
        "estimate_s", "threads", "cpu_model", "cpu_signature", "date",
    ]  # fmt: skip
    own_float = {"heronlike": "heronlike_float32", "onnxruntime": "onnxruntime_float32"}
    with open(args.out / f"{stem}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for engine in ENGINES:
            r = rows[engine]
            r.update(model=args.model, quantize=args.quantize, threads=args.threads, **stamp)
            r["speedup_vs_onnxruntime_int8"] = (
                rows["onnxruntime_int8"]["latency_s"] / r["latency_s"]
            )
            base = own_float[engine.split("_")[0]]
            r["speedup_vs_own_float32"] = rows[base]["latency_s"] / r["latency_s"]
            w.writerow(r)
    with open(args.out / f"{stem}-tasks.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["model", "precision", "task", "tensorized", "weight", "gop", "trials",
             "best_latency_s", "gop_per_s", "pct_of_peak", "peak_kernel", "in_model_latency_s",
             "cpu_model", "date"]
        )  # fmt: skip
        for precision, h in (("int8", h8), ("float32", h32)):
            for t in h["tasks"]:
                # a task on the int8 intrinsic against its instruction's peak, any other (the
                # float layers an int8 model keeps) against the fp32 FMA peak
                kernel, peak = peaks.get("int8" if t["tensorized"] else "float32", (None, None))
                lat = t["best_latency_s"]
                rate = t["flop"] / lat if lat else None
                w.writerow(
                    [args.model, precision, t["task"], t["tensorized"], t["weight"],
                     t["flop"] / 1e9, t["trials"], lat, rate / 1e9 if rate else None,
                     100 * rate / peak if rate and peak else None, kernel,
                     t.get("in_model_latency_s"), stamp["cpu_model"], stamp["date"]]
                )  # fmt: skip
    if layer_rows:
        with open(args.out / f"{stem}-layers.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[*layer_rows[0], "cpu_model", "date"])
            w.writeheader()
            for r in layer_rows:
                w.writerow({**r, "cpu_model": stamp["cpu_model"], "date": stamp["date"]})
    _plot(args, rows, stem, stamp)
    print(f"wrote {args.out / stem}.csv and -tasks.csv" + (", -layers.csv" if layer_rows else ""))


def _plot(args: Any, rows: dict[str, dict[str, Any]], stem: str, stamp: dict[str, str]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = [e for e in ENGINES if "latency_s" in rows[e]]
    ax.barh(names, [rows[e]["latency_s"] * 1e3 for e in names], color="#4878a8")
    ax.invert_yaxis()
    ax.set_xlabel("latency (ms, median; lower is better)")
    ax.set_title(
        f"{args.model} {args.quantize} int8, {args.threads} threads: {stamp['cpu_model']}, "
        f"{stamp['date']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(args.out / f"{stem}.png", dpi=120)


if __name__ == "__main__":
    main()
