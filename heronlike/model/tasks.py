"""Tasks of a model: one per distinct PrimFunc of the fused module.

Two PrimFuncs are one task when their structural hashes (:attr:`ComputeDAG.workload_key`) are
equal, as in MetaSchedule's ``extract_tasks`` with ``module_equality="structural"``; the task's
weight is the number of ``call_tir`` sites that call any of them (Ansor / MetaSchedule weigh a
task by its occurrences the same way).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import relax, tirx

from ..dag import ComputeDAG
from ..errors import HeronlikeError, SymbolicShapeError
from ..target import DLATarget, get_target
from .importers import as_relax
from .pipeline import fuse

__all__ = ["ModelTask", "extract_tasks", "fused_module"]


@dataclass
class ModelTask:
    """One distinct PrimFunc of a model.

    Attributes:
        name: readable: the fused function's name and its tensors' shapes
            (``"fused_conv2d_add_relu 1x3x16x16, 8x3x3x3, 1x8x1x1 -> 1x8x16x16"``).
        func: the PrimFunc (with ``global_symbol = "main"``), what :func:`heronlike.tune` takes.
        weight: how many times the model calls it.
        workload_key: its records key (structural hash).
        functions: the names of the model's PrimFuncs that are this task.
        flop: operations of one call (:meth:`ComputeDAG.flop`).
        reason: why no rule of the target can schedule it (None when one can); such a task is
            compiled with TVM's default lowering and is not tuned.
        space: the schedule space (None when ``reason`` is set).
    """

    name: str
    func: tirx.PrimFunc
    weight: int
    workload_key: str
    functions: list[str] = field(default_factory=list)
    flop: float = 0.0
    reason: str | None = None
    space: Any = None

    @property
    def tunable(self) -> bool:
        """Whether the target's rules schedule it (it has a space)."""
        return self.reason is None


def fused_module(
    model: Any,
    target: str | Mapping[str, Any] | DLATarget,
    *,
    shapes: Mapping[str, int] | None,
    fast_math: bool = True,
) -> tuple[tvm.IRModule, DLATarget]:
    """The model's fused Relax module for ``target`` (:func:`heronlike.model.pipeline.fuse`,
    with its ``fast_math``), each PrimFunc marked with the parameters that are constants at
    every call site (attribute ``layout_free_buffers``, TVM's name for weights a kernel may take
    pre-packed)."""
    tgt = get_target(target)
    mod = fuse(as_relax(model, shapes=shapes), tgt, fast_math=fast_math)
    for name, indices in constant_params(mod).items():
        gv = mod.get_global_var(name)
        func = mod[gv]
        if isinstance(func, tirx.PrimFunc):
            mod[gv] = func.with_attr("layout_free_buffers", [int(i) for i in sorted(indices)])
    return mod, tgt


def extract_tasks(
    model: Any,
    target: str | Mapping[str, Any] | DLATarget = "llvm",
    *,
    shapes: Mapping[str, int] | None = None,
    fast_math: bool = True,
) -> list[ModelTask]:
    """The tasks of ``model`` on ``target``, heaviest (weight x FLOP) first.

    Args:
        model: a Relax ``IRModule``, an ``.onnx`` path or ``onnx.ModelProto``
            (:func:`heronlike.model.as_relax`).
        target: a heronlike target (``"llvm"``, ``"dlboost"`` ...).
        shapes: values of symbolic dimensions (``{"batch": 1}``).
        fast_math: approximate ``exp`` / ``erf`` / ``tanh`` / ``softmax`` by TVM's
            vectorisable polynomials (:func:`heronlike.model.pipeline.fuse`); the tasks differ
            with it, so tune and compile with the same setting.

    Raises:
        SymbolicShapeError: the model has a symbolic dimension ``shapes`` does not bind.
        ModelImportError, InvalidArgumentError, UnknownTargetError: bad model or target.
    """
    mod, tgt = fused_module(model, target, shapes=shapes, fast_math=fast_math)
    return tasks_of(mod, tgt)


def tasks_of(mod: tvm.IRModule, target: DLATarget) -> list[ModelTask]:
    """The tasks of an already fused module (:func:`extract_tasks` without the pipeline)."""
    calls = call_counts(mod)
    by_key: dict[str, ModelTask] = {}
    for gv, func in sorted(mod.functions.items(), key=lambda kv: kv[0].name_hint):
        if not isinstance(func, tirx.PrimFunc) or calls.get(gv.name_hint, 0) == 0:
            continue
        try:
            dag = ComputeDAG.from_compute(func)
        except SymbolicShapeError as exc:
            raise SymbolicShapeError(
                f"{gv.name_hint}: {exc} (pass shapes={{{exc.dimension!r}: ...}})",
                dimension=exc.dimension,
            ) from None
        except HeronlikeError as exc:
            task = ModelTask(
                name=gv.name_hint,
                func=func.with_attr("global_symbol", "main"),
                weight=calls[gv.name_hint],
                workload_key=f"unanalysable:{gv.name_hint}",
                functions=[gv.name_hint],
                reason=str(exc),
            )
            by_key[task.workload_key] = task
            continue
        key = dag.workload_key
        if key in by_key:
            by_key[key].weight += calls[gv.name_hint]
            by_key[key].functions.append(gv.name_hint)
            continue
        task = ModelTask(
            name=f"{gv.name_hint} {_shapes(dag)}",
            func=dag.func,
            weight=calls[gv.name_hint],
            workload_key=key,
            functions=[gv.name_hint],
            flop=dag.flop(),
        )
        try:
            from ..space import generate_space

            task.space = generate_space(dag, target)
        except HeronlikeError as exc:
            task.reason = f"{type(exc).__name__}: {exc}"
        by_key[key] = task
    return sorted(by_key.values(), key=lambda t: (-t.weight * t.flop, t.name))


def constant_params(mod: tvm.IRModule) -> dict[str, set[int]]:
    """For every PrimFunc called through ``call_tir``: the indices of its parameters that get a
    ``relax.Constant`` at every call site."""
    out: dict[str, set[int]] = {}

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.call_tir":
            args = expr.args[1].fields if isinstance(expr.args[1], relax.Tuple) else [expr.args[1]]
            here = {i for i, a in enumerate(args) if isinstance(a, tvm.ir.expr.Constant)}
            name = expr.args[0].name_hint
            out[name] = out[name] & here if name in out else here

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return out


def call_counts(mod: tvm.IRModule) -> Counter[str]:
    """``call_tir`` sites per PrimFunc name over every Relax function of ``mod``."""
    counts: Counter[str] = Counter()

    def visit(expr: Any) -> None:
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.call_tir":
            counts[expr.args[0].name_hint] += 1

    for func in mod.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return counts


def _shapes(dag: ComputeDAG) -> str:
    ins = [p for p in dag.params if p.name not in dag.outputs]
    outs = [p for p in dag.params if p.name in dag.outputs]

    def text(ps: Any) -> str:
        return ", ".join("x".join(str(d) for d in p.shape) or "scalar" for p in ps)

    return f"{text(ins)} -> {text(outs)}"
