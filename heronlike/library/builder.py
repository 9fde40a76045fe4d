"""``build``: tune a model's workloads (or reuse their records) and export one kernel library.

Pipeline: operator list -> one :class:`~heronlike.scheduler.Task` per distinct workload
(occurrences summed) -> :class:`~heronlike.scheduler.TaskScheduler` (the total budget spread by
expected gain; resumes from the records) -> the best recorded candidate of each workload
(apply-best: this heronlike and TVM version, fitting today's space) -> every kernel in one
``tvm.compile`` -> ``kernels.so`` (``export_library``) + ``manifest.json`` -> optionally each
kernel run through the dispatcher and compared bit-exact (integers) with numpy.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..records import VERSION_KEYS, Records, TrialRecord, current_versions
from ..scheduler import RoundInfo, ScheduleResult, Task, TaskScheduler
from .runtime import (
    CUDA_FORMAT_VERSION,
    CUDA_RUNTIME,
    FORMAT,
    MANIFEST,
    TVM_FORMAT_VERSION,
    TVM_RUNTIME,
    load,
)
from .workloads import Workload, load_operator_list, merge_duplicates

__all__ = ["BuildResult", "build", "export", "numpy_reference"]

LIBRARY_FILE = "kernels.so"

#: how each operator's operands are laid out (the manifest's ``layout``)
LAYOUTS = {
    "conv2d": "x NHWC (N,H,W,CI); w OHWI (CO,KH,KW,CI); y NHWC (N,HO,WO,CO)",
    "gemm": "X row-major (M,K); W (N,K) like torch.nn.Linear.weight; C = X @ W.T (M,N)",
    "bmm": "X (B,M,K); W (B,N,K); C[b] = X[b] @ W[b].T (B,M,N)",
    "gemv": "x (K,); A (M,K); y = A @ x (M,)",
}


@dataclass
class BuildResult:
    """What :func:`build` produced.

    Attributes:
        path: the library folder (``kernels.so`` + ``manifest.json``).
        manifest: the manifest written.
        schedule: the scheduler's result (None when ``trials`` was 0: records only).
        workloads: the distinct workloads, occurrences summed.
        missing: labels of workloads without a usable record (not in the library).
        estimate_s: ``sum(occurrences x latency)`` over the kernels in the library (seconds).
        checked: every kernel was run on random inputs and matched numpy (None: not checked).
        time_s: seconds by phase: ``tune``, ``export``, ``check``, ``total``.
    """

    path: Path
    manifest: dict[str, Any]
    schedule: ScheduleResult | None
    workloads: list[Workload]
    missing: list[str]
    estimate_s: float
    checked: bool | None
    time_s: dict[str, float] = field(default_factory=dict)


def _warn_other_targets(db: Records, keys: Mapping[str, str], target_key: str) -> None:
    """Warn about trials of these workloads recorded for another target (never reused)."""
    other: dict[str, int] = {}
    for w in db.workloads():
        if w["workload_key"] in keys and w["target_key"] != target_key and w["trials"]:
            other[w["target_key"]] = other.get(w["target_key"], 0) + int(w["trials"])
    if other:
        listed = "; ".join(f"{n} trials for {tk!r}" for tk, n in sorted(other.items()))
        warnings.warn(
            f"{db.path}: records of these workloads on other targets are skipped ({listed}); "
            f"this library is built for {target_key!r}",
            stacklevel=3,
        )


def _warn_other_versions(db: Records, spaces: Sequence[Any], versions: Mapping[str, str]) -> None:
    """Warn about trials of these workloads recorded by another heronlike or TVM version."""
    n = 0
    for space in spaces:
        _, foreign = db.split_by_version(space.workload_key, space.target.key, versions)
        n += len(foreign)
    if n:
        today = ", ".join(f"{k} {versions.get(k, '?')}" for k in VERSION_KEYS)
        warnings.warn(
            f"{db.path}: {n} trials of these workloads were recorded by another heronlike or "
            f"TVM version (this is {today}); they are skipped, not reused",
            stacklevel=3,
        )


def best_usable_trial(db: Records, space: Any, versions: Mapping[str, str]) -> TrialRecord | None:
    """The kernel to build for ``space``'s workload and target from ``db``: among the ok
    trials recorded by ``versions`` (:func:`heronlike.records.current_versions`) that fit
    today's space (:meth:`~heronlike.space.Space.misfits`), the one the latest tune picked by
    re-measuring its finalists, else the fastest (:meth:`~heronlike.records.Records.chosen`);
    None when there is none. Records of the legacy text key are adopted first
    (:meth:`~heronlike.records.Records.adopt`)."""
    wk, tk = space.workload_key, space.target.key
    db.adopt(wk, space.legacy_workload_key)
    by_index = db.versions_of(wk, tk)

    def usable(r: TrialRecord) -> bool:
        v = by_index.get(r.trial_index)
        same = v is None or all(v.get(k) == versions.get(k) for k in VERSION_KEYS)
        return same and not space.misfits(r.assignment)

    best = db.chosen(wk, tk, where=usable)
    if best is None:
        return None
    point = space.fit(best.assignment)
    return best.at(point) if point is not None else None


def _symbol(op: str, index: int, params: Mapping[str, int], dtype: str) -> str:
    dims = "_".join(f"{k.lower()}{v}" for k, v in params.items())
    return re.sub(r"[^A-Za-z0-9_]", "_", f"hl_{op}_{index}_{dims}_{dtype}")


def _pack_function(kernel_shape: Sequence[int], dtype: str, layout: Any, symbol: str) -> Any:
    """A PrimFunc ``(src, dst)`` that writes ``src`` (kernel shape) into ``dst`` in
    ``layout`` (the same ``transform_layout`` index map the kernel's schedule applied)."""
    from tvm import s_tir, te

    src = te.placeholder(tuple(kernel_shape), dtype, name="src")
    dst = te.compute(tuple(kernel_shape), lambda *i: src(*i), name="dst")
    sch = s_tir.Schedule(te.create_prim_func([src, dst]))
    sch.transform_layout(sch.get_sblock("dst"), ("write", 0), layout)
    return sch.mod["main"].with_attr("global_symbol", symbol)


def export(
    entries: Sequence[tuple[Workload, Any, TrialRecord]],
    out_dir: str | Path,
    *,
    records: str | Path,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Compile the kernels of ``entries`` (workload, space, best trial) into one shared library
    ``out_dir/kernels.so`` and write ``out_dir/manifest.json``; return the manifest.

    Every kernel is a function of the library, named in the manifest (``function``), taking
    its parameters in the compute's order (inputs then output) in the kernel's layout; a weight
    the schedule packs comes with a ``<function>__pack_<param>`` function that packs it.

    On a CUDA target (``cuda -tensorcore``) each kernel is instead built by nvcc into
    ``out_dir/kernels/<function>.cubin`` (beside its CUDA source), and its entry holds the
    launch manifest (grid, block, shared bytes, arguments) that the CuPy dispatcher runs
    (:mod:`heronlike.library.cuda`); no GPU is needed to export.

    Raises:
        InvalidArgumentError: no entries, or entries of different targets.
        RuntimeError: TVM or nvcc failed to compile (a record that no longer builds), or a
            CUDA kernel spills or exceeds the target's limits.
    """
    import tvm

    from ..host import cpu_model

    if not entries:
        raise InvalidArgumentError("nothing to export: no workload has a usable record")
    targets = {space.target.key for _, space, _ in entries}
    if len(targets) != 1:
        raise InvalidArgumentError(f"entries of several targets: {sorted(targets)}")
    target = entries[0][1].target
    cuda = str(getattr(target, "device", "cpu")).startswith("cuda")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    funcs: dict[str, Any] = {}
    modules: dict[str, Any] = {}
    kernels = []
    for index, (w, space, rec) in enumerate(entries):
        symbol = _symbol(w.op, index, w.params, w.dtype)
        program = space.program(rec.assignment)
        modules[symbol] = program
        funcs[symbol] = program["main"].with_attr("global_symbol", symbol)
        params = []
        outputs = set(space.logical.outputs)
        for lp, kp in zip(space.logical.params, space.template.func.params, strict=True):
            kshape = tuple(int(d) for d in kp.shape)
            layout = space.packed.get(lp.name)
            pack = None
            packed_shape = kshape
            if layout is not None:
                if lp.name in outputs or cuda:
                    where = "the output" if lp.name in outputs else "on a CUDA target,"
                    raise InvalidArgumentError(
                        f"{w.label}: {where} {lp.name} is packed; not supported by export"
                    )
                pack = f"{symbol}__pack_{lp.name}"
                funcs[pack] = _pack_function(kshape, lp.dtype, layout, pack)
                packed_shape = tuple(int(d) for d in layout.packed_shape(kshape))
            params.append(
                {
                    "name": lp.name,
                    "role": "output" if lp.name in outputs else "input",
                    "dtype": lp.dtype,
                    "shape": [int(d) for d in lp.shape],
                    "kernel_shape": list(kshape),
                    "pack": pack,
                    "packed_shape": list(packed_shape),
                }
            )
        kernels.append(
            {
                "function": symbol,
                "op": w.op,
                "name": w.label,
                "shape": w.params,
                "dtype": w.dtype,
                "layout": LAYOUTS.get(w.op, f"heronlike.ops.{w.op} layouts"),
                "occurrences": w.occurrences,
                "latency_s": rec.latency_s,
                "flop": float(space.logical.flop()),
                "params": params,
                "records": {
                    "file": str(records),
                    "workload_key": space.workload_key,
                    "target_key": space.target.key,
                    "trial_index": rec.trial_index,
                },
                "assignment": dict(sorted(rec.assignment.items())),
            }
        )
    t0 = time.perf_counter()
    if cuda:  # one cubin per kernel, launched through CuPy (heronlike.library.cuda)
        from .cuda import write_cubins

        write_cubins(kernels, modules, out, target)
        stored: dict[str, Any] = {
            "format_version": CUDA_FORMAT_VERSION,
            "library": None,
            "runtime": CUDA_RUNTIME,
        }
    else:
        executable = tvm.compile(tvm.IRModule(funcs), target=tvm.target.Target(target.tvm_target()))
        tmp = out / (LIBRARY_FILE + ".tmp.so")
        executable.export_library(str(tmp))
        tmp.replace(out / LIBRARY_FILE)
        stored = {
            "format_version": TVM_FORMAT_VERSION,
            "library": LIBRARY_FILE,
            "runtime": TVM_RUNTIME,
        }
    manifest = {
        "format": FORMAT,
        **stored,
        "target": target.key,
        "tvm_target": target.tvm_target(),
        "versions": current_versions(),
        "host_cpu": cpu_model(),
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "compile_s": round(time.perf_counter() - t0, 3),
        "estimate_s": sum(k["occurrences"] * (k["latency_s"] or 0.0) for k in kernels),
        **dict(extra or {}),
        "kernels": kernels,
    }
    tmp_manifest = out / (MANIFEST + ".tmp")
    tmp_manifest.write_text(json.dumps(manifest, indent=1) + "\n")
    tmp_manifest.replace(out / MANIFEST)
    return manifest


def numpy_reference(
    w: Workload, inputs: Sequence[np.ndarray], out_dtype: str | np.dtype | None = None
) -> np.ndarray:
    """The exact output of workload ``w`` on ``inputs`` computed with numpy alone: integer
    products summed in float64 while every partial sum is below 2**53, else in int64, then
    wrapped to the output dtype (as an int32 accumulator wraps). ``conv2d``: one tensordot per
    kernel tap over the zero-padded input; ``gemm``/``bmm``/``gemv``: an einsum
    (:func:`heronlike.exact.exact_einsum`). Other operators go through
    :func:`heronlike.reference.reference_outputs` (TVM on the unscheduled compute).

    ``out_dtype`` (default: the one :func:`heronlike.ops.dtypes` gives ``w.dtype``) spares the
    import of TVM: with it, conv2d and the matrix products need numpy alone, as on a GPU machine
    checking a CUDA library.
    """
    from ..exact import exact_einsum

    if out_dtype is None:
        from .. import ops

        out_dtype = ops.dtypes(w.dtype)[2]
    out_dtype = np.dtype(out_dtype)
    p = w.params
    if w.op == "conv2d":
        from ..measure.run_bundle import conv2d_nhwc_reference

        x, wt = inputs
        k = p["KH"] * p["KW"] * p["CI"]
        bound = k * float(np.abs(x).max(initial=0)) * float(np.abs(wt).max(initial=0))
        wide = np.float64 if out_dtype.kind == "f" or bound < 2**53 else np.int64
        y = conv2d_nhwc_reference(
            x.astype(wide),
            wt.astype(wide),
            [p["stride"]] * 2,
            [p["pad"]] * 2,
            [p["dilation"]] * 2,
        )
        return (
            y.astype(np.int64).astype(out_dtype) if out_dtype.kind in "iu" else y.astype(out_dtype)
        )
    specs = {"gemm": "mk,nk->mn", "bmm": "bmk,bnk->bmn", "gemv": "k,mk->m"}
    if w.op in specs:
        return exact_einsum(specs[w.op], inputs[0], inputs[1], out_dtype)
    from ..dag import ComputeDAG
    from ..reference import reference_outputs

    dag = ComputeDAG.from_compute(w.compute())
    arrays, given = [], iter(inputs)
    for prm in dag.params:
        arrays.append(np.zeros(prm.shape, prm.dtype) if prm.name in dag.outputs else next(given))
    return next(iter(reference_outputs(dag, arrays).values()))


def random_operands(info: Any, rng: np.random.Generator) -> list[np.ndarray]:
    """Random inputs of a kernel (a :class:`~heronlike.library.runtime.KernelInfo`): integers
    over their dtype's full range, floats in [-1, 1)."""
    out = []
    for p in info.inputs:
        dt = np.dtype(p.dtype)
        if dt.kind in "iu":
            ii = np.iinfo(dt)
            out.append(rng.integers(ii.min, ii.max, p.shape, dtype=dt, endpoint=True))
        else:
            out.append(rng.uniform(-1, 1, p.shape).astype(dt))
    return out


def check_library(path: str | Path, seed: int = 0) -> dict[str, bool]:
    """Run every kernel of the library at ``path`` on random inputs and compare with
    :func:`numpy_reference` (bit-exact for integer outputs, ``rtol=1e-3`` scaled by
    ``sqrt(K)`` for floats). Returns ``{function: ok}``."""
    lib = load(path)
    rng = np.random.default_rng(seed)
    result = {}
    for k in lib.kernels:
        w = Workload(k.op, tuple(k.attrs.items()), k.dtype)
        xs = random_operands(k, rng)
        got = lib.run(k, *xs)
        want = numpy_reference(w, xs, k.outputs[0].dtype)
        if np.issubdtype(want.dtype, np.integer):
            result[k.function] = bool(np.array_equal(got, want))
        else:
            red = max(1, int(k.entry.get("flop", 2) / 2 / max(1, want.size)))
            tol = 1e-3 * math.sqrt(red)
            result[k.function] = bool(np.allclose(got, want, rtol=1e-3, atol=tol))
    return result


def runs_here(target: Any) -> bool:
    """Whether this machine can run ``target``'s kernels to check a library: always for a CPU
    target; for a CUDA target when CuPy sees a GPU (asked in a subprocess,
    :func:`heronlike.measure.cupy_runner.gpu_probe`). Warns when it cannot."""
    if getattr(target, "runs_in_process", True):
        return True
    from ..measure.cupy_runner import gpu_probe

    probe = gpu_probe()
    if probe.devices == 0:
        warnings.warn(
            f"the library's kernels are not checked: {probe.reason} (check it on a GPU "
            "machine with heronlike.library.check_library(path))",
            stacklevel=3,
        )
    return probe.devices > 0


def build(
    operators: str | Path | Iterable[Workload | Mapping[str, Any]],
    target: str | Mapping[str, Any] | Any = "dlboost",
    *,
    trials: int,
    out_dir: str | Path,
    records: str | Path | None = None,
    strategy: str = "gradient",
    batch_size: int = 8,
    seed: int = 0,
    explorer: str = "random",
    explorer_options: Mapping[str, Any] | None = None,
    evaluator: Any = None,
    runner: Any = None,
    parallel: int = 1,
    max_trials_per_task: int | None = None,
    batch: int | None = None,
    dtype: str | None = None,
    check: bool = True,
    progress: Callable[[RoundInfo], None] | None = None,
) -> BuildResult:
    """Build a kernel library for a model: tune its workloads within ``trials`` in total (or
    reuse their records), export every best kernel into one shared library with a manifest.

    Args:
        operators: the model's operator list: a JSON file, a model module name (``resnet50``
            means ``benchmarks.models.resnet50``), or a list of :class:`Workload` / dicts
            (``op``, ``shape``, ``dtype``, ``occurrences``); see
            :mod:`heronlike.library.workloads`. Duplicates are merged (occurrences summed).
            Or a model itself (a Relax ``IRModule``, an ``.onnx`` file, ``MODULE:FUNCTION``):
            its tasks are the workloads (:func:`heronlike.model.library.build_library`).
        target: target name, string, dict or object; e.g. ``"dlboost"`` (VNNI) or ``"llvm"``
            (``"dlboost -general"``: any compute, general rule set).
        trials: total trial budget over all workloads, counting the trials already in
            ``records`` (a rerun resumes; after a finished build a rerun measures nothing).
            0: no tuning, export from the records only.
        out_dir: the library folder to write (``kernels.so``, ``manifest.json``).
        records: SQLite records file (default ``heronlike_runs/records.sqlite``); also read
            for reuse (apply-best). Trials of another target, heronlike or TVM version are
            skipped with a warning.
        strategy: ``"gradient"`` (budget by expected gain) or ``"even"``; see
            :mod:`heronlike.scheduler`.
        batch_size, seed, explorer, explorer_options, evaluator, runner, parallel,
            max_trials_per_task, progress: as :class:`~heronlike.scheduler.TaskScheduler`.
        batch, dtype: passed to :func:`~heronlike.library.workloads.load_operator_list`.
        check: run every kernel of the exported library on random inputs against numpy
            (bit-exact for integers) and record the outcome in the manifest (``checked``).
            A CUDA library is checked only where CuPy sees a GPU (else a warning, and
            ``checked`` is None).

    Returns:
        A :class:`BuildResult`; ``missing`` lists workloads left out (no valid record).

    Raises:
        InvalidArgumentError: a malformed operator list or argument; no workload has a usable
            record (nothing to export).
        UnknownTargetError, UnsupportedDtypeError, UnsupportedShapeError ...: a workload the
            target cannot run (before anything is measured for it).
        RecordsMismatchError: ``records`` is not a heronlike records file.
    """
    from ..session import DEFAULT_RECORDS
    from ..space import generate_space
    from ..target import get_target

    t_start = time.perf_counter()
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
        raise InvalidArgumentError(f"trials must be an integer >= 0, got {trials!r}")
    from ..model.library import build_library, is_model_source

    if is_model_source(operators):
        return build_library(
            operators,
            target,
            trials=trials,
            out_dir=out_dir,
            records=records,
            check=check,
            seed=seed,
            strategy=strategy,
            batch_size=batch_size,
            explorer=explorer,
            evaluator=evaluator,
            progress=progress if progress is not None else False,
        )
    workloads = merge_duplicates(load_operator_list(operators, batch=batch, dtype=dtype))
    if not workloads:
        raise InvalidArgumentError("the operator list is empty")
    tgt = get_target(target)
    records_path = Path(records) if records is not None else DEFAULT_RECORDS
    computes = [w.compute(tgt) for w in workloads]
    spaces = [generate_space(c, tgt) for c in computes]
    with Records(records_path) as db:
        _warn_other_targets(
            db, {s.workload_key: w.label for s, w in zip(spaces, workloads)}, tgt.key
        )
    schedule = None
    if trials > 0:
        scheduler = TaskScheduler(
            [Task(w.label, c, w.occurrences) for w, c in zip(workloads, computes, strict=True)],
            tgt,
            trials=trials,
            strategy=strategy,
            records=records_path,
            batch_size=batch_size,
            seed=seed,
            explorer=explorer,
            explorer_options=explorer_options,
            evaluator=evaluator,
            runner=runner,
            parallel=parallel,
            max_trials_per_task=max_trials_per_task,
            progress=progress,
        )
        schedule = scheduler.run()
    t_tuned = time.perf_counter()
    versions = current_versions()
    entries, missing = [], []
    with Records(records_path) as db:
        if schedule is None:  # (the scheduler warns when it runs)
            _warn_other_versions(db, spaces, versions)
        for w, space in zip(workloads, spaces, strict=True):
            best = best_usable_trial(db, space, versions)
            if best is None:
                missing.append(w.label)
            else:
                entries.append((w, space, best))
    if missing:
        warnings.warn(
            f"no usable record for {len(missing)} workload(s), left out of the library: "
            + "; ".join(missing),
            stacklevel=2,
        )
    manifest = export(
        entries,
        out_dir,
        records=records_path,
        extra={
            "strategy": strategy,
            "trials_budget": trials,
            "missing": missing,
        },
    )
    return finish_build(
        out_dir,
        manifest,
        (lambda: check_library(out_dir, seed=seed)) if check and runs_here(tgt) else None,
        schedule=schedule,
        workloads=workloads,
        missing=missing,
        started=(t_start, t_tuned),
    )


def finish_build(
    out_dir: str | Path,
    manifest: dict[str, Any],
    check: Callable[[], Mapping[str, bool]] | None,
    *,
    schedule: ScheduleResult | None,
    workloads: list[Any],
    missing: list[str],
    started: tuple[float, float],
) -> BuildResult:
    """Run ``check`` (``{function: ok}``) on an exported library, record the outcome in its
    manifest and return the :class:`BuildResult`; ``started`` holds the ``perf_counter`` times
    the build and its export began."""
    t_start, t_tuned = started
    t_exported = time.perf_counter()
    checked = None
    if check is not None:
        outcome = check()
        checked = all(outcome.values())
        for k in manifest["kernels"]:
            k["checked"] = outcome.get(k["function"])
        manifest["checked"] = checked
        tmp = Path(out_dir) / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1) + "\n")
        tmp.replace(Path(out_dir) / MANIFEST)
    t_end = time.perf_counter()
    return BuildResult(
        path=Path(out_dir),
        manifest=manifest,
        schedule=schedule,
        workloads=workloads,
        missing=missing,
        estimate_s=float(manifest["estimate_s"]),
        checked=checked,
        time_s={
            "tune": t_tuned - t_start,
            "export": t_exported - t_tuned,
            "check": t_end - t_exported,
            "total": t_end - t_start,
        },
    )
