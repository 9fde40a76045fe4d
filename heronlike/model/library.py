"""Kernel libraries whose operator source is a model: one kernel per task.

:func:`heronlike.library.build` takes a hand-written operator list; :func:`build_library` takes a
model instead (a Relax ``IRModule``, an ``.onnx`` file, ``MODULE:FUNCTION``): its tasks
(:mod:`heronlike.model.tasks`) are tuned with :func:`heronlike.model.tune_model` and each
task's best kernel is exported by :func:`heronlike.library.builder.export` into the same
``kernels.so`` + ``manifest.json`` format. A kernel's operator name is the model's fused
function (``fused_conv2d_add_relu``), its inputs the function's, so the dispatcher calls it
as ``load(path).call("fused_conv2d_add_relu", x, w, b)``. The check compares every kernel on
random inputs with TVM's unscheduled build of the same function
(:func:`heronlike.reference.reference_outputs`).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..records import Records, current_versions
from ..target import DLATarget
from .tasks import ModelTask, fused_module, tasks_of

__all__ = ["TaskWorkload", "build_library", "is_model_source"]


@dataclass(frozen=True)
class TaskWorkload:
    """A model task in the shape :func:`heronlike.library.builder.export` reads a workload.

    Attributes:
        op: the operator name of the kernel (the task's first fused function's name).
        name: the task's readable name (function and shapes).
        occurrences: its weight in the model.
        dtype: the output's dtype.
    """

    op: str
    name: str
    occurrences: int
    dtype: str

    @property
    def params(self) -> dict[str, int]:
        return {}

    @property
    def label(self) -> str:
        return self.name


def is_model_source(source: Any) -> bool:
    """Whether ``source`` names a model rather than an operator list: a Relax ``IRModule``,
    an ``onnx.ModelProto``, an ``.onnx`` path or ``MODULE:FUNCTION``."""
    import tvm

    if isinstance(source, tvm.IRModule) or type(source).__name__ == "ModelProto":
        return True
    if isinstance(source, str | Path):
        text = str(source)
        return text.endswith(".onnx") or (":" in text and not Path(text).exists())
    return False


def build_library(
    model: Any,
    target: str | Mapping[str, Any] | DLATarget = "llvm",
    *,
    trials: int,
    out_dir: str | Path,
    records: str | Path | None = None,
    shapes: Mapping[str, int] | None = None,
    check: bool = True,
    seed: int = 0,
    fast_math: bool = True,
    **tune_options: Any,
) -> Any:
    """Tune ``model``'s tasks within ``trials`` (resuming from ``records``) and export every
    tuned task's best kernel into one library at ``out_dir``.

    Args:
        model: a Relax ``IRModule``, ``onnx.ModelProto``, ``.onnx`` path or ``MODULE:FUNCTION``.
        target, trials, records, shapes, seed, fast_math: as
            :func:`heronlike.model.tune_model` (``trials`` 0: export from the records only).
        out_dir: the library folder (``kernels.so`` + ``manifest.json``).
        check: run every kernel on random inputs against TVM's unscheduled build of its
            function (``rtol=1e-3`` for floats, exact for integers); the outcome is in the
            manifest (``checked``).
        tune_options: passed to :func:`heronlike.model.tune_model` (``explorer``,
            ``batch_size``, ``strategy``, ``progress`` ...).

    Returns:
        A :class:`heronlike.library.builder.BuildResult`; ``missing`` lists the tasks without
        a usable record (and those no rule schedules), left out of the library.

    Raises:
        InvalidArgumentError: no task has a usable record; everything :func:`tune_model`
            raises for bad input.
    """
    from ..library.builder import best_usable_trial, export, finish_build
    from ..session import DEFAULT_RECORDS
    from .importers import load_model_spec
    from .tuning import tune_model

    t_start = time.perf_counter()
    if isinstance(model, str | Path) and not str(model).endswith(".onnx"):
        model = load_model_spec(model)
    records_path = Path(records) if records is not None else DEFAULT_RECORDS
    schedule = None
    if trials > 0:
        tuned = tune_model(
            model, target, trials=trials, records=records_path, shapes=shapes, seed=seed,
            fast_math=fast_math, **tune_options,
        )  # fmt: skip
        schedule = tuned.schedule
    t_tuned = time.perf_counter()
    mod, tgt = fused_module(model, target, shapes=shapes, fast_math=fast_math)
    tasks = tasks_of(mod, tgt)
    versions = current_versions()
    entries, missing, kept = [], [], []
    with Records(records_path) as db:
        for task in tasks:
            best = best_usable_trial(db, task.space, versions) if task.tunable else None
            if best is None:
                missing.append(task.name)
                continue
            out_dtype = str(task.func.params[-1].dtype)
            w = TaskWorkload(task.functions[0], task.name, task.weight, out_dtype)
            entries.append((w, task.space, best))
            kept.append(task)
    if missing:
        warnings.warn(
            f"no usable record for {len(missing)} task(s), left out of the library: "
            + "; ".join(missing),
            stacklevel=2,
        )
    manifest = export(
        entries, out_dir, records=records_path, extra={"missing": missing, "source": "model"}
    )
    return finish_build(
        out_dir,
        manifest,
        (lambda: _check(out_dir, kept, seed)) if check else None,
        schedule=schedule,
        workloads=[e[0] for e in entries],
        missing=missing,
        started=(t_start, t_tuned),
    )


def _check(out_dir: str | Path, tasks: list[ModelTask], seed: int) -> dict[str, bool]:
    """Each kernel of the library against TVM's unscheduled build of its task's function."""
    from ..dag import ComputeDAG
    from ..library.builder import random_operands
    from ..library.runtime import load
    from ..reference import reference_outputs

    lib = load(out_dir)
    rng = np.random.default_rng(seed)
    result = {}
    for k, task in zip(lib.kernels, tasks, strict=True):
        dag = ComputeDAG.from_compute(task.func)
        xs = random_operands(k, rng)
        got = lib.run(k, *xs)
        arrays, given = [], iter(xs)
        for p in dag.params:
            arrays.append(np.zeros(p.shape, p.dtype) if p.name in dag.outputs else next(given))
        want = next(iter(reference_outputs(dag, arrays).values()))
        got = got[0] if isinstance(got, tuple) else got
        if np.issubdtype(want.dtype, np.integer):
            result[k.function] = bool(np.array_equal(got, want))
        else:
            red = max(1, int(task.flop / 2 / max(1, want.size)))
            result[k.function] = bool(np.allclose(got, want, rtol=1e-3, atol=1e-3 * math.sqrt(red)))
    return result
