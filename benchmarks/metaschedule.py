"""TVM MetaSchedule as a baseline tuner: same compute, same trial budget, its default rules.

MetaSchedule gets a TE compute of :mod:`heronlike.ops` (the suite hands it the weight in the
layout heronlike's kernels take, :func:`pack_func_layouts`, or the operator's own layout): its
default x86 rules (``DefaultX86("vnni")`` on a VNNI CPU, the plain LLVM rules on a CPU without
VNNI) decide themselves whether and how to tensorize. Before tuning, heronlike's working VNNI
intrinsic replaces TVM's built-in ``"dot_16x4_vnni"`` (which fails LLVM 22's verifier; notes
tvm027.md §2), so MetaSchedule's ``MultiLevelTilingWithIntrin`` rule can produce working code;
by default with a guard that keeps it off non-contiguous weight tiles
(:func:`register_guarded_vnni`), without which MetaSchedule's best kernel can be wrong.

The tune runs in its own worker process (:class:`MetaScheduleWorker`) with the measuring thread
environment (``TVM_NUM_THREADS`` = cores; MetaSchedule's runner workers inherit it), builds with
:func:`benchmarks.ms_build.fast_build` and measures each trial with the same ``time_evaluator``
settings as heronlike's trials. A measure callback records the tuning curve (after each batch of
``trials_per_iter``: trials measured, seconds since ``tune_tir`` started, best latency so far).
Its best schedule is exported as a shared library, its assembly is kept (``best.s``) and searched
for ``vpdpbusd`` (whether the kernel really uses VNNI); the suite then times it with the same
harness as every other column and checks its output against the numpy reference.

:func:`pack_func_layouts` gives MetaSchedule's compute the weight layouts heronlike's kernels
take (heronlike's one-time weight pre-packing, :attr:`heronlike.space.Space.packed`), so both
tuners start from the same data layout.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heronlike.measure.runner import ManagedWorker, measure_env

REPO_ROOT = Path(__file__).resolve().parent.parent

#: a trial whose build or run failed is recorded by MetaSchedule with this latency (seconds)
FAILED_RUN_SECS = 1e10


@dataclass(frozen=True)
class MetaScheduleResult:
    """One MetaSchedule tune.

    Attributes:
        artifact_path: shared library of the best schedule (``None`` when no trial was valid).
        trials_run: tuning records in the database (measured candidates).
        valid: records whose run succeeded (``run_secs`` below :data:`FAILED_RUN_SECS`).
        tuning_latency_s: the best record's mean latency as measured during tuning (seconds).
        wall_s: seconds for ``tune_tir`` plus picking, compiling and exporting the best.
        error: why no kernel came out, else ``None``.
        curve: after each measured batch, ``(trials measured, seconds since tune_tir started,
            best latency so far in seconds or None)``; the latency of a trial is the median of
            its ``run_secs`` (heronlike's trials report the median too).
        uses_vnni: whether the best kernel's assembly holds ``vpdpbusd`` (``None``: no kernel,
            or its assembly could not be read).
    """

    artifact_path: str | None
    trials_run: int
    valid: int
    tuning_latency_s: float | None
    wall_s: float
    error: str | None = None
    curve: tuple[tuple[int, float, float | None], ...] = ()
    uses_vnni: bool | None = None


#: the instruction that marks a kernel as using AVX512-VNNI / AVX-VNNI (u8 x s8 dot products)
VNNI_MNEMONIC = "vpdpbusd"


def asm_uses(asm: str, mnemonic: str = VNNI_MNEMONIC) -> bool:
    """Whether assembly text holds the instruction ``mnemonic`` (any operand width or
    encoding): by default ``vpdpbusd`` (VNNI), or e.g. ``"vpmaddwd"``, the u8 x s8 intrinsic of
    CPUs without VNNI."""
    return mnemonic in asm.lower()


def executable_asm(executable: Any) -> str | None:
    """The assembly of a CPU ``tvm.compile`` result (``executable.mod.inspect_source("asm")``,
    TVM 0.27's LLVM module), or ``None`` where it cannot be read."""
    try:
        return str(executable.mod.inspect_source("asm"))
    except Exception:  # noqa: BLE001 - not an LLVM module, or no source kept
        return None


def library_uses_vnni(path: str | Path) -> bool | None:
    """Whether a shared library's machine code holds ``vpdpbusd`` (``objdump -d``), or ``None``
    when ``objdump`` is missing or fails."""
    import subprocess

    try:
        out = subprocess.run(
            ["objdump", "-d", "--no-show-raw-insn", str(path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return asm_uses(out)


_CURVE_CALLBACK: Any = None


def _curve_callback(t0: float, time_limit_s: float | None, trials: int) -> Any:
    """A MetaSchedule measure callback that appends ``(trials, seconds since t0, best latency)``
    to its ``points`` after every measured batch and, once ``time_limit_s`` seconds have
    passed, terminates the task (no new batch starts: heronlike's ``time_budget_s`` rule)
    unless the batch reached the tune's ``trials``, where TVM terminates it.
    The class is built on first use: it needs TVM."""
    global _CURVE_CALLBACK
    if _CURVE_CALLBACK is None:
        import statistics

        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

        @derived_object
        class CurveCallback(PyMeasureCallback):
            def __init__(self, t0: float, time_limit_s: float | None, trials: int) -> None:
                self.t0 = t0
                self.time_limit_s = time_limit_s
                self.trials = trials
                self.done = 0
                self.best: float | None = None
                self.points: list[tuple[int, float, float | None]] = []

            def apply(self, task_scheduler, task_id, candidates, builds, runs) -> None:  # noqa: ANN001
                for b, r in zip(builds, runs):
                    self.done += 1
                    secs = [float(x) for x in (r.run_secs or [])]
                    if b.error_msg is None and r.error_msg is None and secs:
                        lat = statistics.median(secs)
                        if lat < FAILED_RUN_SECS / 10 and (self.best is None or lat < self.best):
                            self.best = lat
                elapsed = time.perf_counter() - self.t0
                self.points.append((self.done, elapsed, self.best))
                # past the trial budget, TVM terminates the task itself after this batch
                # (terminating it twice fails TVM's check)
                over = self.time_limit_s is not None and elapsed >= self.time_limit_s
                if over and self.done < self.trials:
                    task_scheduler.terminate_task(task_id)

        _CURVE_CALLBACK = CurveCallback
    return _CURVE_CALLBACK(t0, time_limit_s, trials)


def register_guarded_vnni(name: str = "dot_16x4_vnni") -> str:
    """Register heronlike's VNNI intrinsic under ``name`` (replacing TVM's), with one guard.

    The description is heronlike's (``dla_targets/dlboost.py``: ``C[16] += A[4] · B[16, 4]``,
    u8 × s8 → s32); the implementation is heronlike's ``vpdpbusd`` call with the ``B`` operand
    declared compact (``strides=[4, 1]``). The implementation loads the 16 × 4 weight tile as 64
    contiguous bytes. Without the declared strides, TVM's ``tensorize`` also accepts a tile
    of a plain ``W[n, k]`` (row stride ``K``), and MetaSchedule then produces kernels that
    build, run and compute wrong results (measured: on a 128³ GEMM, the best of 8 trials
    computed wrong results). With the strides, such a tensorization fails at schedule time
    (``The buffer match constraint for B.strides_0 unmet``). MetaSchedule then records the
    candidate as a failure or uses a schedule without the intrinsic. heronlike always packs
    the weight, so the guard never rejects a heronlike schedule.
    """
    from tvm.s_tir import TensorIntrin

    from heronlike.dla_targets.dlboost import _vnni_functions

    desc, impl = _vnni_functions(compact_b=True)
    TensorIntrin.register(name, desc, impl, override=True)
    return name


def _init_worker(guard: bool) -> None:
    """Worker initializer: import MetaSchedule and TVM's tensor intrinsics once (not charged
    to any tune), then replace ``"dot_16x4_vnni"`` by heronlike's working one (with the
    compact-tile guard of :func:`register_guarded_vnni` when ``guard``)."""
    import tvm.s_tir.meta_schedule  # noqa: F401

    from heronlike.intrinsic import import_tvmscript_module

    import_tvmscript_module("tvm.s_tir.tensor_intrin")  # all of TVM's tensor intrinsics

    if guard:
        register_guarded_vnni("dot_16x4_vnni")
    else:
        from heronlike.dla_targets.dlboost import register_vnni

        register_vnni("dot_16x4_vnni", override=True)


def intrinsic_space(intrinsic: str) -> Any:
    """MetaSchedule's CPU design space with tensorization onto the registered TVM intrinsic
    ``intrinsic``: its default LLVM schedule rules with ``MultiLevelTilingWithIntrin`` (the
    ``SSRSRS`` structure and the cache-write reuse its x86 VNNI rules use) before the plain
    ``MultiLevelTiling``, and its CPU tensorization post-processors, i.e. what TVM's
    ``DefaultX86("vnni")`` builds, with another intrinsic. How MetaSchedule is given the
    vpmaddwd intrinsic heronlike uses on a CPU without VNNI.

    The result is the union of that space and MetaSchedule's default LLVM space:
    ``MultiLevelTilingWithIntrin`` replaces the untensorized tiling of a block it applies to,
    so the union lets MetaSchedule's search keep the plain kernels too (on some shapes they
    are its best), and gives it every advantage heronlike has."""
    from tvm.s_tir import meta_schedule as ms

    reuse = ms.schedule_rule.ReuseType(req="may", levels=[1, 2], scope="global")
    rules = []
    for rule in ms.ScheduleRule.create("llvm"):
        if type(rule).__name__ == "MultiLevelTiling":
            rules.append(
                ms.schedule_rule.MultiLevelTilingWithIntrin(
                    intrinsic,
                    structure="SSRSRS",
                    max_innermost_factor=64,
                    reuse_write=reuse,
                )
            )
        rules.append(rule)
    postprocs = [
        ms.postproc.DisallowDynamicLoop(),
        ms.postproc.RewriteParallelVectorizeUnroll(),
        ms.postproc.RewriteReductionBlock(),
        ms.postproc.RewriteTensorize(vectorize_init_loop=True),
        ms.postproc.RewriteLayout(),
    ]
    # RewriteTensorize touches only blocks marked for tensorization: the plain candidates
    # go through the same post-processors as MetaSchedule's default LLVM ones
    spaces = [
        ms.space_generator.PostOrderApply(sch_rules=rules, postprocs=postprocs),
        ms.space_generator.PostOrderApply(
            sch_rules=ms.ScheduleRule.create("llvm"), postprocs=postprocs
        ),
    ]
    return ms.space_generator.SpaceGeneratorUnion(
        spaces, sch_rules=rules, postprocs=postprocs, mutator_probs="llvm"
    )


def _register_heronlike_intrinsic(name: str) -> None:
    """Register the heronlike x86 intrinsic called ``name`` with TVM (in the worker)."""
    from heronlike.dla_targets import dlboost as d

    intrinsics = (d.PMADDWD_AVX2, d.PMADDWD_AVX512, d.PMADDWD_AVX2_A16, d.PMADDWD_AVX512_A16)
    known = {i.name: i for i in (*intrinsics, d.VNNI)}
    if name not in known:
        raise KeyError(f"no heronlike x86 intrinsic {name!r}; known: {', '.join(known)}")
    known[name].register()


def _tune(
    mod_json: str,
    target: dict[str, Any],
    trials: int,
    trials_per_iter: int,
    work_dir: str,
    seed: int,
    cores: int,
    number: int,
    repeat: int,
    min_repeat_ms: int,
    build_timeout_s: float = 60.0,
    time_limit_s: float | None = None,
    intrinsic: str | None = None,
) -> MetaScheduleResult:
    """Worker side of :meth:`MetaScheduleWorker.tune`."""
    import tvm
    from tvm.s_tir import meta_schedule as ms
    from tvm.target import Target

    from benchmarks.ms_build import fast_build

    mod = tvm.ir.load_json(mod_json)
    tgt = Target(target)
    # console: warnings only (the full log stays in work_dir/logs); tune_tir's logging set-up
    # resets the level to DEBUG, so set it before every tune
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    space: Any = "post-order-apply"
    if intrinsic is not None:
        _register_heronlike_intrinsic(intrinsic)
        space = intrinsic_space(intrinsic)
    t0 = time.perf_counter()
    curve = _curve_callback(t0, time_limit_s, trials)
    db = ms.tune_tir(
        mod=mod,
        target=tgt,
        work_dir=work_dir,
        max_trials_global=trials,
        num_trials_per_iter=min(trials_per_iter, trials),
        builder=ms.builder.LocalBuilder(
            max_workers=cores, timeout_sec=build_timeout_s, f_build=fast_build
        ),
        runner=ms.runner.LocalRunner(
            timeout_sec=30,
            evaluator_config=ms.runner.EvaluatorConfig(
                number=number,
                repeat=repeat,
                min_repeat_ms=min_repeat_ms,
                enable_cpu_cache_flush=False,
            ),
        ),
        cost_model="xgb",
        measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), curve],
        space=space,
        strategy="evolutionary",
        seed=seed,
        num_tuning_cores=cores,
    )
    latencies = []
    for rec in db.get_all_tuning_records():
        secs = [float(x) for x in (rec.run_secs or [])]
        ok = bool(secs) and max(secs) < FAILED_RUN_SECS / 10
        latencies.append(sum(secs) / len(secs) if ok else None)
    valid = [x for x in latencies if x is not None]
    artifact, error, vnni = None, None, None
    sch = ms.tir_integration.compile_tir(db, mod, tgt) if valid else None
    if sch is None:
        error = "no valid MetaSchedule candidate"
    else:
        path = Path(work_dir) / "best.so"
        executable = tvm.compile(sch.mod, target=tgt)
        executable.export_library(str(path))
        (Path(work_dir) / "best_trace.py").write_text(str(sch.trace))
        asm = executable_asm(executable)
        if asm is not None:
            (Path(work_dir) / "best.s").write_text(asm)
        vnni = asm_uses(asm) if asm is not None else library_uses_vnni(path)
        artifact = str(path)
    return MetaScheduleResult(
        artifact_path=artifact,
        trials_run=len(latencies),
        valid=len(valid),
        tuning_latency_s=min(valid) if valid else None,
        wall_s=time.perf_counter() - t0,
        error=error,
        curve=tuple(curve._inst.points),
        uses_vnni=vnni,
    )


class MetaScheduleWorker:
    """A worker process that runs MetaSchedule tunes one after the other.

    Args:
        cores: threads for TVM's runtime pool in the worker and in MetaSchedule's runner
            workers (``TVM_NUM_THREADS``), and builder processes.
        guard: register the VNNI intrinsic with the compact-tile guard
            (:func:`register_guarded_vnni`); ``False`` registers heronlike's as it is.

    The worker starts (and imports MetaSchedule, about 16 s) on the first :meth:`tune`.
    Use as a context manager or call :meth:`close`.
    """

    def __init__(self, *, cores: int, guard: bool = True) -> None:
        self.cores = int(cores)
        env = measure_env(self.cores)
        path = os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + path if path else "")
        self._worker = ManagedWorker(_init_worker, (bool(guard),), env=env)

    def tune(
        self,
        mod: Any,
        target: dict[str, Any],
        *,
        trials: int,
        work_dir: str | Path,
        seed: int = 0,
        trials_per_iter: int = 32,
        number: int = 3,
        repeat: int = 5,
        min_repeat_ms: float = 10.0,
        timeout_s: float | None = None,
        build_timeout_s: float = 60.0,
        time_limit_s: float | None = None,
        intrinsic: str | None = None,
    ) -> MetaScheduleResult:
        """Tune ``mod`` (an ``IRModule`` with a ``main`` PrimFunc) with MetaSchedule.

        Args:
            target: TVM target as a dict (``DLATarget.tvm_target()``).
            trials: ``max_trials_global``.
            work_dir: MetaSchedule's directory (JSON database, logs); the best kernel is
                exported there as ``best.so``.
            seed: MetaSchedule's seed (its search is not reproducible across runs anyway).
            trials_per_iter: candidates per search round (``num_trials_per_iter``).
            number, repeat, min_repeat_ms: the runner's ``EvaluatorConfig``.
            timeout_s: limit for the whole tune (default: 60 s + 30 s per trial); a tune
                past it is killed and reported as an error.
            build_timeout_s: the builder's limit per candidate.
            time_limit_s: search time budget: once spent, no new round starts (the tune
                ends with what it measured; ``None``: no limit).
            intrinsic: a heronlike x86 intrinsic's name (e.g. the vpmaddwd one) to tensorize
                onto (:func:`intrinsic_space`); ``None``: the target's default design space.

        Returns:
            A :class:`MetaScheduleResult`; a tune that raised or timed out is reported in its
            ``error`` with no artifact.
        """
        import tvm

        Path(work_dir).mkdir(parents=True, exist_ok=True)
        limit = timeout_s if timeout_s is not None else 60.0 + 30.0 * trials
        args = (
            tvm.ir.save_json(mod),
            dict(target),
            int(trials),
            int(trials_per_iter),
            str(work_dir),
            max(1, int(seed)),  # MetaSchedule rejects seed 0
            self.cores,
            int(number),
            int(repeat),
            int(round(min_repeat_ms)),
            float(build_timeout_s),
            None if time_limit_s is None else float(time_limit_s),
            intrinsic,
        )
        try:
            self._worker.start()  # imports are not charged to the tune
        except Exception as err:  # noqa: BLE001 - reported as the result
            return MetaScheduleResult(None, 0, 0, None, 0.0, f"worker failed to start: {err}")
        t0 = time.perf_counter()
        try:
            return self._worker.call(_tune, args, timeout_s=limit)
        except Exception as err:  # noqa: BLE001 - a failed baseline is data
            msg = [ln for ln in str(err).splitlines() if ln.strip()]
            return MetaScheduleResult(
                None,
                0,
                0,
                None,
                time.perf_counter() - t0,
                f"{type(err).__name__}: " + (msg[-1] if msg else ""),
            )

    def close(self) -> None:
        """Kill the worker process."""
        self._worker.kill()

    def __enter__(self) -> MetaScheduleWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------------------------------------
# the weight layout MetaSchedule's VNNI rule needs

#: operator -> (weight parameter position, its output-feature dim, its reduction dim), for the
#: operators of heronlike.ops whose weight maps onto the VNNI tile (n = 16 lanes, k = 4 bytes)
WEIGHT_DIMS: dict[str, tuple[int, int, int]] = {
    "gemm": (1, 0, 1),
    "gemv": (1, 0, 1),
    "bmm": (1, 1, 2),
    "c1d": (1, 0, 2),
    "c2d": (1, 0, 3),
    "dil": (1, 0, 3),
    "t2d": (1, 0, 3),
    "c3d": (1, 0, 4),
    "group_c2d": (1, 1, 4),  # (G, COg, KH, KW, CIg)
}


def packed_index(ndim: int, n_dim: int, k_dim: int):  # noqa: ANN201 - a plain function
    """The VNNI weight layout as an index function: dims in order with ``n`` replaced by
    ``n // 16`` and ``k`` by ``k // 4``, then ``n % 16, k % 4`` (GEMM: ``W[n//16, k//4, n%16,
    k%4]``, conv ``(CO, KH, KW, CI)``: ``OhwI16o4i``)."""

    def index(*idx):  # noqa: ANN002, ANN202
        outer = tuple(
            idx[i] // 16 if i == n_dim else idx[i] // 4 if i == k_dim else idx[i]
            for i in range(ndim)
        )
        return (*outer, idx[n_dim] % 16, idx[k_dim] % 4)

    return index


def pack_weight(w, n_dim: int, k_dim: int):  # noqa: ANN001, ANN201 - numpy in and out
    """``w`` rearranged to :func:`packed_index`'s layout (numpy)."""
    import numpy as np

    shape = []
    for i, s in enumerate(w.shape):
        shape += [s // 16, 16] if i == n_dim else [s // 4, 4] if i == k_dim else [s]
    t = w.reshape(shape)
    # positions of the 16 and the 4 in the reshaped array
    pos16 = n_dim + 1 + (1 if k_dim < n_dim else 0)
    pos4 = k_dim + 1 + (1 if n_dim < k_dim else 0)
    order = [i for i in range(t.ndim) if i not in (pos16, pos4)] + [pos16, pos4]
    return np.ascontiguousarray(t.transpose(order))


def pack_func_weight(func: Any, op: str) -> tuple[Any, tuple[int, int, int] | None]:
    """``func`` with its weight parameter in the VNNI layout, as a TVM user hands MetaSchedule
    a VNNI-ready weight (TVM's own VNNI dense does the same); ``(func, None)`` when the operator
    has no such weight or its extents are not multiples of 16 (``n``) and 4 (``k``)."""
    from tvm import s_tir
    from tvm.tirx import IndexMap

    dims = WEIGHT_DIMS.get(op)
    if dims is None:
        return func, None
    pos, n_dim, k_dim = dims
    weight = func.params[pos]  # a buffer variable (TVM 0.27)
    shape = [int(x) for x in weight.ty.shape]
    if shape[n_dim] % 16 or shape[k_dim] % 4:
        return func, None
    sch = s_tir.Schedule(func)
    reader = next(
        b
        for b in sch.get_child_blocks(sch.get_sblock("root"))
        if any(r.source.same_as(weight) for r in sch.get(b).reads)
    )
    index = IndexMap.from_func(
        packed_index(len(shape), n_dim, k_dim), ndim=len(shape), index_dtype="int32"
    )
    sch.transform_layout(reader, ("read", _read_index(sch, reader, weight)), index)
    return sch.mod["main"], dims


def _read_index(sch: Any, block: Any, buffer: Any) -> int:
    reads = sch.get(block).reads
    return next(i for i, r in enumerate(reads) if r.source.same_as(buffer))


#: MetaSchedule's block annotation that keeps ``AutoInline`` from inlining a block
MS_INLINE_RULE = "meta_schedule.inline_rule"


def widen_func_operands(func: Any, matches: Any) -> Any:
    """``func`` with the A operand of every stage in ``matches`` (heronlike
    :class:`~heronlike.intrinsic.IntrinsicMatch` es of the compute) widened as heronlike's
    kernel widens it (:func:`heronlike.rules.widen.widen_operand`) where the intrinsic reads A
    in a wider dtype (AVX2's ``vpmaddwd``, ``a_storage_dtype="int16"``), so MetaSchedule's
    tensorization finds the intrinsic's int16 operand. The widened producer (a new copy, or
    the retyped padding) is annotated so that MetaSchedule's ``AutoInline`` keeps it a stage of
    its own (inlined, the stage would read ``int16(A)`` and no longer match the intrinsic): the
    same materialised int16 copy heronlike's kernel writes. Unchanged where no intrinsic reads
    a wider A."""
    from tvm import s_tir

    from heronlike.rules.widen import widen_operand

    widened = []
    for m in matches:
        dtype = m.intrinsic.a_storage_dtype
        if dtype is None or dtype == m.a.dtype:
            continue
        func, name, _ = widen_operand(func, m.stage.name, m.a.buffer, dtype)
        widened.append(name)
    if not widened:
        return func
    sch = s_tir.Schedule(func)
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if str(sch.get(block).writes[0].source.name) in widened:
            sch.annotate(block, MS_INLINE_RULE, "disable")
    return sch.mod["main"]


def pack_func_layouts(func: Any, layouts: dict[int, Any]) -> Any:
    """``func`` with parameter ``i`` re-laid out by ``layouts[i]`` (an index function such as
    heronlike's :class:`~heronlike.template.PackedLayout` or
    :class:`~rules.general.PermutedLayout`: logical indices in, stored indices out), through
    ``transform_layout`` on the block that reads it: the layout heronlike's kernel takes, given
    to MetaSchedule too (a one-time weight pre-packing outside the timing for both). The
    caller packs the arrays with the same layouts' ``pack``."""
    from tvm import s_tir
    from tvm.tirx import IndexMap

    sch = s_tir.Schedule(func)
    for pos, layout in sorted(layouts.items()):
        buf = sch.mod["main"].params[pos]
        ndim = len(buf.ty.shape)
        reader = next(
            b
            for b in sch.get_child_blocks(sch.get_sblock("root"))
            if any(r.source.same_as(buf) for r in sch.get(b).reads)
        )
        index = IndexMap.from_func(layout, ndim=ndim, index_dtype="int32")
        sch.transform_layout(reader, ("read", _read_index(sch, reader, buf)), index)
    return sch.mod["main"]
